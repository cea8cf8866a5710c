//! A block that is the REPL's own error message copied back — `SyntaxError: expecting
//! ';'\n    at <cell 3>:1:25` — is not run: an error message is not code, and running
//! it only raises a new error that names the next cell, which the model may copy
//! again (the cell number changes each time, so the repeat limit never matches). A
//! block is read as an echo when its first line is an error's header and every line of
//! it was shown before in an output, digits aside.

use super::{Block, Correction, Form, Rule, Verdict};

/// The header of the error a block echoes, when every non-empty line of `code` is a
/// line of one of the `outputs` shown before (compared with their digits masked, so
/// that `<cell 3>:1:25` matches `<cell 4>:1:24`) and its first line reads as an
/// error's header (`SyntaxError: …`, `InternalError:`, `Traceback (most recent call
/// last):`, `Error: …`).
pub(super) fn read<'a, 'o>(
    code: &'a str,
    outputs: impl IntoIterator<Item = &'o str>,
) -> Option<&'a str> {
    let mut lines = code.lines().map(str::trim).filter(|line| !line.is_empty());
    let header = lines.next()?;
    if !is_error_header(header) {
        return None;
    }
    let shown: Vec<String> = outputs
        .into_iter()
        .flat_map(str::lines)
        .map(masked)
        .collect();
    let seen = |line: &str| shown.contains(&masked(line));
    (seen(header) && lines.all(seen)).then_some(header)
}

/// Whether `line` begins as an error message: a name ending in `Error` or
/// `Exception` (or `Error` alone) followed by a colon or nothing, or Python's
/// traceback header.
fn is_error_header(line: &str) -> bool {
    if line.starts_with("Traceback (most recent call last)") {
        return true;
    }
    let name = line.split(':').next().unwrap_or_default();
    let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '.');
    is_name
        && (name.ends_with("Error") || name.ends_with("Exception"))
        && (line.len() == name.len() || line[name.len()..].starts_with(':'))
}

/// `line` trimmed, with each run of digits replaced by one `#`.
fn masked(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_digits = false;
    for c in line.trim().chars() {
        if c.is_ascii_digit() {
            if !in_digits {
                out.push('#');
            }
            in_digits = true;
        } else {
            out.push(c);
            in_digits = false;
        }
    }
    out
}

/// The rule.
pub(super) struct EchoedError;

impl Correction for EchoedError {
    fn rule(&self) -> Rule {
        Rule::EchoedError
    }

    fn before_block(&self, block: &Block<'_>) -> Verdict {
        let Form::Code { language } = block.form else {
            return Verdict::Take;
        };
        match read(block.code, block.log.outputs()) {
            Some(header) => Verdict::Refuse(format!(
                "Code not run: it is the REPL's error message (`{header}`) copied back, not code; run, it only raises another error.\n```{language}\n{}\n```\n\nThe error came from your code before it. Send that code again with the mistake fixed, or new code that computes the answer from `context`.",
                block.code
            )),
            None => Verdict::Take,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "SyntaxError: expecting ';'\n    at <cell 3>:1:25";

    #[test]
    fn the_error_of_the_last_output_with_the_next_cell_number_is_an_echo() {
        let code = "SyntaxError: expecting ';'\n    at <cell 4>:1:24";
        assert_eq!(read(code, [OUTPUT]), Some("SyntaxError: expecting ';'"));
    }

    #[test]
    fn an_error_header_alone_with_an_empty_message_is_an_echo() {
        assert_eq!(
            read("InternalError: ", ["InternalError: "]),
            Some("InternalError:")
        );
    }

    #[test]
    fn a_python_traceback_copied_back_is_an_echo() {
        let output = "Traceback (most recent call last):\n  File \"<cell>\", line 3, in <module>\nNameError: name 'x' is not defined";
        let code = "Traceback (most recent call last):\n  File \"<cell>\", line 4, in <module>\nNameError: name 'x' is not defined\n";
        assert!(read(code, ["12", output]).is_some());
    }

    #[test]
    fn an_error_never_shown_is_not_an_echo() {
        assert_eq!(read("SyntaxError: expecting ';'", ["42"]), None);
        assert_eq!(read("SyntaxError: expecting ';'", []), None);
    }

    #[test]
    fn code_after_a_copied_error_is_not_an_echo() {
        let code = "SyntaxError: expecting ';'\nconsole.log(context.length)";
        assert_eq!(read(code, [OUTPUT]), None);
    }

    #[test]
    fn code_that_raises_or_names_an_error_is_not_an_echo() {
        let output = "ValueError: bad\nValueError: bad";
        assert_eq!(read("raise ValueError('bad')", [output]), None);
        assert_eq!(read("throw new Error('bad')", ["Error: bad"]), None);
        // A Python annotation reads as a header but is not in any output.
        assert_eq!(read("MyError: int = 5", ["5"]), None);
    }

    #[test]
    fn a_header_needs_a_name_that_ends_in_error_or_exception() {
        assert!(is_error_header("Error: x"));
        assert!(is_error_header(
            "json.decoder.JSONDecodeError: Expecting value"
        ));
        assert!(is_error_header("RuntimeException"));
        assert!(!is_error_header("count: 3"));
        assert!(!is_error_header("Errors were: 3"));
        assert!(!is_error_header("my Error: x"));
    }

    #[test]
    fn the_text_the_model_reads() {
        let mut log = crate::rlm::log::BlockLog::new();
        log.record("console.log(x", OUTPUT);
        let verdict = EchoedError.before_block(&Block {
            form: Form::Code { language: "js" },
            code: "SyntaxError: expecting ';'\n    at <cell 4>:1:24",
            log: &log,
            context_chars: 0,
        });
        insta::assert_debug_snapshot!("echoed_error", verdict);
    }
}
