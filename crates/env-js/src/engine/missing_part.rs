//! A note under a cell's `TypeError` when the line it names reads a part that some
//! lines do not have: `line.split('user=')[1].split(' ')` over every line of the
//! context is `undefined` on a line with no `user=`, and `line.match(re)[1]` is `null`
//! on a line `re` does not match. "cannot read property 'split' of undefined" names
//! neither the line nor the fix, and a model tends to read it as `context` not being
//! defined; the note names the part, why it is missing, and the filter to write first.
//! It reads only the model's code and its error.

use std::sync::LazyLock;

use regex::Regex;

/// `error` (a cell's error, its source line appended as `line N: …`) with the note
/// when its header reads a property of `undefined` after a `.split(…)[k]` (k ≥ 1) on
/// that line, or of `null` after a `.match(…)[…]`; else `error` as it is.
pub(super) fn explained(error: String) -> String {
    let header = error.lines().next().unwrap_or_default().trim();
    if !header.starts_with("TypeError: cannot read property") {
        return error;
    }
    let Some(source) = error
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("line "))
        .and_then(|line| line.split_once(": ").map(|(_, text)| text))
    else {
        return error;
    };
    let note = if header.ends_with("of undefined") {
        split_part(source).map(|(separator, index)| {
            format!(
                "`.split({separator})[{index}]` is undefined on a line that has no {separator} (a header, a blank last line): keep only the lines that include it first, as in `context.split('\\n').filter(line => line.includes({separator}))`, and split those."
            )
        })
    } else if header.ends_with("of null") && matched_part(source) {
        Some("`.match(…)` is null on a line the pattern does not match: keep the lines it matches first, as in `const m = line.match(re); if (m) { … m[1] … }`.".to_owned())
    } else {
        None
    };
    match note {
        Some(note) => format!("{error}\n{note}"),
        None => error,
    }
}

/// The separator (as written, quotes and all) and the index of the first
/// `.split(…)[k]` with k ≥ 1 in `source`.
fn split_part(source: &str) -> Option<(&str, &str)> {
    static SPLIT_INDEX: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"\.split\(\s*('[^']*'|"[^"]*"|`[^`]*`)\s*\)\s*\[\s*([1-9][0-9]*)\s*\]"#).ok()
    });
    let found = SPLIT_INDEX.as_ref()?.captures(source)?;
    Some((found.get(1)?.as_str(), found.get(2)?.as_str()))
}

/// Whether `source` indexes what a `.match(…)` gives (`line.match(/x=(\w+)/)[1]`).
fn matched_part(source: &str) -> bool {
    static MATCH_INDEX: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"\.match\(.*\)\s*\[").ok());
    MATCH_INDEX.as_ref().is_some_and(|re| re.is_match(source))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_part_read_on_a_line_without_it_is_explained() {
        // As the engine reports it.
        let error = "TypeError: cannot read property 'split' of undefined\n    at <anonymous> (<cell 1>:1:50)\n    line 1: const users = context.split('\\n').map(line => line.split('user=')[1].split(' ')[0]);".to_owned();
        let told = explained(error.clone());
        assert!(told.starts_with(&error), "{told}");
        assert!(
            told.ends_with("`.split('user=')[1]` is undefined on a line that has no 'user=' (a header, a blank last line): keep only the lines that include it first, as in `context.split('\\n').filter(line => line.includes('user='))`, and split those."),
            "{told}"
        );
    }

    #[test]
    fn a_match_part_read_on_a_line_it_does_not_match_is_explained() {
        let error = "TypeError: cannot read property '1' of null\n    at <eval> (<cell 2>:1:60)\n    line 1: const sizes = lines.map(l => l.match(/bytes=(\\d+)/)[1]);".to_owned();
        assert!(explained(error).contains("`.match(…)` is null on a line"));
    }

    #[test]
    fn other_errors_are_left_as_they_are() {
        for error in [
            "TypeError: cannot read property 'x' of undefined\n    line 3: const y = obj.x.z;",
            "TypeError: cannot read property 'split' of undefined\n    line 1: const a = b.split(',')[0].split(' ');",
            "TypeError: cannot read property 'split' of undefined",
            "ReferenceError: require is not defined\n    line 1: require('x').split('a')[1]",
        ] {
            assert_eq!(explained(error.to_owned()), error);
        }
    }
}
