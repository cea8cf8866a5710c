//! The `--agent-cmd` template: split once like a shell would, filled in per agent.
//!
//! `claude -p {prompt}` becomes the program `claude` and the arguments `-p` and the
//! whole prompt as *one* argument, whatever spaces, quotes or newlines it holds: the
//! template is split with shell-words rules first and placeholders are replaced inside
//! each word afterwards, so no value is ever re-split or interpreted by a shell.
//!
//! Besides the prompt's own placeholders, a template may name the values an agent CLI
//! needs on its command line to work headless with the least permission: the result
//! variable (`{result_key}`), this program (`{rlm_bin}`), the data directory
//! (`{data_dir}`), the agent's private temporary directory (`{agent_tmp}`), a variable
//! of the agent's environment (`{env:NAME}`, `{env:NAME:-default}`, where the default
//! may hold placeholders too: `{env:A:-{env:HOME}/.a}`), and the files it
//! may read (`{read_path}`: the word is repeated once per file, and dropped when there
//! is none — `'Read(/{read_path})'` allows Claude Code's Read tool on each input).

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};

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
    ResultKey,
    RlmBin,
    DataDir,
    AgentTmp,
    ReadPath,
    /// `{env:NAME}` or `{env:NAME:-default}` (the default is a word of its own).
    Env {
        name: String,
        default: Vec<Piece>,
    },
}

/// Placeholders and the piece each stands for.
const PLACEHOLDERS: &[(&str, Piece)] = &[
    ("{prompt}", Piece::Prompt),
    ("{prompt_file}", Piece::PromptFile),
    ("{result_file}", Piece::ResultFile),
    ("{agent_id}", Piece::AgentId),
    ("{result_key}", Piece::ResultKey),
    ("{rlm_bin}", Piece::RlmBin),
    ("{data_dir}", Piece::DataDir),
    ("{agent_tmp}", Piece::AgentTmp),
    ("{read_path}", Piece::ReadPath),
];

/// Start of an environment placeholder, `{env:NAME}` or `{env:NAME:-default}`.
const ENV_PLACEHOLDER: &str = "{env:";

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
    /// `{result_key}`: the variable the answer goes to (`sub-result-<id>`).
    pub result_key: &'a str,
    /// `{rlm_bin}`: the `rlm-orchestrate` executable (absolute), if known.
    pub rlm_bin: Option<&'a Path>,
    /// `{data_dir}`: the absolute data directory.
    pub data_dir: &'a Path,
    /// `{agent_tmp}`: the agent's private temporary directory.
    pub agent_tmp: &'a Path,
    /// `{read_path}`: the files the agent may read (a word is repeated per file).
    pub read_paths: &'a [PathBuf],
    /// `{env:NAME}`: the agent's environment.
    pub env: &'a [(OsString, OsString)],
}

impl Substitutions<'_> {
    /// The value of `name` in the agent's environment (`None` when unset or empty).
    fn env_value(&self, name: &str) -> Option<OsString> {
        self.env
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
            .filter(|value| !value.is_empty())
    }
}

impl AgentCommand {
    /// Parses a template such as `claude -p {prompt}` or
    /// `sh scripts/agents/grep-agent.sh {prompt_file}`.
    ///
    /// Words are split with POSIX shell rules (quotes and backslashes; no expansion).
    /// `{prompt}`, `{prompt_file}`, `{result_file}`, `{agent_id}`, `{result_key}`,
    /// `{rlm_bin}`, `{data_dir}`, `{agent_tmp}`, `{read_path}` and `{env:NAME}` are
    /// recognised anywhere in an argument (`--prompt={prompt}`); any other brace text
    /// is kept as is. The program must be a plain word.
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

