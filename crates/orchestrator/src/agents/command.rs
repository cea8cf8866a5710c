//! The `--agent-cmd` template: split once like a shell would, filled in per agent.
//!
//! `claude -p {prompt}` becomes the program `claude` and the arguments `-p` and the
//! whole prompt as *one* argument, whatever spaces, quotes or newlines it holds: the
//! template is split with shell-words rules first and placeholders are replaced inside
//! each word afterwards, so no value is ever re-split or interpreted by a shell.

use std::ffi::OsString;
use std::path::Path;

use super::AgentError;

/// Longest single argument Linux accepts (`MAX_ARG_STRLEN`, 32 pages, including the
/// terminating NUL). A longer `{prompt}` must go through `{prompt_file}` or stdin.
pub const MAX_ARG_BYTES: usize = 128 * 1024 - 1;

/// One piece of a template word.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Prompt,
    PromptFile,
    ResultFile,
    AgentId,
}

/// Placeholders and the piece each stands for.
const PLACEHOLDERS: &[(&str, Piece)] = &[
    ("{prompt}", Piece::Prompt),
    ("{prompt_file}", Piece::PromptFile),
    ("{result_file}", Piece::ResultFile),
    ("{agent_id}", Piece::AgentId),
];

/// A parsed `--agent-cmd` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentCommand {
    template: String,
    program: String,
    args: Vec<Vec<Piece>>,
}

/// The values placeholders are replaced with for one agent.
#[derive(Debug, Clone, Copy)]
pub struct Substitutions<'a> {
    /// `{prompt}`: the whole prompt.
    pub prompt: &'a str,
    /// `{prompt_file}`: the file holding the prompt.
    pub prompt_file: &'a Path,
    /// `{result_file}`: the absolute path of the `sub-result-<id>` variable file.
    pub result_file: &'a Path,
    /// `{agent_id}`: the agent's id.
    pub agent_id: &'a str,
}

impl AgentCommand {
    /// Parses a template such as `claude -p {prompt}` or
    /// `sh scripts/agents/grep-agent.sh {prompt_file}`.
    ///
    /// Words are split with POSIX shell rules (quotes and backslashes; no expansion).
    /// `{prompt}`, `{prompt_file}`, `{result_file}` and `{agent_id}` are recognised
    /// anywhere in an argument (`--prompt={prompt}`); any other brace text is kept as
    /// is. The program must be a plain word.
    pub fn parse(template: &str) -> Result<Self, AgentError> {
        let words = shell_words::split(template).map_err(|source| AgentError::Split {
            template: template.to_owned(),
            source,
        })?;
        let mut words = words.into_iter();
        let program = words.next().ok_or(AgentError::EmptyTemplate)?;
        if program.is_empty() {
            return Err(AgentError::EmptyTemplate);
        }
        if pieces(&program)
            .iter()
            .any(|p| !matches!(p, Piece::Text(_)))
        {
            return Err(AgentError::PlaceholderProgram {
                template: template.to_owned(),
            });
        }
        Ok(Self {
            template: template.to_owned(),
            program,
            args: words.map(|w| pieces(&w)).collect(),
        })
    }

    /// The template as given.
    pub fn template(&self) -> &str {
        &self.template
    }

    /// The program (first word).
    pub fn program(&self) -> &str {
        &self.program
    }

    /// True when neither `{prompt}` nor `{prompt_file}` appears: the prompt is then
    /// written to the agent's stdin (otherwise stdin is `/dev/null`).
    pub fn reads_stdin(&self) -> bool {
        !self.uses(&Piece::Prompt) && !self.uses(&Piece::PromptFile)
    }

    /// True when `{prompt}` appears.
    pub fn uses_prompt_arg(&self) -> bool {
        self.uses(&Piece::Prompt)
    }

    /// True when `{prompt_file}` appears (the prompt file must then be written).
    pub fn uses_prompt_file(&self) -> bool {
        self.uses(&Piece::PromptFile)
    }

    fn uses(&self, piece: &Piece) -> bool {
        self.args.iter().flatten().any(|p| p == piece)
    }

    /// The arguments with placeholders replaced; each template word stays one argument.
    pub fn render_args(&self, values: &Substitutions<'_>) -> Vec<OsString> {
        self.args
            .iter()
            .map(|word| {
                let mut arg = OsString::new();
                for piece in word {
                    match piece {
                        Piece::Text(text) => arg.push(text),
                        Piece::Prompt => arg.push(values.prompt),
                        Piece::PromptFile => arg.push(values.prompt_file),
                        Piece::ResultFile => arg.push(values.result_file),
                        Piece::AgentId => arg.push(values.agent_id),
                    }
                }
                arg
            })
            .collect()
    }
}

