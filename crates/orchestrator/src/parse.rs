//! Reading a model's response: code blocks, final answers, and the ways models
//! misbehave around them.
//!
//! Only fences tagged `repl` or the environment's own language are executed. A final
//! answer (`FINAL(...)`, `FINAL_VAR(name)`) counts only at the start of a line in text
//! outside every fence. Text after a code block that imitates REPL output is cut, so
//! the transcript only ever shows real output. A response that holds code the loop
//! will not run (a bare fence, another language, a tool-call-looking blob) is flagged
//! so the loop can tell the model which fence to use — except a tool call that carries
//! its code (`{"code": …}`, `<parameter name="code">…`, as models trained on tool
//! calling write them): that code runs, as if fenced, and the model is told the form.

/// A fenced block the environment should run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeBlock {
    /// The fence's tag (`repl`, `python`, …).
    pub tag: String,
    /// The code, without the fences.
    pub code: String,
}

/// Code the model wrote in a form the loop does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Misfence {
    /// A fence with no tag.
    Bare,
    /// A fence tagged with a language the environment does not run.
    OtherLanguage(String),
    /// An XML or JSON blob that looks like a native tool call.
    ToolCall,
}

/// A response taken apart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedResponse {
    /// The response as it goes into the transcript (imitated output cut).
    pub transcript_text: String,
    /// Blocks to execute, in order.
    pub blocks: Vec<CodeBlock>,
    /// `FINAL(...)` found outside code: its content.
    pub final_literal: Option<String>,
    /// `FINAL_VAR(name)` found outside code: the name.
    pub final_var: Option<String>,
    /// `FINAL` or `FINAL_VAR` when the last such call outside code was opened and never
    /// closed (no `)` ends it: a reply cut short, or a slip); it is then not an answer.
    pub unclosed_final: Option<&'static str>,
    /// True when imitated REPL output was cut.
    pub cut_imitated_output: bool,
    /// Set when no block will run but the response holds code in the wrong form.
    pub misfence: Option<Misfence>,
    /// True when the one block to run was taken out of a tool call (XML or JSON).
    pub from_tool_call: bool,
}

/// Tags executed by every environment.
const REPL_TAG: &str = "repl";

/// Line starts that mark text imitating REPL output.
const IMITATION_MARKERS: [&str; 6] = [
    "repl output",
    "output:",
    "execution output",
    "[execution output",
    "result:",
    "stdout:",
];

/// Takes a response apart. `language_tags` are the tags besides `repl` that run
/// (`["python", "py"]` for the Python kernel).
pub fn parse_response(response: &str, language_tags: &[&str]) -> ParsedResponse {
    let segments = split_fences(response);
    let runs = |tag: &str| {
        let tag = tag.to_ascii_lowercase();
        tag == REPL_TAG || language_tags.iter().any(|t| *t == tag)
    };

    let mut parsed = ParsedResponse::default();
    let mut kept = String::with_capacity(response.len());
    let mut outside = String::new();
    let mut seen_code = false;
    let mut other_fence: Option<Misfence> = None;
    for segment in &segments {
        match segment {
            Segment::Text(text) => {
                let text = if seen_code {
                    match imitation_start(text) {
                        Some(cut) => {
                            parsed.cut_imitated_output = true;
                            kept.push_str(&text[..cut]);
                            outside.push_str(&text[..cut]);
                            break;
                        }
                        None => text,
                    }
                } else {
                    text
                };
                kept.push_str(text);
                outside.push_str(text);
                outside.push('\n');
            }
            Segment::Fence { tag, code, raw } => {
                if seen_code && !runs(tag) && tag.is_empty() {
                    // A bare fence right after code is almost always imitated output.
                    parsed.cut_imitated_output = true;
                    break;
                }
                kept.push_str(raw);
                if runs(tag) {
                    seen_code = true;
                    parsed.blocks.push(CodeBlock {
                        tag: tag.clone(),
                        code: code.clone(),
                    });
                } else if other_fence.is_none() && !code.trim().is_empty() {
                    other_fence = Some(if tag.is_empty() {
                        Misfence::Bare
                    } else {
                        Misfence::OtherLanguage(tag.clone())
                    });
                }
            }
        }
    }
    parsed.transcript_text = kept.trim_end().to_owned();
    for name in ["FINAL_VAR", "FINAL"] {
        let argument = match find_call(&outside, name) {
            Some(Call::Closed(arg)) => Some(unquote(&arg).to_owned()),
            Some(Call::Unclosed) => {
                parsed.unclosed_final = Some(name);
                None
            }
            None => None,
        };
        if name == "FINAL" {
            parsed.final_literal = argument;
        } else {
            parsed.final_var = argument;
        }
    }
    if parsed.blocks.is_empty()
        && parsed.final_literal.is_none()
        && parsed.final_var.is_none()
        && parsed.unclosed_final.is_none()
    {
        parsed.misfence =
            other_fence.or_else(|| looks_like_tool_call(&outside).then_some(Misfence::ToolCall));
        let xml_call = match &parsed.misfence {
            Some(Misfence::ToolCall) => true,
            Some(Misfence::OtherLanguage(tag)) => {
                matches!(tag.as_str(), "xml" | "tool_call" | "tool_code")
            }
            _ => false,
        };
        let may_carry_code = xml_call
            || parsed.misfence.is_none()
            || matches!(&parsed.misfence, Some(Misfence::OtherLanguage(tag)) if tag == "json");
        if may_carry_code {
            if let Some(code) = tool_call_code(response, xml_call) {
                parsed.blocks.push(CodeBlock {
                    tag: REPL_TAG.to_owned(),
                    code,
                });
                parsed.misfence = None;
                parsed.from_tool_call = true;
            }
        }
    }
    parsed
}