    /// The command with each relative path it names resolved against `base` (where
    /// `run` was started), so it means the same file in an agent working elsewhere (a
    /// confined agent works in its temporary directory): the program and every
    /// argument that is plain text (no placeholder), has a `/`, is not absolute and
    /// names an existing file or directory under `base` (`sh scripts/agents/grep-agent.sh
    /// {prompt_file}`, `./my-agent`). Other words stay as they are: `-m`, a model name,
    /// a path that does not exist yet.
    pub fn with_paths_from(&self, base: &Path) -> Self {
        let resolve = |word: &str| -> Option<String> {
            let path = Path::new(word);
            let relative = word.contains('/') && !path.is_absolute() && !word.starts_with('-');
            let full = base.join(word.trim_start_matches("./"));
            (relative && full.exists()).then(|| full.to_string_lossy().into_owned())
        };
        let args = self
            .args
            .iter()
            .map(|word| match word.as_slice() {
                [Piece::Text(text)] => match resolve(text) {
                    Some(full) => vec![Piece::Text(full)],
                    None => word.clone(),
                },
                _ => word.clone(),
            })
            .collect();
        Self {
            template: self.template.clone(),
            program: resolve(&self.program).unwrap_or_else(|| self.program.clone()),
            args,
        }
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

    /// True when `{agent_tmp}` appears.
    pub fn uses_agent_tmp(&self) -> bool {
        self.uses(&Piece::AgentTmp)
    }

    /// The arguments with placeholders replaced; each template word stays one argument,
    /// except a word with `{read_path}`, which becomes one argument per read path.
    pub fn render_args(&self, values: &Substitutions<'_>) -> Vec<OsString> {
        let mut args = Vec::with_capacity(self.args.len());
        for word in &self.args {
            if word.contains(&Piece::ReadPath) {
                args.extend(
                    values
                        .read_paths
                        .iter()
                        .map(|path| render_word(word, values, Some(path))),
                );
            } else {
                args.push(render_word(word, values, None));
            }
        }
        args
    }
}

/// Renders one word of a template (not only arguments: preset environment values
/// use the same language). `{read_path}` renders as `read_path` (nothing if `None`).
fn render_word(word: &[Piece], values: &Substitutions<'_>, read_path: Option<&Path>) -> OsString {
    let mut arg = OsString::new();
    for piece in word {
        match piece {
            Piece::Text(text) => arg.push(text),
            Piece::Prompt => arg.push(values.prompt),
            Piece::PromptFile => arg.push(values.prompt_file),
            Piece::ResultFile => arg.push(values.result_file),
            Piece::AgentId => arg.push(values.agent_id),
            Piece::ResultKey => arg.push(values.result_key),
            Piece::RlmBin => arg.push(values.rlm_bin.map_or(OsStr::new(OWN_NAME), Path::as_os_str)),
            Piece::DataDir => arg.push(values.data_dir),
            Piece::AgentTmp => arg.push(values.agent_tmp),
            Piece::ReadPath => arg.push(read_path.map_or(OsStr::new(""), Path::as_os_str)),
            Piece::Env { name, default } => arg.push(
                values
                    .env_value(name)
                    .unwrap_or_else(|| render_word(default, values, read_path)),
            ),
        }
    }
    arg
}

/// What `{rlm_bin}` stands for when the executable is not known: the name on `PATH`.
const OWN_NAME: &str = "rlm-orchestrate";

/// Renders a single template word (a preset's environment value) with `values`.
pub fn render_value(template: &str, values: &Substitutions<'_>) -> OsString {
    render_word(&pieces(template), values, None)
}

impl std::fmt::Display for AgentCommand {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.template)
    }
}

/// Splits a word into literal text and placeholders.
fn pieces(word: &str) -> Vec<Piece> {
    split_word(word, Piece::Text, |rest| {
        env_placeholder(rest).or_else(|| {
            PLACEHOLDERS.iter().find_map(|(name, piece)| {
                rest.starts_with(name).then(|| (piece.clone(), name.len()))
            })
        })
    })
}

