//! Notebook semantics for JavaScript cells: a top-level declaration of one step is
//! visible in the next, and a later step may declare the same name again.
//!
//! A script's top-level `let`, `const` and `class` create *lexical* global bindings,
//! and declaring one again in a later script is a `SyntaxError` — the opposite of what a
//! model rewriting a cell expects. So before a cell runs, its top-level declarations
//! are turned into `var` declarations, which are properties of the global object
//! (`FINAL_VAR`, `SHOW_VARS` and the next cell see them) and may be declared again:
//!
//! - `let x = 1` / `const {a, b} = o` → `var x = 1` / `var {a, b} = o`
//! - `class C extends B { … }` → `var C = class C extends B { … };`
//!
//! Top-level `function` declarations already behave that way. Only statements at the
//! top level are touched: anything inside braces, parentheses or brackets (a block,
//! a function body, `for (let i …)`) and anything inside strings, template literals,
//! comments and regular expressions is left exactly as written. The scanner is a small
//! tokenizer, not a parser; code it cannot follow (an unterminated string) is returned
//! unchanged, and the engine reports the syntax error itself.

/// Words before which a `/` starts a regular expression rather than a division.
const REGEX_AFTER_WORDS: &[&str] = &[
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "await",
    "yield",
    "instanceof",
];

/// One open bracket of the code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// `{`; `class_body` when it opens the body of a rewritten top-level class.
    Brace { class_body: bool },
    /// `(`.
    Paren,
    /// `[`.
    Bracket,
    /// `${` inside a template literal: its `}` returns to the template's text.
    TemplateExpr,
    /// The text of a template literal.
    Template,
}

/// The last significant token, for statement starts and `/`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Last {
    /// Nothing yet.
    Start,
    /// A word (identifier, keyword or number).
    Word(String),
    /// A punctuation character.
    Punct(char),
    /// A string, template or regular expression literal.
    Literal,
}

/// One change to the cell: replace `len` bytes at `at` with `text`.
struct Edit {
    at: usize,
    len: usize,
    text: String,
}

/// The cell with its top-level `let`/`const`/`class` declarations made redeclarable
/// (see the module docs).
pub fn notebook_cell(code: &str) -> String {
    match scan(code) {
        Some(edits) if !edits.is_empty() => apply(code, edits),
        Some(_) | None => code.to_owned(),
    }
}

fn apply(code: &str, mut edits: Vec<Edit>) -> String {
    edits.sort_by_key(|e| e.at);
    let mut out = String::with_capacity(code.len() + edits.len() * 16);
    let mut copied = 0;
    for edit in edits {
        out.push_str(&code[copied..edit.at]);
        out.push_str(&edit.text);
        copied = edit.at + edit.len;
    }
    out.push_str(&code[copied..]);
    out
}

