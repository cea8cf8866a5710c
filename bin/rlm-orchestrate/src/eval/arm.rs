//! External arms of `eval` (`--arm NAME='COMMAND'`): any system answering an item
//! through a command, timed and scored like the `rlm` and `baseline` arms.
//!
//! The command is split once with shell-words rules; the placeholders
//! (`{context_file}`, `{question}`, `{question_file}`, `{output_file}`, `{model}`,
//! `{base_url}`, `{api_key_env}`) are replaced inside each word afterwards, so a value
//! is never re-split or read by a shell. The command runs under
//! [`rlm_process::run_supervised`] (its own process group, a timeout, Ctrl-C, nothing
//! left behind) with a cleared environment: [`AllowList::BASE`] (`PATH`, `HOME`,
//! `USER`, `LOGNAME`, `SHELL`, `LANG`, `LANGUAGE`, `TZ`, `TERM`, `TMPDIR`, `LC_*`,
//! `XDG_*`) plus the API key variables of the eval's models.
//!
//! Its answer is the file `{output_file}` if the command wrote it (a regular file, not
//! a link, at most as large as stdout may be: anything else fails the item), else its
//! stdout. An
//! answer that is a JSON object with an `answer` member (the whole text, or its last
//! non-empty line) is the *answer form*: `{"answer": "...", "usage": {"prompt_tokens":
//! N, "completion_tokens": N}, "forced": false}`, which reports tokens and whether
//! the answer was forced. A non-zero exit or a timeout fails the item (scored 0,
//! counted as failed, the stderr tail kept); a command that cannot start is an error
//! (not scored, asked again by `--resume`).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rlm_eval::regular_file::{read_regular_file, Refused};
use rlm_orchestrator::provider::Usage;
use rlm_process::{
    inherited_environment, run_supervised, AllowList, CancellationToken, SpawnOptions,
    SuperviseOptions, Termination, DEFAULT_STDOUT_CAP_BYTES,
};

use anyhow::Context as _;
use rlm_orchestrator::settings::RunSettings;

use super::{Answer, ArmError, Prepared};
use crate::cli::EvalArgs;
use crate::exit::bad_input;

/// The largest answer an arm gives: in `{output_file}` as on stdout.
const ANSWER_MAX_BYTES: u64 = DEFAULT_STDOUT_CAP_BYTES as u64;

/// Characters of a failed arm's stderr kept in `results.json`.
const STDERR_TAIL_CHARS: usize = 2000;

/// One word of a command: literal text and placeholders.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    ContextFile,
    Question,
    QuestionFile,
    OutputFile,
    Model,
    BaseUrl,
    ApiKeyEnv,
}

/// The placeholders and what each stands for.
const PLACEHOLDERS: &[(&str, Piece)] = &[
    ("{context_file}", Piece::ContextFile),
    ("{question_file}", Piece::QuestionFile),
    ("{question}", Piece::Question),
    ("{output_file}", Piece::OutputFile),
    ("{model}", Piece::Model),
    ("{base_url}", Piece::BaseUrl),
    ("{api_key_env}", Piece::ApiKeyEnv),
];

/// An external arm: its name and its command.
#[derive(Debug, Clone)]
pub(super) struct ExternalArm {
    /// The arm's name (its column in the table).
    pub name: String,
    /// The command as given.
    template: String,
    /// The program (first word, no placeholder).
    program: String,
    /// The other words.
    args: Vec<Vec<Piece>>,
}

/// The names `--arm` may not take.
const RESERVED: [&str; 2] = [super::RLM_ARM, super::BASELINE_ARM];

impl ExternalArm {
    /// Parses `NAME=COMMAND`; the error says what is wrong and how to write it.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let Some((name, template)) = spec.split_once('=') else {
            return Err(format!(
                "--arm {spec}: write NAME=COMMAND, e.g. --arm stub='python3 scripts/arms/stub.py --context-file {{context_file}} --question {{question}}'"
            ));
        };
        let name = name.trim();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(format!(
                "--arm {spec}: the arm's name `{name}` must be letters, digits, `-`, `_` or `.`"
            ));
        }
        if RESERVED.contains(&name) {
            return Err(format!(
                "--arm {spec}: `{name}` is a built-in arm; give the external arm another name"
            ));
        }
        let words = shell_words::split(template).map_err(|error| {
            format!(
                "--arm {name}: cannot split the command `{template}`: {error}; check its quotes"
            )
        })?;
        let mut words = words.into_iter();
        let program = words
            .next()
            .filter(|p| !p.is_empty())
            .ok_or_else(|| format!("--arm {name}: the command is empty; give NAME=COMMAND"))?;
        if pieces(&program)
            .iter()
            .any(|p| !matches!(p, Piece::Text(_)))
        {
            return Err(format!(
                "--arm {name}: the program `{program}` may not be a placeholder; put the placeholders in its arguments"
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            template: template.to_owned(),
            program,
            args: words.map(|w| pieces(&w)).collect(),
        })
    }

    /// Whether `piece` appears in the command.
    fn uses(&self, piece: &Piece) -> bool {
        self.args.iter().flatten().any(|p| p == piece)
    }
}

