//! A task that asks how many pairs of records share a field's value, and code that
//! pairs nothing. The local model filtered the people born after 2000 and printed how
//! many there were — `len(filtered_pairs)`, 293 for 3584 pairs — on four of five items
//! of two held-out seeds (docs/eval.md, s19-seed19 and s19b-seed20 python `pairs`).
//!
//! Pairing shows in code as a count per value and `n * (n - 1) / 2`, `combinations`, a
//! `Counter` or a grouping, an inner loop from `i + 1`, or a plan's `pairs` reduction;
//! code with none of these counted records. Like [`super::selection`], the check is a
//! reason to question an answer once with the task's call, not to refuse it.

use rlm_plan::spec::{Map, Reduce};
use rlm_plan::task_fit::exact_plan_for_task;

use super::selection::uncommented;

/// What code that pairs records shows, lowercased (Python and JavaScript alike).
const PAIRING_SIGNS: [&str; 16] = [
    "combinations",
    "comb(",
    "//2",
    "// 2",
    "/2",
    "/ 2",
    "-1",
    "- 1",
    "counter",
    "defaultdict",
    "groupby",
    "setdefault",
    "i+1",
    "i + 1",
    "'pairs'",
    "\"pairs\"",
];

/// The field whose shared values `task` asks to pair (`city` of "how many pairs of
/// different persons … live in the same city"), where its exact plan reduces to pairs.
pub(super) fn paired_field(task: &str) -> Option<String> {
    let plan = exact_plan_for_task(task)?;
    let (Reduce::Pairs, Map::Extract(pattern)) = (&plan.reduce, &plan.map) else {
        return None;
    };
    let (field, _) = pattern.split_once('=')?;
    Some(field.to_owned())
}

/// True when `code`, its comment lines left out, shows no sign of pairing records
/// ([`PAIRING_SIGNS`]).
pub(super) fn pairs_nothing(code: &str) -> bool {
    let code = uncommented(code);
    !PAIRING_SIGNS.iter().any(|sign| code.contains(sign))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAIRS: &str = "How many pairs of different persons in the context live in the same city and were both born after 2000 (year > 2000)? Answer with a number.";

    #[test]
    fn a_pairs_task_names_its_field_and_other_tasks_none() {
        assert_eq!(paired_field(PAIRS).as_deref(), Some("city"));
        assert_eq!(
            paired_field("What is the sum of the amount fields of the records with label=fraud?"),
            None
        );
    }

    #[test]
    fn code_that_counts_records_pairs_nothing_and_code_that_pairs_shows_it() {
        // s19b-seed20 python `pairs` items 0–2 and 4, as the model wrote them.
        let counted = "import re\n\n# Extract city and birth year information from the context\npattern = r'city=(\\w+) year=(\\d+)'\nmatches = re.findall(pattern, context)\n\n# Filter pairs where both persons were born after 2000\nfiltered_pairs = [(person1, person2) for person1, person2 in matches if int(person2) > 2000]\n\n# Count the number of such pairs\nnum_pairs = len(filtered_pairs)\nprint(num_pairs)";
        assert!(pairs_nothing(counted));
        // A comment that says "pairs … - 1" pairs nothing either.
        assert!(pairs_nothing("# n * (n - 1) // 2 pairs\nprint(len(rows))"));
        for paired in [
            "from collections import Counter\nc = Counter(cities)\nprint(sum(n * (n - 1) // 2 for n in c.values()))",
            "from itertools import combinations\nprint(sum(1 for a, b in combinations(rows, 2) if a == b))",
            "let n = 0;\nfor (let i = 0; i < xs.length; i++) for (let j = i + 1; j < xs.length; j++) if (xs[i] === xs[j]) n++;\nconsole.log(n);",
            "print(map_reduce(filter={\"where\": \"year > 2000\"}, map={\"extract\": \"city=(\\\\w+)\"}, reduce={\"op\": \"pairs\"}))",
        ] {
            assert!(!pairs_nothing(paired), "{paired}");
        }
    }
}