/// Keys under which a tool call carries code.
const CODE_KEYS: [&str; 4] = ["code", "source", "script", "command"];

/// The code a tool call in `text` carries, if it carries any: a JSON object (the whole
/// reply, in a ```json fence or in `<tool_call>` tags) with a code key at its top or
/// under `arguments` / `parameters` / `input` (an object or a JSON string), or an XML
/// call with `<parameter name="code">`, `<parameter=code>` or `<code>`.
fn tool_call_code(text: &str, xml_call: bool) -> Option<String> {
    json_objects(text)
        .iter()
        .find_map(code_in_json)
        .or_else(|| xml_call.then(|| xml_code(text)).flatten())
        .map(|code| code.trim_matches('\n').to_owned())
        .filter(|code| !code.trim().is_empty())
}

/// Every JSON object that parses, found from each `{` that starts the reply, follows
/// a tag (`<tool_call>`) or opens a ```json fence.
fn json_objects(text: &str) -> Vec<serde_json::Value> {
    let mut found = Vec::new();
    for (start, _) in text.match_indices('{') {
        let before = text[..start].trim_end();
        if !(before.is_empty() || before.ends_with('>') || before.ends_with("```json")) {
            continue;
        }
        let mut stream =
            serde_json::Deserializer::from_str(&text[start..]).into_iter::<serde_json::Value>();
        if let Some(Ok(value)) = stream.next() {
            if value.is_object() {
                found.push(value);
            }
        }
    }
    found
}

/// The code under a code key of `value`, or of its arguments.
fn code_in_json(value: &serde_json::Value) -> Option<String> {
    let direct = |object: &serde_json::Value| {
        CODE_KEYS
            .iter()
            .find_map(|key| object.get(*key).and_then(serde_json::Value::as_str))
            .map(str::to_owned)
    };
    if let Some(code) = direct(value) {
        return Some(code);
    }
    let function = value.get("function").unwrap_or(value);
    ["arguments", "parameters", "input", "args"]
        .iter()
        .filter_map(|key| function.get(*key))
        .find_map(|arguments| match arguments {
            serde_json::Value::String(text) => {
                serde_json::from_str(text).ok().as_ref().and_then(direct)
            }
            other => direct(other),
        })
}

/// The code of an XML-style call: `<parameter name="code">…</parameter>`,
/// `<parameter=code>…</parameter>` (Qwen's form) or `<code>…</code>`.
fn xml_code(text: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    for key in CODE_KEYS {
        for open in [
            format!("<parameter name=\"{key}\">"),
            format!("<parameter name='{key}'>"),
            format!("<parameter={key}>"),
            format!("<{key}>"),
        ] {
            let Some(at) = lower.find(&open) else {
                continue;
            };
            let body = &text[at + open.len()..];
            let close = if open.starts_with("<parameter") {
                "</parameter>".to_owned()
            } else {
                format!("</{key}>")
            };
            let end = body.to_ascii_lowercase().find(&close).unwrap_or(body.len());
            return Some(body[..end].to_owned());
        }
    }
    None
}