/// The arms to run (`--arms`, by default every arm: rlm, baseline and each `--arm`)
/// and the external arms `--arm` defines.
pub(super) fn select(args: &EvalArgs) -> anyhow::Result<(Vec<String>, Vec<ExternalArm>)> {
    let mut externals: Vec<ExternalArm> = Vec::new();
    for spec in &args.arm {
        let external = ExternalArm::parse(spec).map_err(bad_input)?;
        if externals.iter().any(|e| e.name == external.name) {
            return Err(bad_input(format!(
                "--arm {}: two arms have this name; give each its own",
                external.name
            )));
        }
        externals.push(external);
    }
    let known: Vec<&str> = [super::RLM_ARM, super::BASELINE_ARM]
        .into_iter()
        .chain(externals.iter().map(|e| e.name.as_str()))
        .collect();
    let mut arms: Vec<String> = Vec::new();
    let chosen: Vec<&str> = if args.arms.is_empty() {
        known.clone()
    } else {
        args.arms.iter().map(|a| a.trim()).collect()
    };
    for name in chosen {
        if !known.contains(&name) {
            return Err(bad_input(format!(
                "unknown arm `{name}`; use {} (an external arm is defined with --arm NAME=COMMAND)",
                known.join(", ")
            )));
        }
        if !arms.iter().any(|a| a == name) {
            arms.push(name.to_owned());
        }
    }
    Ok((arms, externals))
}

/// How external arms run: the eval's model, endpoint and key variables, their
/// timeout, and `OUT/arms/` for their files.
pub(super) fn runner<'a>(
    settings: &'a RunSettings,
    args: &EvalArgs,
    cancel: &'a CancellationToken,
) -> anyhow::Result<ArmRunner<'a>> {
    let model = &settings.model;
    let base_url = model.base_url.as_deref().unwrap_or(match model.kind {
        rlm_orchestrator::provider::ProviderKind::Anthropic => {
            rlm_orchestrator::provider::AnthropicProvider::DEFAULT_BASE_URL
        }
        _ => rlm_orchestrator::provider::OpenAiProvider::DEFAULT_BASE_URL,
    });
    let mut key_envs: Vec<String> = Vec::new();
    for name in [model.key_env(), settings.sub_model.key_env()]
        .into_iter()
        .flatten()
    {
        if !key_envs.iter().any(|k| k == name) {
            key_envs.push(name.to_owned());
        }
    }
    let cwd = std::env::current_dir()
        .context("cannot read the working directory to run the external arms in")?;
    Ok(ArmRunner {
        model: &model.model,
        base_url,
        api_key_env: model.key_env().unwrap_or(""),
        env: arm_environment(&key_envs),
        timeout: Duration::from_secs(args.arm_timeout),
        work_dir: cwd.join(&args.out).join("arms"),
        cwd,
        cancel,
    })
}

/// Splits a word into text and placeholders; other brace text is kept as it is.
fn pieces(word: &str) -> Vec<Piece> {
    rlm_orchestrator::agent_cli::split_word(word, Piece::Text, |rest| {
        PLACEHOLDERS
            .iter()
            .find_map(|(name, piece)| rest.starts_with(name).then(|| (piece.clone(), name.len())))
    })
}

/// What every invocation of an external arm shares.
pub(super) struct ArmRunner<'a> {
    /// `{model}`.
    pub model: &'a str,
    /// `{base_url}`.
    pub base_url: &'a str,
    /// `{api_key_env}`: the variable holding the root model's key.
    pub api_key_env: &'a str,
    /// The arms' environment.
    pub env: Vec<(OsString, OsString)>,
    /// Bound on one answer.
    pub timeout: Duration,
    /// Where each answer's files go (`OUT/arms`, absolute).
    pub work_dir: PathBuf,
    /// The eval's working directory (relative context paths are made absolute).
    pub cwd: PathBuf,
    /// Ctrl-C.
    pub cancel: &'a CancellationToken,
}