/// The edits to make, or `None` when the code cannot be followed.
fn scan(code: &str) -> Option<Vec<Edit>> {
    let bytes = code.as_bytes();
    let mut edits = Vec::new();
    let mut frames: Vec<Frame> = Vec::new();
    let mut last = Last::Start;
    // A newline since the last significant token (an automatic semicolon may be there).
    let mut newline = false;
    // A top-level `class NAME` whose body's `{` has not been seen yet.
    let mut pending_class = false;
    let mut i = 0;
    while i < bytes.len() {
        if frames.last() == Some(&Frame::Template) {
            i = template_text(bytes, i, &mut frames)?;
            last = Last::Literal;
            newline = false;
            continue;
        }
        let c = bytes[i];
        match c {
            b'\n' => {
                newline = true;
                i += 1;
            }
            b' ' | b'\t' | b'\r' => i += 1,
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let end = code[i + 2..].find("*/")?;
                newline |= code[i..i + 2 + end].contains('\n');
                i += 2 + end + 2;
            }
            b'/' if regex_allowed(&last) => {
                i = regex_end(bytes, i)?;
                last = Last::Literal;
                newline = false;
            }
            b'"' | b'\'' => {
                i = string_end(bytes, i, c)?;
                last = Last::Literal;
                newline = false;
            }
            b'`' => {
                frames.push(Frame::Template);
                i += 1;
            }
            b'{' => {
                let class_body = pending_class && frames.is_empty();
                pending_class &= !class_body;
                frames.push(Frame::Brace { class_body });
                last = Last::Punct('{');
                newline = false;
                i += 1;
            }
            b'(' | b'[' => {
                frames.push(if c == b'(' {
                    Frame::Paren
                } else {
                    Frame::Bracket
                });
                last = Last::Punct(c as char);
                newline = false;
                i += 1;
            }
            b'}' | b')' | b']' => {
                match frames.pop() {
                    Some(Frame::TemplateExpr) if c == b'}' => {
                        // Back in the template's text (its frame is underneath).
                        i += 1;
                        continue;
                    }
                    Some(Frame::Brace { class_body: true }) if c == b'}' && frames.is_empty() => {
                        edits.push(Edit {
                            at: i + 1,
                            len: 0,
                            text: ";".to_owned(),
                        });
                    }
                    Some(_) | None => {}
                }
                last = Last::Punct(c as char);
                newline = false;
                i += 1;
            }
            c if is_word_byte(c) => {
                let start = i;
                while i < bytes.len() && is_word_byte(bytes[i]) {
                    i += 1;
                }
                let word = &code[start..i];
                let statement_start = frames.is_empty()
                    && match &last {
                        Last::Start => true,
                        Last::Punct(';' | '}') => true,
                        Last::Word(_) | Last::Punct(_) | Last::Literal => newline,
                    };
                if statement_start {
                    match word {
                        "let" | "const" if declares(code, i) => edits.push(Edit {
                            at: start,
                            len: word.len(),
                            text: "var".to_owned(),
                        }),
                        "class" => {
                            if let Some(name) = next_word(code, i) {
                                edits.push(Edit {
                                    at: start,
                                    len: 0,
                                    text: format!("var {name} = "),
                                });
                                pending_class = true;
                            }
                        }
                        _ => {}
                    }
                }
                last = Last::Word(word.to_owned());
                newline = false;
            }
            _ => {
                // Operators and other punctuation; multi-byte characters are skipped
                // byte by byte (they are never brackets or quotes).
                if c.is_ascii() {
                    last = Last::Punct(c as char);
                    newline = false;
                }
                i += 1;
            }
        }
    }
    frames.is_empty().then_some(edits)
}

/// Bytes that may be part of an identifier, keyword or number (`$`, `_`, non-ASCII).
fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

/// Whether the `let`/`const` ending at `at` starts a declaration: a name or a
/// destructuring pattern follows (`let = 1` uses `let` as a sloppy-mode name).
fn declares(code: &str, at: usize) -> bool {
    let rest = code[at..].trim_start();
    rest.starts_with('[')
        || rest.starts_with('{')
        || rest
            .bytes()
            .next()
            .is_some_and(|c| is_word_byte(c) && !c.is_ascii_digit())
}

/// The identifier after position `at` (the name of `class NAME`), when it is one.
fn next_word(code: &str, at: usize) -> Option<&str> {
    let rest = code[at..].trim_start();
    let len = rest.bytes().take_while(|c| is_word_byte(*c)).count();
    let word = &rest[..len];
    let keyword = matches!(word, "extends" | "implements" | "");
    (!keyword && !word.as_bytes()[0].is_ascii_digit()).then_some(word)
}

/// Whether a `/` after `last` starts a regular expression.
fn regex_allowed(last: &Last) -> bool {
    match last {
        Last::Start => true,
        Last::Word(word) => REGEX_AFTER_WORDS.contains(&word.as_str()),
        Last::Punct(c) => !matches!(c, ')' | ']' | '}'),
        Last::Literal => false,
    }
}

/// The index after the string literal starting at `start` (quote `quote`).
fn string_end(bytes: &[u8], start: usize, quote: u8) -> Option<usize> {
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return None,
            c if c == quote => return Some(i + 1),
            _ => i += 1,
        }
    }
    None
}

/// The index after the regular expression literal starting at `start`, flags included.
fn regex_end(bytes: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    let mut class = false;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' => return None,
            b'[' => {
                class = true;
                i += 1;
            }
            b']' => {
                class = false;
                i += 1;
            }
            b'/' if !class => {
                i += 1;
                while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
                    i += 1;
                }
                return Some(i);
            }
            _ => i += 1,
        }
    }
    None
}

