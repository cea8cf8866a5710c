//! A command line used as a model (`llm -m X`, `claude -p {prompt}`).
//!
//! Many users reach models through CLIs that already hold their credentials and
//! settings; rlm runs such a command once per call. The conversation is flattened into
//! one prompt, passed as the argument that holds `{prompt}` or else on stdin, and the
//! answer is whatever the command prints. The command inherits rlm's environment (it
//! is the user's own model command and needs its own keys and home directory).
//!
//! Timeouts kill the direct child (`kill_on_drop`); killing whole process groups is the
//! job of `rlm-process` and will replace this when it lands.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::config::ProviderConfig;
use super::http::RawCompletion;
use super::retry::timeout_secs;
use super::{ChatMessage, ChatRequest, Completion, DeltaSink, Provider, ProviderError, Role};

/// The placeholder replaced by the prompt (as part of one argument).
pub const PROMPT_PLACEHOLDER: &str = "{prompt}";
/// Most of a command's stdout kept as the answer; the rest is dropped.
pub const STDOUT_MAX_BYTES: usize = 16 * 1024 * 1024;
/// How much of a failing command's stderr is quoted in the error.
pub const STDERR_TAIL_BYTES: usize = 2 * 1024;
/// How long to keep reading pipes after the command exited (a grandchild may hold
/// them open forever).
pub const PIPE_DRAIN_MILLIS: u64 = 2_000;

/// A model that is a command line.
#[derive(Debug, Clone)]
pub struct CliProvider {
    command_line: String,
    program: String,
    args: Vec<String>,
    prompt_in_args: bool,
    model: String,
    timeout: Duration,
}

impl CliProvider {
    /// A provider running `config.llm_cmd` (split like a POSIX shell would, without
    /// running one). `config.model` is only a label; the command line is used if empty.
    pub fn new(config: &ProviderConfig) -> Result<Self, ProviderError> {
        let command_line = config.llm_cmd.as_deref().map(str::trim).unwrap_or_default();
        if command_line.is_empty() {
            return Err(ProviderError::Config(
                "the cli provider needs a command; pass --llm-cmd, e.g. --llm-cmd 'llm -m MODEL'"
                    .into(),
            ));
        }
        let words = shell_words::split(command_line).map_err(|error| {
            ProviderError::Config(format!(
                "cannot split --llm-cmd `{command_line}`: {error}; check its quotes"
            ))
        })?;
        let Some((program, args)) = words.split_first() else {
            return Err(ProviderError::Config(format!(
                "--llm-cmd `{command_line}` names no program"
            )));
        };
        let model = if config.model.trim().is_empty() {
            command_line
        } else {
            config.model.trim()
        };
        Ok(Self {
            prompt_in_args: args.iter().any(|arg| arg.contains(PROMPT_PLACEHOLDER)),
            command_line: command_line.to_owned(),
            program: program.clone(),
            args: args.to_vec(),
            model: model.to_owned(),
            timeout: config.request_timeout,
        })
    }

    /// The command line as configured.
    pub fn command_line(&self) -> &str {
        &self.command_line
    }

    fn failure(&self, status: impl Into<String>, stderr: &[u8]) -> ProviderError {
        ProviderError::Command {
            command: self.command_line.clone(),
            status: status.into(),
            stderr_tail: tail(stderr),
        }
    }

    async fn run(&self, prompt: &str) -> Result<String, ProviderError> {
        let mut command = Command::new(&self.program);
        if self.prompt_in_args {
            command.args(
                self.args
                    .iter()
                    .map(|arg| arg.replace(PROMPT_PLACEHOLDER, prompt)),
            );
            command.stdin(Stdio::null());
        } else {
            command.args(&self.args);
            command.stdin(Stdio::piped());
        }
        // The command inherits rlm's environment, including the keys rlm keeps out of
        // its own readable environment (an `llm` or `claude` CLI needs its key).
        command
            .envs(rlm_process::hidden_secrets())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|error| {
            self.failure(format!("could not start `{}`: {error}", self.program), b"")
        })?;

        // Guards abort the helper tasks (and close their pipe ends) on every return.
        let _writer = child.stdin.take().map(|mut stdin| {
            let prompt = prompt.as_bytes().to_vec();
            // A command that exits without reading stdin closes the pipe: not an error.
            TaskGuard(tokio::spawn(async move {
                let _ = stdin.write_all(&prompt).await;
                let _ = stdin.shutdown().await;
            }))
        });
        let mut stdout = child
            .stdout
            .take()
            .map(|out| TaskGuard(tokio::spawn(read_head(out, STDOUT_MAX_BYTES))));
        let mut stderr = child
            .stderr
            .take()
            .map(|err| TaskGuard(tokio::spawn(read_tail(err, STDERR_TAIL_BYTES))));
        let drain = Duration::from_millis(PIPE_DRAIN_MILLIS);

        let status = match tokio::time::timeout(self.timeout, child.wait()).await {
            Ok(Ok(status)) => status,
            Ok(Err(error)) => {
                return Err(self.failure(format!("waiting for it failed: {error}"), b""));
            }
            Err(_elapsed) => {
                let _ = child.kill().await;
                let stderr = tokio::time::timeout(drain, collect(&mut stderr)).await;
                return Err(self.failure(
                    format!(
                        "killed after the request timeout of {} s",
                        timeout_secs(self.timeout)
                    ),
                    &stderr.ok().flatten().unwrap_or_default(),
                ));
            }
        };
        let (out, err) = tokio::join!(
            tokio::time::timeout(drain, collect(&mut stdout)),
            tokio::time::timeout(drain, collect(&mut stderr)),
        );
        let stderr = err.ok().flatten().unwrap_or_default();
        if !status.success() {
            let status = match status.code() {
                Some(code) => format!("exit status {code}"),
                None => format!("{status}"),
            };
            return Err(self.failure(status, &stderr));
        }
        let Some(stdout) = out.ok().flatten() else {
            return Err(self.failure("its stdout could not be read", &stderr));
        };
        let mut answer = String::from_utf8_lossy(&stdout).into_owned();
        let kept = answer.trim_end_matches(['\n', '\r']).len();
        answer.truncate(kept);
        Ok(answer)
    }
}