#[derive(Debug)]
enum Segment {
    Text(String),
    Fence {
        tag: String,
        code: String,
        raw: String,
    },
}

/// Splits text into prose and fenced blocks. An unclosed fence runs to the end.
fn split_fences(text: &str) -> Vec<Segment> {
    let mut segments = Vec::new();
    let mut prose = String::new();
    let mut lines = text.split_inclusive('\n').peekable();
    while let Some(line) = lines.next() {
        let Some((ticks, info)) = fence_open(line) else {
            prose.push_str(line);
            continue;
        };
        if !prose.is_empty() {
            segments.push(Segment::Text(std::mem::take(&mut prose)));
        }
        let tag = info
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let mut raw = line.to_owned();
        let mut code = String::new();
        for inner in lines.by_ref() {
            raw.push_str(inner);
            if is_fence_close(inner, ticks) {
                break;
            }
            code.push_str(inner);
        }
        if !raw.ends_with('\n') {
            raw.push('\n');
        }
        segments.push(Segment::Fence {
            tag,
            code: code.trim_end_matches('\n').to_owned(),
            raw,
        });
    }
    if !prose.is_empty() {
        segments.push(Segment::Text(prose));
    }
    segments
}

/// `Some((backtick count, info string))` when `line` opens a fence.
fn fence_open(line: &str) -> Option<(usize, &str)> {
    let trimmed = line.trim_start();
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let ticks = trimmed.bytes().take_while(|b| *b == b'`').count();
    if ticks < 3 {
        return None;
    }
    let info = trimmed[ticks..].trim();
    if info.contains('`') {
        return None; // inline code like ```x``` on one line
    }
    Some((ticks, info))
}

fn is_fence_close(line: &str, ticks: usize) -> bool {
    let trimmed = line.trim();
    trimmed.len() >= ticks && trimmed.bytes().all(|b| b == b'`')
}

/// Byte offset of the first line in `text` that imitates REPL output.
fn imitation_start(text: &str) -> Option<usize> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let lower = line
            .trim_start()
            .trim_start_matches(['*', '#', '>', ' '])
            .to_ascii_lowercase();
        if IMITATION_MARKERS.iter().any(|m| lower.starts_with(m)) {
            return Some(offset);
        }
        offset += line.len();
    }
    None
}

/// The argument of the last `NAME(...)` that starts a line (after optional markdown
/// emphasis), with balanced parentheses; unbalanced runs to the last `)`.
/// A `NAME(` call found at the start of a line.
enum Call {
    /// Its argument, up to the `)` that closes it.
    Closed(String),
    /// No `)` closes it.
    Unclosed,
}

/// The last `name(...)` call at the start of a line of `text`.
fn find_call(text: &str, name: &str) -> Option<Call> {
    let mut found = None;
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let lead = line.len()
            - line
                .trim_start_matches([' ', '\t', '*', '_', '>', '`'])
                .len();
        let rest = &line[lead..];
        if rest.starts_with(name) && rest[name.len()..].starts_with('(') {
            let start = offset + lead + name.len() + 1;
            found = Some(balanced_argument(&text[start..]));
        }
        offset += line.len();
    }
    found
}

/// The argument of a call whose `(` ends just before `after_paren`: up to the `)` that
/// balances it outside quotes, else (an unbalanced quote) the last `)` when the
/// parentheses alone balance; unclosed when they do not.
fn balanced_argument(after_paren: &str) -> Call {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in after_paren.char_indices() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' if i == 0 || depth > 0 || after_paren[..i].trim().is_empty() => {
                quote = Some(c)
            }
            '(' => depth += 1,
            ')' if depth == 0 => return Call::Closed(after_paren[..i].trim().to_owned()),
            ')' => depth -= 1,
            _ => {}
        }
    }
    if !parens_close(after_paren) {
        return Call::Unclosed;
    }
    match after_paren.rfind(')') {
        Some(end) => Call::Closed(after_paren[..end].trim().to_owned()),
        None => Call::Unclosed,
    }
}

/// True when a `)` closes the call, counting parentheses only (quotes ignored).
fn parens_close(after_paren: &str) -> bool {
    let mut depth = 0usize;
    for c in after_paren.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return true,
            ')' => depth -= 1,
            _ => {}
        }
    }
    false
}