/// The environment of every external arm: [`AllowList::BASE`] and the variables
/// named in `key_envs` (the models' API keys, read even though they were hidden).
pub(super) fn arm_environment(key_envs: &[String]) -> Vec<(OsString, OsString)> {
    inherited_environment(&AllowList::BASE, key_envs)
}

/// The files of one answer.
struct Files {
    question: PathBuf,
    output: PathBuf,
}

impl ArmRunner<'_> {
    /// `prepared` answered by `arm`; `None` when cancelled (not recorded, so `--resume`
    /// asks it again).
    pub async fn answer(
        &self,
        arm: &ExternalArm,
        prepared: &Prepared,
    ) -> Option<Result<Answer, ArmError>> {
        let files = match self.files(arm, prepared) {
            Ok(files) => files,
            Err(error) => return Some(Err(error)),
        };
        let question = &prepared.item.question;
        let args = arm
            .args
            .iter()
            .map(|word| {
                let mut arg = OsString::new();
                for piece in word {
                    match piece {
                        Piece::Text(text) => arg.push(text),
                        Piece::ContextFile => arg.push(self.cwd.join(&prepared.context)),
                        Piece::Question => arg.push(question),
                        Piece::QuestionFile => arg.push(&files.question),
                        Piece::OutputFile => arg.push(&files.output),
                        Piece::Model => arg.push(self.model),
                        Piece::BaseUrl => arg.push(self.base_url),
                        Piece::ApiKeyEnv => arg.push(self.api_key_env),
                    }
                }
                arg
            })
            .collect::<Vec<_>>();
        let spawn = SpawnOptions {
            program: arm.program.clone().into(),
            args,
            env: self.env.clone(),
            ..SpawnOptions::default()
        };
        let options = SuperviseOptions {
            timeout: Some(self.timeout),
            cancel: Some(self.cancel.clone()),
            ..SuperviseOptions::default()
        };
        let done = match run_supervised(spawn, options).await {
            Ok(done) => done,
            Err(error) => {
                return Some(Err(ArmError::Start {
                    arm: arm.name.clone(),
                    command: arm.template.clone(),
                    message: error.to_string(),
                }))
            }
        };
        let failed = |why: String| Answer {
            failed: Some(why),
            stderr_tail: Some(tail(&done.stderr_tail)),
            ..Answer::default()
        };
        Some(Ok(match done.termination {
            Termination::Cancelled => return None,
            Termination::Exited(0) => {
                // Read as a context file is: a regular file (not a link to `/dev/zero`,
                // not a FIFO), as large as an answer on stdout may be.
                let output = match read_regular_file(&files.output, false, ANSWER_MAX_BYTES) {
                    Ok(bytes) => bytes,
                    Err(Refused::Io(error)) if error.kind() == std::io::ErrorKind::NotFound => {
                        done.stdout
                    }
                    Err(Refused::Io(source)) => {
                        return Some(Err(ArmError::ArmFiles {
                            path: files.output,
                            source,
                        }))
                    }
                    Err(refused) => {
                        return Some(Ok(failed(format!(
                            "arm {} wrote {{output_file}} {}, which {refused}: an arm writes its answer into that file itself, a regular file of at most {ANSWER_MAX_BYTES} bytes (or prints it)",
                            arm.name,
                            files.output.display()
                        ))))
                    }
                };
                read_answer(&String::from_utf8_lossy(&output))
            }
            Termination::TimedOut => failed(format!(
                "arm {} timed out after {} s (--arm-timeout)",
                arm.name,
                self.timeout.as_secs()
            )),
            other => failed(format!("arm {} {other}", arm.name)),
        }))
    }

    /// Writes the question file and clears the output file of this item.
    fn files(&self, arm: &ExternalArm, prepared: &Prepared) -> Result<Files, ArmError> {
        let stem = prepared
            .context
            .file_stem()
            .map_or_else(|| "item".into(), |s| s.to_string_lossy().into_owned());
        let dir = self.work_dir.join(&arm.name).join(stem);
        let files = Files {
            question: dir.join("question.txt"),
            output: dir.join("answer.out"),
        };
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| ArmError::ArmFiles { path, source }
        };
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        // What an earlier answer left (a link among them) is removed, and the question
        // file made anew, so no write follows a link the arm put there.
        for path in [&files.output, &files.question] {
            match std::fs::remove_file(path) {
                Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io(path)(error))
                }
                _ => {}
            }
        }
        if arm.uses(&Piece::QuestionFile) {
            use std::io::Write as _;
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&files.question)
                .and_then(|mut file| file.write_all(prepared.item.question.as_bytes()))
                .map_err(io(&files.question))?;
        }
        Ok(files)
    }
}