/// Reads template text from `i` to its end (closing backtick: the frame is popped) or
/// to a `${` (a `TemplateExpr` frame is pushed); returns where to go on.
fn template_text(bytes: &[u8], mut i: usize, frames: &mut Vec<Frame>) -> Option<usize> {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'`' => {
                frames.pop();
                return Some(i + 1);
            }
            b'$' if bytes.get(i + 1) == Some(&b'{') => {
                // The template's frame stays underneath the expression's.
                frames.push(Frame::TemplateExpr);
                return Some(i + 2);
            }
            _ => i += 1,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn top_level_declarations_become_var() {
        assert_eq!(notebook_cell("let x = 1"), "var x = 1");
        assert_eq!(notebook_cell("const a = 1, b = 2;"), "var a = 1, b = 2;");
        assert_eq!(
            notebook_cell("const {a, b} = o\nlet [c] = p"),
            "var {a, b} = o\nvar [c] = p"
        );
        assert_eq!(notebook_cell("x = 1; const y = 2"), "x = 1; var y = 2");
        assert_eq!(
            notebook_cell("const found = await llm_query('q')\nconsole.log(found)"),
            "var found = await llm_query('q')\nconsole.log(found)"
        );
    }

    #[test]
    fn classes_become_class_expressions() {
        assert_eq!(
            notebook_cell("class A extends mix(B) { m() { return 1 } }\nnew A()"),
            "var A = class A extends mix(B) { m() { return 1 } };\nnew A()"
        );
    }

    #[test]
    fn nested_code_is_left_alone() {
        for code in [
            "for (let i = 0; i < 3; i++) { const j = i }",
            "{ let block = 1 }",
            "function f() { let inner = 2; class K {} }",
            "if (x) { const y = 1 }",
            "const f = () => { let z = 3 }",
        ] {
            let out = notebook_cell(code);
            assert_eq!(
                out.matches("var").count(),
                usize::from(code.starts_with("const")),
                "{out}"
            );
        }
    }

    #[test]
    fn strings_comments_templates_and_regexes_are_left_alone() {
        for code in [
            "s = 'let x = 1'",
            "s = \"const y\"",
            "// let a = 1\nx = 2",
            "/* const b = 2 */ x = 3",
            "t = `line\nlet c = ${ {a: 1}.a } and ${`inner ${1}`}`",
            "r = /let d = [/]/g; x = 4",
            "x = a / b / c",
        ] {
            assert_eq!(notebook_cell(code), code);
        }
        assert_eq!(
            notebook_cell("t = `${x}`\nlet after = 1"),
            "t = `${x}`\nvar after = 1"
        );
    }

    #[test]
    fn let_as_a_name_and_unfinished_code_are_unchanged() {
        assert_eq!(notebook_cell("let = 5"), "let = 5");
        assert_eq!(
            notebook_cell("let x = 'unterminated"),
            "let x = 'unterminated"
        );
        assert_eq!(notebook_cell("let x = (1"), "let x = (1");
    }

    proptest! {
        /// Whatever the input, the scanner stops and never panics; code without the
        /// keywords comes back unchanged.
        #[test]
        fn any_text_is_handled(code in "[a-z0-9 =;{}()\\[\\]'\"`/*\\\\\n$.+-]{0,80}") {
            let out = notebook_cell(&code);
            if !code.contains("let") && !code.contains("const") && !code.contains("class") {
                prop_assert_eq!(out, code);
            }
        }

        /// Declarations anywhere in a sequence of top-level statements are rewritten,
        /// and nothing else changes.
        #[test]
        fn statement_sequences(names in proptest::collection::vec("[a-z]{1,6}", 1..6), kinds in proptest::collection::vec(0u8..3, 1..6)) {
            let mut code = String::new();
            let mut expected = String::new();
            for (name, kind) in names.iter().zip(kinds.iter()) {
                let name = format!("v_{name}");
                let (line, want) = match kind {
                    0 => (format!("let {name} = 1\n"), format!("var {name} = 1\n")),
                    1 => (format!("const {name} = '{{let}}';\n"), format!("var {name} = '{{let}}';\n")),
                    _ => (format!("{name} = [1, 2]\n"), format!("{name} = [1, 2]\n")),
                };
                code.push_str(&line);
                expected.push_str(&want);
            }
            prop_assert_eq!(notebook_cell(&code), expected);
        }
    }
}
