//! A block that replaces `context` with text written into the code — a string or
//! template literal assigned to `context` at the top level — is not run: everything
//! after that line would work on the few lines the model copied from the metadata's
//! preview, not on the context, and the REPL's `context` would stay clobbered for every
//! later block. The model is told what `context` already holds.

use super::{Block, Correction, Form, Rule, Verdict};

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

/// The rule.
pub(super) struct ContextLiteral;

impl Correction for ContextLiteral {
    fn rule(&self) -> Rule {
        Rule::ContextLiteral
    }

    fn before_block(&self, block: &Block<'_>) -> Verdict {
        let Form::Code { language } = block.form else {
            return Verdict::Take;
        };
        match assignment(block.code) {
            Some(line) if block.context_chars > 0 => {
                Verdict::Refuse(text(block.code, language, line, block.context_chars))
            }
            _ => Verdict::Take,
        }
    }
}

/// The report of a block not run because its line `assignment` replaces `context`.
fn text(code: &str, language: &str, assignment: &str, context_chars: u64) -> String {
    let line: String = assignment.chars().take(80).collect();
    let cut = if line.len() < assignment.len() {
        " …"
    } else {
        ""
    };
    format!(
        "Code not run: its line\n{line}{cut}\nreplaces `context` with text written into the code.\n```{language}\n{code}\n```\n\n`context` already holds the whole context ({context_chars} characters); the text you were shown is only its first characters. Remove that line and run the rest on `context` as it is."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_js_template_literal_cut_mid_word() {
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

    #[test]
    fn the_text_the_model_reads() {
        let log = crate::rlm::log::BlockLog::new();
        let code = "context = '''order 1: amount=5'''\nprint(len(context))";
        let ask = |context_chars| {
            ContextLiteral.before_block(&Block {
                form: Form::Code { language: "python" },
                code,
                log: &log,
                context_chars,
            })
        };
        // Without a context there is nothing to clobber.
        assert_eq!(ask(0), Verdict::Take);
        insta::assert_debug_snapshot!("context_literal", ask(12_000));
    }
}