impl std::fmt::Display for AgentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.template)
    }
}

/// Splits a word into literal text and placeholders.
fn pieces(word: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut rest = word;
    'scan: while let Some(c) = rest.chars().next() {
        if c == '{' {
            for (name, piece) in PLACEHOLDERS {
                if let Some(after) = rest.strip_prefix(name) {
                    if !text.is_empty() {
                        out.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    out.push(piece.clone());
                    rest = after;
                    continue 'scan;
                }
            }
        }
        text.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !text.is_empty() || out.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    fn values() -> (PathBuf, PathBuf) {
        (
            PathBuf::from("/data/agents/a1/prompt.txt"),
            PathBuf::from("/data/variables/sub-result-a1.json"),
        )
    }

    fn render(template: &str, prompt: &str) -> (String, Vec<String>) {
        let command = AgentCommand::parse(template).unwrap();
        let (prompt_file, result_file) = values();
        let args = command.render_args(&Substitutions {
            prompt,
            prompt_file: &prompt_file,
            result_file: &result_file,
            agent_id: "a1",
        });
        (
            command.program().to_owned(),
            args.into_iter().map(|a| a.into_string().unwrap()).collect(),
        )
    }

    #[test]
    fn the_prompt_stays_one_argument_whatever_it_holds() {
        let prompt = "two words\n'quotes' \"and\" $HOME `cmd` {prompt} ; rm -rf /";
        let (program, args) = render("claude -p {prompt}", prompt);
        assert_eq!(program, "claude");
        assert_eq!(args, ["-p", prompt]);
    }

    #[test]
    fn quoting_follows_shell_rules() {
        let (program, args) = render(
            r#"'my agent' --flag "a b" c\ d 'x{agent_id}y' --prompt={prompt}"#,
            "P Q",
        );
        assert_eq!(program, "my agent");
        assert_eq!(args, ["--flag", "a b", "c d", "xa1y", "--prompt=P Q"]);
    }

    #[test]
    fn every_placeholder_is_replaced() {
        let (_, args) = render(
            "agent {prompt_file} {result_file} {agent_id} {prompt}{prompt}",
            "p",
        );
        assert_eq!(
            args,
            [
                "/data/agents/a1/prompt.txt",
                "/data/variables/sub-result-a1.json",
                "a1",
                "pp"
            ]
        );
    }

    #[test]
    fn other_braces_are_literal() {
        let (_, args) = render(r#"jq '{"a": 1}' {unknown} {prompt"#, "p");
        assert_eq!(args, [r#"{"a": 1}"#, "{unknown}", "{prompt"]);
    }

    #[test]
    fn stdin_is_used_without_prompt_placeholders() {
        assert!(AgentCommand::parse("llm -m MODEL").unwrap().reads_stdin());
        assert!(AgentCommand::parse("agent {result_file} {agent_id}")
            .unwrap()
            .reads_stdin());
        let arg = AgentCommand::parse("claude -p {prompt}").unwrap();
        assert!(!arg.reads_stdin());
        assert!(arg.uses_prompt_arg());
        let file = AgentCommand::parse("sh scripts/agents/grep-agent.sh {prompt_file}").unwrap();
        assert!(!file.reads_stdin());
        assert!(file.uses_prompt_file());
        assert!(!file.uses_prompt_arg());
    }

    #[test]
    fn the_examples_of_the_spec_parse() {
        for template in [
            "claude -p {prompt}",
            "codex exec {prompt}",
            "llm -m MODEL",
            "sh scripts/agents/grep-agent.sh {prompt_file}",
            "gemini -p {prompt}",
        ] {
            let command = AgentCommand::parse(template).unwrap();
            assert_eq!(command.template(), template);
            assert_eq!(command.to_string(), template);
        }
    }

    #[test]
    fn bad_templates_are_refused_with_a_reason() {
        assert!(matches!(
            AgentCommand::parse("   "),
            Err(AgentError::EmptyTemplate)
        ));
        assert!(matches!(
            AgentCommand::parse("''"),
            Err(AgentError::EmptyTemplate)
        ));
        let unclosed = AgentCommand::parse("claude -p '{prompt}").unwrap_err();
        assert!(matches!(unclosed, AgentError::Split { .. }));
        assert!(unclosed.to_string().contains("claude -p '{prompt}"));
        assert!(matches!(
            AgentCommand::parse("{prompt} x"),
            Err(AgentError::PlaceholderProgram { .. })
        ));
    }

    #[test]
    fn empty_quoted_arguments_survive() {
        let (_, args) = render("agent '' {prompt}", "");
        assert_eq!(args, ["", ""]);
    }
}
