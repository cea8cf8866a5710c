//! A block that replaces `context` with text written into the code — a string or
//! template literal assigned to `context` at the top level — is not run: everything
//! after that line would work on the few lines the model copied from the metadata's
//! preview, not on the context, and the REPL's `context` would stay clobbered for every
//! later block.
//!
//! The local model did exactly that on every `pairs` item under `--env js`
//! (docs/eval.md, the after-example-plan reading): ``const context = `person 000001:
//! city=Hanoi year=2015\n…city=Pe`;`` — the preview, cut mid-word — then counted over
//! those five lines, printed `0`, and sent the same block until forced.

use std::sync::LazyLock;

use regex::Regex;

/// A top-level assignment of a literal to `context`, in Python or JavaScript:
/// `context = "…"`, `context = '''…`, `context = r"…"`, `context: str = "…"`,
/// ``const context = `…` ``, `let context = '…'`. Indented lines are left alone (a
/// function's own local `context` does not touch the REPL's). It reads lines, not the
/// language: a line inside a multi-line string that starts `context = "` is taken as
/// an assignment too. A constant pattern: the
/// tests below compile it, so `None` never happens.
static LITERAL_ASSIGNMENT: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(
        r#"(?m)^(?:(?:const|let|var)[ \t]+)?context[ \t]*(?::[ \t]*str[ \t]*)?=[ \t]*(?:[rRbBuUfF]{1,2})?["'`]"#,
    )
    .ok()
});

/// The line of `code` that assigns a literal to `context`, trimmed, when there is one.
pub(super) fn assignment(code: &str) -> Option<&str> {
    let found = LITERAL_ASSIGNMENT.as_ref()?.find(code)?;
    let line_end = code[found.start()..]
        .find('\n')
        .map_or(code.len(), |end| found.start() + end);
    Some(code[found.start()..line_end].trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_js_template_literal_the_local_model_wrote() {
        let code = "const context = `person 000001: city=Hanoi year=2015\\nperson 000002: city=Pe`;\n\nconst pairs = context.split('\\n');\nconsole.log(pairs.length);";
        assert_eq!(
            assignment(code),
            Some("const context = `person 000001: city=Hanoi year=2015\\nperson 000002: city=Pe`;")
        );
    }

    #[test]
    fn finds_python_and_js_string_literals_of_every_quote() {
        for code in [
            "context = \"person 000001: city=Lima\"\nprint(len(context))",
            "context = '''person 000001\nperson 000002'''",
            "context = r'label=fraud'",
            "context: str = \"a\"",
            "x = 1\ncontext='a'",
            "let context = 'a';",
            "var context = \"a\";",
        ] {
            assert!(assignment(code).is_some(), "{code}");
        }
    }

    #[test]
    fn leaves_code_that_reads_or_derives_from_context_alone() {
        for code in [
            "lines = context.split('\\n')",
            "context = context.strip()",
            "const lines = context.split('\\n');",
            "if context == 'a':\n    print(1)",
            "my_context = 'a'",
            "context_0 = 'a'",
            "def f():\n    context = 'local'\n    return context",
            "print('context = \"a\"')",
        ] {
            assert_eq!(assignment(code), None, "{code}");
        }
    }
}