/// Splits one word of a template into literal text (made with `text`) and the pieces
/// `placeholder` recognises: given the rest of the word at a `{`, it returns the piece
/// and how many bytes it spans, or `None` (the brace is text). Shared by the templates
/// of agents (`--agent-cmd`) and of eval arms (`--arm`).
pub fn split_word<P>(
    word: &str,
    text: impl Fn(String) -> P,
    mut placeholder: impl FnMut(&str) -> Option<(P, usize)>,
) -> Vec<P> {
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut rest = word;
    while let Some(c) = rest.chars().next() {
        if c == '{' {
            if let Some((piece, len)) = placeholder(rest).filter(|(_, len)| *len > 0) {
                if !literal.is_empty() {
                    out.push(text(std::mem::take(&mut literal)));
                }
                out.push(piece);
                rest = rest.get(len..).unwrap_or_default();
                continue;
            }
        }
        literal.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if !literal.is_empty() || out.is_empty() {
        out.push(text(literal));
    }
    out
}

/// `{env:NAME}` or `{env:NAME:-default}` at the start of `text`, and its length.
/// `NAME` is letters, digits and `_`; the default runs to the brace that closes the
/// placeholder (braces inside it pair up) and may hold placeholders itself. Anything
/// else is not a placeholder.
fn env_placeholder(text: &str) -> Option<(Piece, usize)> {
    let inner = text.strip_prefix(ENV_PLACEHOLDER)?;
    let name_len = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let name = &inner[..name_len];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = &inner[name_len..];
    let (default, consumed) = if rest.starts_with('}') {
        (Vec::new(), 1)
    } else {
        let body = rest.strip_prefix(":-")?;
        let mut depth = 0_usize;
        let end = body.char_indices().find_map(|(i, c)| match c {
            '{' => {
                depth += 1;
                None
            }
            '}' if depth == 0 => Some(i),
            '}' => {
                depth -= 1;
                None
            }
            _ => None,
        })?;
        let default = &body[..end];
        let default = if default.is_empty() {
            Vec::new()
        } else {
            pieces(default)
        };
        (default, 2 + end + 1)
    };
    Some((
        Piece::Env {
            name: name.to_owned(),
            default,
        },
        ENV_PLACEHOLDER.len() + name_len + consumed,
    ))
}

#[cfg(test)]
mod tests {

    use super::*;

    fn values() -> (PathBuf, PathBuf) {
        (
            PathBuf::from("/data/agents/a1/prompt.txt"),
            PathBuf::from("/data/variables/sub-result-a1.json"),
        )
    }

    fn render(template: &str, prompt: &str) -> (String, Vec<String>) {
        render_with(template, prompt, &[])
    }

    fn render_with(template: &str, prompt: &str, read_paths: &[PathBuf]) -> (String, Vec<String>) {
        let command = AgentCommand::parse(template).unwrap();
        let (prompt_file, result_file) = values();
        let env = vec![
            (
                OsString::from("OPENAI_BASE_URL"),
                OsString::from("http://gw/v1"),
            ),
            (OsString::from("EMPTY"), OsString::new()),
        ];
        let args = command.render_args(&Substitutions {
            prompt,
            prompt_file: &prompt_file,
            result_file: &result_file,
            agent_id: "a1",
            result_key: "sub-result-a1",
            rlm_bin: Some(Path::new("/opt/rlm/rlm-orchestrate")),
            data_dir: Path::new("/data"),
            agent_tmp: Path::new("/tmp/rlm-agent-x"),
            read_paths,
            env: &env,
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
    fn preset_placeholders_are_replaced() {
        let (_, args) = render(
            "claude 'Bash({rlm_bin} vars set {result_key}:*)' {data_dir} --tmp={agent_tmp}",
            "p",
        );
        assert_eq!(
            args,
            [
                "Bash(/opt/rlm/rlm-orchestrate vars set sub-result-a1:*)",
                "/data",
                "--tmp=/tmp/rlm-agent-x"
            ]
        );
    }

    #[test]
    fn env_placeholders_read_the_agents_environment_with_a_default() {
        let (_, args) = render(
            "codex base_url={env:OPENAI_BASE_URL} {env:UNSET:-https://api.openai.com/v1} [{env:EMPTY:-d}] {env:UNSET} {env:not valid}",
            "p",
        );
        assert_eq!(
            args,
            [
                "base_url=http://gw/v1",
                "https://api.openai.com/v1",
                "[d]",
                "",
                "{env:not",
                "valid}"
            ]
        );
    }

    #[test]
    fn an_env_default_may_hold_placeholders() {
        let (_, args) = render(
            "llm {env:UNSET:-{env:OPENAI_BASE_URL}/x} {env:UNSET:-{env:UNSET:-{agent_tmp}}/y} {env:OPENAI_BASE_URL:-{agent_id}} {env:UNSET:-{a}b}",
            "p",
        );
        assert_eq!(
            args,
            [
                "http://gw/v1/x",
                "/tmp/rlm-agent-x/y",
                "http://gw/v1",
                "{a}b"
            ]
        );
    }

    #[test]
    fn a_read_path_word_repeats_per_file_and_vanishes_without_one() {
        let paths = [PathBuf::from("/v/a.txt"), PathBuf::from("/logs/b.log")];
        let (_, args) = render_with("claude --allowedTools 'Read(/{read_path})' x", "p", &paths);
        assert_eq!(
            args,
            [
                "--allowedTools",
                "Read(//v/a.txt)",
                "Read(//logs/b.log)",
                "x"
            ]
        );
        let (_, args) = render_with("claude --allowedTools 'Read(/{read_path})' x", "p", &[]);
        assert_eq!(args, ["--allowedTools", "x"]);
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
    fn relative_paths_resolve_against_the_directory_run_started_in() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("scripts/agents")).unwrap();
        std::fs::write(dir.path().join("scripts/agents/grep-agent.sh"), "").unwrap();
        std::fs::write(dir.path().join("my-agent"), "").unwrap();
        std::fs::write(dir.path().join("gpt-4o"), "").unwrap();
        let command = AgentCommand::parse(
            "./my-agent sh scripts/agents/grep-agent.sh {prompt_file} -m gpt-4o not/there --x=scripts/agents/grep-agent.sh /abs/x",
        )
        .unwrap()
        .with_paths_from(dir.path());
        assert_eq!(
            command.program(),
            dir.path().join("my-agent").to_str().unwrap()
        );
        let (prompt_file, result_file) = values();
        let args = command.render_args(&Substitutions {
            prompt: "p",
            prompt_file: &prompt_file,
            result_file: &result_file,
            agent_id: "a1",
            result_key: "sub-result-a1",
            rlm_bin: None,
            data_dir: Path::new("/data"),
            agent_tmp: Path::new("/tmp/rlm-agent-x"),
            read_paths: &[],
            env: &[],
        });
        let script = dir.path().join("scripts/agents/grep-agent.sh");
        assert_eq!(
            args,
            [
                OsString::from("sh"),
                script.into_os_string(),
                prompt_file.into_os_string(),
                "-m".into(),
                "gpt-4o".into(),
                "not/there".into(),
                "--x=scripts/agents/grep-agent.sh".into(),
                "/abs/x".into(),
            ]
        );
    }

    #[test]
    fn empty_quoted_arguments_survive() {
        let (_, args) = render("agent '' {prompt}", "");
        assert_eq!(args, ["", ""]);
    }
}
