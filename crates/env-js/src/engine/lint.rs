//! Mistakes in a cell that run without an error and give a wrong result, named after
//! the cell's output so that a model does not take that result as its answer.
//!
//! The one read now: a `while` loop that tests `re.exec(text)` and calls it again in
//! its body (`while (re.exec(context) !== null) { matches.push(re.exec(context)); }`).
//! Each call takes the next match, so the loop keeps every other match and pushes a
//! `null` at the end, so a count over it is about half the true one, and a model
//! that reads the printed figure takes it as its answer.

use std::sync::LazyLock;

use regex::Regex;

/// `while (NAME.exec(`: a loop whose test calls `exec` on a regular expression without
/// keeping the match (`while ((m = re.exec(s)) !== null)` keeps it and is not matched).
/// A constant pattern: the tests below compile it, so `None` never happens.
static EXEC_TESTED: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"while\s*\(\s*([A-Za-z_$][\w$]*)\.exec\(").ok());

/// The note for `code` when a loop tests `NAME.exec(…)` and `NAME.exec(` is called
/// again elsewhere in the cell; `None` otherwise.
pub(super) fn exec_called_twice(code: &str) -> Option<String> {
    let name = EXEC_TESTED.as_ref()?.captures(code)?.get(1)?.as_str();
    let call = format!("{name}.exec(");
    if code.matches(&call).count() < 2 {
        return None;
    }
    Some(format!(
        "note: your loop calls `{name}.exec(…)` in its test and again in its body; each call takes the next match, so every other match is skipped and the last one is null. The result above is wrong. Keep the match the test found — `let m; while ((m = {name}.exec(context)) !== null) {{ … m … }}` — or loop `for (const m of context.matchAll({name}))`."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pattern_compiles() {
        assert!(EXEC_TESTED.is_some());
    }

    #[test]
    fn names_the_loop_the_local_model_wrote() {
        let code = "const regex = /city=(\\w+) year=(\\d+)/g;\nlet matches = [];\nwhile (regex.exec(context) !== null) {\n  matches.push(regex.exec(context));\n}\nconsole.log(matches.length);";
        let note = exec_called_twice(code).expect("a note");
        assert!(note.contains("`regex.exec(…)`"), "{note}");
        assert!(
            note.contains("while ((m = regex.exec(context)) !== null)"),
            "{note}"
        );
    }

    #[test]
    fn leaves_the_loops_that_keep_their_match_alone() {
        for code in [
            "let m;\nwhile ((m = re.exec(context)) !== null) { out.push(m[1]); }",
            "while (re.exec(context) !== null) { n++; }",
            "for (const m of context.matchAll(re)) { out.push(m[1]); }",
            "const m = re.exec(context);\nconst n = re.exec(context);",
        ] {
            assert_eq!(exec_called_twice(code), None, "{code}");
        }
    }
}