#[async_trait::async_trait]
impl Provider for CliProvider {
    async fn complete(
        &self,
        request: &ChatRequest,
        on_delta: Option<DeltaSink<'_>>,
    ) -> Result<Completion, ProviderError> {
        let started = Instant::now();
        // A command has no native tool calling: the tools environment describes its
        // tools in the prompt and reads calls from the text (`--tool-protocol text`).
        let raw = RawCompletion {
            text: self.run(&flatten_messages(&request.messages)).await?,
            ..RawCompletion::default()
        };
        raw.show_whole(on_delta);
        // A command reports no usage: `finish` estimates it from the text.
        Ok(raw.finish(request, &self.model, started, 1))
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn describe(&self) -> String {
        format!("cli `{}`", self.command_line)
    }
}

/// One prompt from a conversation: a lone user message as is; otherwise each message
/// under a `System:` / `User:` / `Assistant:` label, separated by blank lines.
pub fn flatten_messages(messages: &[ChatMessage]) -> String {
    if let [only] = messages {
        if only.role == Role::User {
            return only.content.clone();
        }
    }
    let sections: Vec<String> = messages
        .iter()
        .map(|message| {
            let label = match message.role {
                Role::System => "System",
                Role::User => "User",
                Role::Assistant => "Assistant",
                Role::Tool => "Tool result",
            };
            format!("{label}:\n{}", message.content)
        })
        .collect();
    sections.join("\n\n")
}

/// A spawned helper task that is aborted when the guard is dropped.
struct TaskGuard<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for TaskGuard<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Awaits a reader task, `None` when it was cancelled or failed.
async fn collect(task: &mut Option<TaskGuard<std::io::Result<Vec<u8>>>>) -> Option<Vec<u8>> {
    let guard = task.as_mut()?;
    (&mut guard.0).await.ok()?.ok()
}

/// Reads a stream to its end, keeping its first `cap` bytes.
async fn read_head(mut reader: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    let mut buffer = vec![0_u8; 64 * 1024];
    loop {
        let read = reader.read(&mut buffer).await?;
        if read == 0 {
            return Ok(kept);
        }
        let room = cap.saturating_sub(kept.len()).min(read);
        kept.extend_from_slice(&buffer[..room]);
    }
}

/// Reads a stream to its end, keeping its last `cap` bytes.
async fn read_tail(mut reader: impl AsyncRead + Unpin, cap: usize) -> std::io::Result<Vec<u8>> {
    let mut kept = Vec::new();
    let mut buffer = vec![0_u8; 16 * 1024];
    loop {
        let read = reader.read(&mut buffer).await?;
        if read == 0 {
            return Ok(kept);
        }
        kept.extend_from_slice(&buffer[..read]);
        if kept.len() > 2 * cap {
            kept.drain(..kept.len() - cap);
        }
    }
}

/// The last [`STDERR_TAIL_BYTES`] of stderr as text, or a note that it was empty.
fn tail(stderr: &[u8]) -> String {
    let start = stderr.len().saturating_sub(STDERR_TAIL_BYTES);
    let text = String::from_utf8_lossy(&stderr[start..]);
    let text = text.trim();
    if text.is_empty() {
        "(no stderr)".to_owned()
    } else if start > 0 {
        format!("…{text}")
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProviderKind;

    fn cli(command: &str) -> Result<CliProvider, ProviderError> {
        let mut config = ProviderConfig::new(ProviderKind::Cli, "");
        config.llm_cmd = Some(command.into());
        CliProvider::new(&config)
    }

    #[test]
    fn commands_split_like_a_shell() {
        let provider = cli("llm -m 'my model' --system \"be brief\" {prompt}").unwrap();
        assert_eq!(provider.program, "llm");
        assert_eq!(
            provider.args,
            ["-m", "my model", "--system", "be brief", "{prompt}"]
        );
        assert!(provider.prompt_in_args);
        assert_eq!(
            provider.model(),
            "llm -m 'my model' --system \"be brief\" {prompt}"
        );
        assert!(!cli("claude -p").unwrap().prompt_in_args);
        assert!(matches!(cli("  "), Err(ProviderError::Config(_))));
        assert!(matches!(
            cli("llm 'unclosed"),
            Err(ProviderError::Config(_))
        ));
    }

    #[test]
    fn flattening_labels_turns() {
        assert_eq!(
            flatten_messages(&[ChatMessage::user("just this")]),
            "just this"
        );
        let flat = flatten_messages(&[
            ChatMessage::system("rules"),
            ChatMessage::user("q"),
            ChatMessage::assistant("a"),
        ]);
        assert_eq!(flat, "System:\nrules\n\nUser:\nq\n\nAssistant:\na");
    }

    #[test]
    fn stderr_tail_is_bounded() {
        assert_eq!(tail(b"  \n"), "(no stderr)");
        let long = vec![b'x'; STDERR_TAIL_BYTES * 3];
        assert_eq!(tail(&long).len(), STDERR_TAIL_BYTES + '…'.len_utf8());
    }
}