/// `"x"` / `'x'` → `x` when the whole argument is one quoted literal.
fn unquote(arg: &str) -> &str {
    for q in ['"', '\''] {
        if arg.len() >= 2
            && arg.starts_with(q)
            && arg.ends_with(q)
            && !arg[1..arg.len() - 1].contains(q)
        {
            return &arg[1..arg.len() - 1];
        }
    }
    arg
}

fn looks_like_tool_call(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    [
        "<tool_call",
        "<function_call",
        "<invoke",
        "<function=",
        "\"tool_calls\"",
        "\"function_call\"",
    ]
    .iter()
    .any(|m| lower.contains(m))
        || (lower.contains("\"name\"")
            && (lower.contains("\"arguments\"") || lower.contains("\"parameters\"")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PY: &[&str] = &["python", "py"];

    #[test]
    fn repl_and_language_fences_run_others_do_not() {
        let p = parse_response(
            "look:\n```repl\nx = 1\n```\n```python\nprint(x)\n```\n```text\nnot code\n```\n",
            PY,
        );
        assert_eq!(
            p.blocks,
            vec![
                CodeBlock {
                    tag: "repl".into(),
                    code: "x = 1".into()
                },
                CodeBlock {
                    tag: "python".into(),
                    code: "print(x)".into()
                }
            ]
        );
        assert_eq!(p.misfence, None);
    }

    #[test]
    fn final_outside_code_is_detected() {
        let p = parse_response("I know it.\nFINAL(42 apples (red))", PY);
        assert_eq!(p.final_literal.as_deref(), Some("42 apples (red)"));
        let p = parse_response("**FINAL(\"quoted\")**", PY);
        assert_eq!(p.final_literal.as_deref(), Some("quoted"));
        let p = parse_response("FINAL_VAR(answer)", PY);
        assert_eq!(p.final_var.as_deref(), Some("answer"));
        assert_eq!(p.final_literal, None);
    }

    #[test]
    fn multi_line_final_is_taken_whole() {
        let p = parse_response("FINAL(line one\nline two)\n", PY);
        assert_eq!(p.final_literal.as_deref(), Some("line one\nline two"));
    }

    #[test]
    fn final_inside_a_fence_is_not_an_answer() {
        let p = parse_response("```repl\nFINAL(x)\n```", PY);
        assert_eq!(p.final_literal, None);
        let p = parse_response("```text\nFINAL(x)\n```", PY);
        assert_eq!(p.final_literal, None);
    }

    #[test]
    fn final_mentioned_mid_sentence_is_not_an_answer() {
        let p = parse_response("When done I will call FINAL(answer) as told.", PY);
        assert_eq!(p.final_literal, None);
    }

    #[test]
    fn code_and_final_together_are_both_reported() {
        // The loop runs the code and refuses the premature FINAL.
        let p = parse_response("```repl\nprint(len(context))\n```\nFINAL(1000)", PY);
        assert_eq!(p.blocks.len(), 1);
        assert_eq!(p.final_literal.as_deref(), Some("1000"));
    }

    #[test]
    fn imitated_output_after_code_is_cut() {
        let text = "```repl\nprint(1+1)\n```\nREPL output:\n2\nFINAL(2)";
        let p = parse_response(text, PY);
        assert!(p.cut_imitated_output);
        assert_eq!(p.transcript_text, "```repl\nprint(1+1)\n```");
        assert_eq!(
            p.final_literal, None,
            "a FINAL inside imitated output is cut too"
        );
        let p = parse_response("```repl\nprint(1)\n```\nOutput: 1\n", PY);
        assert!(p.cut_imitated_output);
        let p = parse_response("```repl\nprint(1)\n```\n```\n1\n```\n", PY);
        assert!(p.cut_imitated_output);
        assert_eq!(p.blocks.len(), 1);
    }

    #[test]
    fn output_words_before_any_code_are_kept() {
        let p = parse_response("Output: I will now look.\n```repl\nx=1\n```", PY);
        assert!(!p.cut_imitated_output);
        assert!(p.transcript_text.starts_with("Output: I will now look."));
    }

    #[test]
    fn misfences_are_named() {
        assert_eq!(
            parse_response("```\nprint(1)\n```", PY).misfence,
            Some(Misfence::Bare)
        );
        assert_eq!(
            parse_response("```javascript\nconsole.log(1)\n```", PY).misfence,
            Some(Misfence::OtherLanguage("javascript".into()))
        );
        assert_eq!(
            parse_response("<tool_call>{\"name\": \"ctx_grep\"}</tool_call>", PY).misfence,
            Some(Misfence::ToolCall)
        );
        assert_eq!(
            parse_response("{\"name\": \"search\", \"arguments\": {\"q\": 1}}", PY).misfence,
            Some(Misfence::ToolCall)
        );
        assert_eq!(parse_response("just thinking", PY).misfence, None);
    }

    #[test]
    fn an_unclosed_final_is_no_answer_and_is_flagged() {
        let p = parse_response("The answer is\nFINAL(42 apples and", PY);
        assert_eq!(p.final_literal, None);
        assert_eq!(p.unclosed_final, Some("FINAL"));
        let p = parse_response("FINAL(a (b) c", PY);
        assert_eq!((p.final_literal, p.unclosed_final), (None, Some("FINAL")));
        let p = parse_response("FINAL_VAR(answer", PY);
        assert_eq!((p.final_var, p.unclosed_final), (None, Some("FINAL_VAR")));
        // An unbalanced quote with the parenthesis closed is still an answer.
        let p = parse_response("FINAL(\"unterminated)", PY);
        assert_eq!(p.final_literal.as_deref(), Some("\"unterminated"));
        assert_eq!(p.unclosed_final, None);
    }

    #[test]
    fn tool_calls_that_carry_code_run_as_code() {
        let forms = [
            // OpenAI-style JSON, arguments as a string.
            r#"{"name": "python", "arguments": "{\"code\": \"print(len(context))\"}"}"#,
            // Hermes / Qwen2.5 style.
            "<tool_call>\n{\"name\": \"execute\", \"arguments\": {\"code\": \"print(len(context))\"}}\n</tool_call>",
            // Claude-style XML (official library issue #179).
            "<function_calls>\n<invoke name=\"repl\">\n<parameter name=\"code\">print(len(context))</parameter>\n</invoke>\n</function_calls>",
            // Qwen3-Coder style.
            "<tool_call>\n<function=python>\n<parameter=code>\nprint(len(context))\n</parameter>\n</function>\n</tool_call>",
            // A bare JSON object with the code.
            r#"{"code": "print(len(context))"}"#,
            // The same in a json fence.
            "```json\n{\"tool\": \"repl\", \"input\": {\"code\": \"print(len(context))\"}}\n```",
        ];
        for form in forms {
            let p = parse_response(form, PY);
            assert_eq!(
                p.blocks,
                vec![CodeBlock {
                    tag: "repl".into(),
                    code: "print(len(context))".into()
                }],
                "{form}"
            );
            assert!(p.from_tool_call, "{form}");
            assert_eq!(p.misfence, None, "{form}");
        }
        // A tool call with no code is still corrected, never silently ignored.
        let p = parse_response(
            r#"<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>"#,
            PY,
        );
        assert!(p.blocks.is_empty());
        assert_eq!(p.misfence, Some(Misfence::ToolCall));
        // Prose that mentions <code> is not a call.
        let p = parse_response("Use <code>len(context)</code> to measure it.", PY);
        assert!(p.blocks.is_empty());
    }

    #[test]
    fn final_in_inline_code_or_emphasis_is_an_answer() {
        for text in [
            "`FINAL(42)`",
            "**FINAL(42)**",
            "__FINAL(42)__",
            "> FINAL(42)",
        ] {
            assert_eq!(
                parse_response(text, PY).final_literal.as_deref(),
                Some("42"),
                "{text}"
            );
        }
        assert_eq!(
            parse_response("`FINAL_VAR(total)`", PY)
                .final_var
                .as_deref(),
            Some("total")
        );
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        let p = parse_response("```repl\nprint(1)\n", PY);
        assert_eq!(
            p.blocks,
            vec![CodeBlock {
                tag: "repl".into(),
                code: "print(1)".into()
            }]
        );
    }

    #[test]
    fn longer_fences_nest_shorter_ones() {
        let p = parse_response("````repl\ns = '''\n```\n'''\n````\n", PY);
        assert_eq!(p.blocks.len(), 1);
        assert!(p.blocks[0].code.contains("```"));
    }
}