/// The last [`STDERR_TAIL_CHARS`] characters of `stderr`.
fn tail(stderr: &str) -> String {
    let chars = stderr.chars().count();
    stderr
        .chars()
        .skip(chars.saturating_sub(STDERR_TAIL_CHARS))
        .collect()
}

/// The answer in an arm's output: the JSON answer form (the whole output or its last
/// non-empty line), else the output itself, trimmed.
fn read_answer(output: &str) -> Answer {
    let trimmed = output.trim();
    let last_line = trimmed.lines().rev().find(|l| !l.trim().is_empty());
    let form = std::iter::once(trimmed)
        .chain(last_line)
        .find_map(|text| serde_json::from_str::<serde_json::Value>(text.trim()).ok())
        .and_then(|value| answer_form(&value));
    form.unwrap_or_else(|| Answer {
        text: trimmed.to_owned(),
        ..Answer::default()
    })
}

/// `{"answer": ..., "usage": {"prompt_tokens", "completion_tokens"}, "forced": bool}`:
/// `None` when `value` is not an object with an `answer`.
fn answer_form(value: &serde_json::Value) -> Option<Answer> {
    let object = value.as_object()?;
    let text = match object.get("answer")? {
        serde_json::Value::String(text) => text.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    };
    let usage = object.get("usage").and_then(|usage| {
        Some(Usage {
            prompt_tokens: usage.get("prompt_tokens")?.as_u64()?,
            completion_tokens: usage.get("completion_tokens")?.as_u64()?,
        })
    });
    Some(Answer {
        text,
        usage,
        forced: object
            .get("forced")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        ..Answer::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arms_parse_with_shell_words_and_placeholders_inside_words() {
        let arm = ExternalArm::parse(
            "my-arm=python3 'a b.py' --q={question} {context_file} '{output_file}' {other}",
        )
        .unwrap();
        assert_eq!(arm.name, "my-arm");
        assert_eq!(arm.program, "python3");
        assert_eq!(arm.args[0], vec![Piece::Text("a b.py".into())]);
        assert_eq!(
            arm.args[1],
            vec![Piece::Text("--q=".into()), Piece::Question]
        );
        assert_eq!(arm.args[2], vec![Piece::ContextFile]);
        assert_eq!(arm.args[3], vec![Piece::OutputFile]);
        assert_eq!(arm.args[4], vec![Piece::Text("{other}".into())]);
        assert!(!arm.uses(&Piece::QuestionFile));
    }

    #[test]
    fn bad_arms_say_what_is_wrong() {
        for (spec, says) in [
            ("stub", "write NAME=COMMAND"),
            ("=cat", "must be letters"),
            ("a b=cat", "must be letters"),
            ("rlm=cat", "built-in arm"),
            ("x=", "the command is empty"),
            ("x='unclosed", "cannot split"),
            ("x={model} run", "may not be a placeholder"),
        ] {
            let error = ExternalArm::parse(spec).unwrap_err();
            assert!(error.contains(says), "{spec}: {error}");
        }
    }

    #[test]
    fn the_answer_form_reports_usage_and_forcing() {
        let answer = read_answer(
            "thinking...\n{\"answer\": \"42\", \"usage\": {\"prompt_tokens\": 7, \"completion_tokens\": 3}, \"forced\": true}\n",
        );
        assert_eq!(answer.text, "42");
        assert_eq!(
            answer.usage,
            Some(Usage {
                prompt_tokens: 7,
                completion_tokens: 3
            })
        );
        assert!(answer.forced);
        let number = read_answer("{\"answer\": 17}");
        assert_eq!((number.text.as_str(), number.usage), ("17", None));
        let plain = read_answer("  The number is 9.\n");
        assert_eq!(
            (plain.text.as_str(), plain.usage),
            ("The number is 9.", None)
        );
        // A JSON object without `answer` is just text.
        let other = read_answer("{\"result\": 1}");
        assert_eq!(other.text, "{\"result\": 1}");
    }

    #[test]
    fn the_stderr_tail_is_bounded() {
        let long = "x".repeat(STDERR_TAIL_CHARS * 3) + "END";
        let kept = tail(&long);
        assert_eq!(kept.chars().count(), STDERR_TAIL_CHARS);
        assert!(kept.ends_with("END"));
    }
}
