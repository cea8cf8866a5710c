//! What an agent's run means for the model: an answer, or an error object it can read.
//!
//! The model sees agent failures as data (a [`SubError`]: `{"status": "error",
//! "error": …, "exit_code": 3, "stderr_tail": …}`), never as a crash of its own code, and it sees the same value whether it takes
//! the return value of `spawn_agent` or reads `sub-result-<id>` later.

use std::time::Duration;

use rlm_process::{Supervised, Termination};
use rlm_protocol::SubError;

/// Start of the marker appended to an answer cut at the stdout cap. Stable: tests and
/// models may look for it.
pub const OUTPUT_TRUNCATED_MARKER: &str = "[agent output truncated:";

/// Characters of stdout kept in an error object (the stdout of a failed agent is a
/// clue, not an answer).
const ERROR_STDOUT_CHARS: usize = 4_000;

/// Stdout as an answer: lossless UTF-8 up to the cap (a character cut by the cap is
/// dropped), surrounding blank lines trimmed, and the marker when the cap cut it.
pub(crate) fn stdout_text(run: &Supervised) -> String {
    let bytes = &run.stdout;
    let text = match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        // A multi-byte character cut by the cap: keep what precedes it.
        Err(e) if run.stdout_truncated && e.error_len().is_none() => {
            String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned()
        }
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    };
    let mut text = answer_text(&text);
    if run.stdout_truncated {
        text.push_str(&format!(
            "\n{OUTPUT_TRUNCATED_MARKER} the first {} of {} bytes are kept]",
            run.stdout.len(),
            run.stdout_total_bytes
        ));
    }
    text
}

/// An agent's answer as text, however it came (stdout or a stored result): known
/// secrets scrubbed (an agent may echo a key it was given; they never reach the
/// store), surrounding blank lines and trailing whitespace trimmed.
pub(crate) fn answer_text(text: &str) -> String {
    rlm_process::redact_secrets(text)
        .trim_start_matches(['\n', '\r'])
        .trim_end()
        .to_owned()
}

/// The end of an agent's stderr as the store, the trace and the model see it: known
/// secrets and keys of known shapes scrubbed, like every other byte an agent writes.
pub(crate) fn stderr_text(run: &Supervised) -> String {
    rlm_process::redact_secrets(&run.stderr_tail).into_owned()
}

/// How an agent that gave no usable answer failed, for the model to read (its stdout
/// and stderr scrubbed of secrets).
pub(crate) fn failure(run: &Supervised, timeout: Duration, grace: Duration) -> SubError {
    let mut failure = SubError {
        stderr_tail: stderr_text(run),
        ..SubError::default()
    };
    let kill_note = if run.forced_kill {
        format!(
            " (it ignored SIGTERM and was SIGKILLed after {} s)",
            grace.as_secs_f64()
        )
    } else {
        String::new()
    };
    failure.error = match run.termination {
        Termination::Exited(0) => {
            failure.exit_code = Some(0);
            "the agent exited successfully but printed nothing and stored no result".to_owned()
        }
        Termination::Exited(code) => {
            failure.exit_code = Some(code);
            format!("the agent exited with code {code}")
        }
        Termination::Signaled(signal) => {
            failure.signal = Some(signal);
            format!("the agent {}", run.termination)
        }
        Termination::TimedOut => {
            failure.timed_out = true;
            failure.timeout_secs = Some(timeout.as_secs_f64());
            format!(
                "the agent timed out after {} s and was stopped{kill_note}; give it a smaller task or raise --agent-timeout",
                timeout.as_secs_f64()
            )
        }
        Termination::Cancelled => {
            failure.cancelled = true;
            format!("the agent was cancelled{kill_note}")
        }
    };
    let stdout = stdout_text(run);
    if !stdout.is_empty() {
        failure.stdout = Some(match stdout.char_indices().nth(ERROR_STDOUT_CHARS) {
            None => stdout,
            Some((cut, _)) => format!(
                "{}\n{OUTPUT_TRUNCATED_MARKER} the first {ERROR_STDOUT_CHARS} characters of {} bytes are shown]",
                &stdout[..cut],
                run.stdout_total_bytes
            ),
        });
    }
    failure
}

/// What model APIs and agent CLIs say when a key is refused (Claude Code: "Invalid
/// API key · Fix external API key"; the APIs' 401 bodies).
const KEY_REFUSED: &[&str] = &[
    "invalid api key",
    "invalid x-api-key",
    "incorrect api key",
    "invalid_api_key",
    "authentication_error",
    "401 unauthorized",
    "status 401",
    "401 status code",
];

/// When what a failed agent printed says its model API refused its key, says so in
/// the error and names the variables that carry the agent's key (the key-like names
/// of `pass_env`, each marked set or not set here).
pub(crate) fn name_a_refused_key(error: &mut SubError, pass_env: &[String]) {
    let printed = format!(
        "{}\n{}",
        error.stdout.as_deref().unwrap_or_default(),
        error.stderr_tail
    )
    .to_lowercase();
    let Some(said) = KEY_REFUSED.iter().find(|phrase| printed.contains(**phrase)) else {
        return;
    };
    let names: Vec<String> = pass_env
        .iter()
        .filter(|name| rlm_process::is_secret_name(name, &[]))
        .map(|name| {
            let set = rlm_process::secret_var(name).is_some_and(|v| !v.is_empty());
            format!("{name} ({})", if set { "set" } else { "not set" })
        })
        .collect();
    let check = if names.is_empty() {
        "pass the agent its key with --agent-env NAME".to_owned()
    } else {
        format!(
            "check the key the agent is given: {} (and its base URL, if it uses a gateway)",
            names.join(", ")
        )
    };
    error.error = format!(
        "{}: its model API refused its key (it said {said:?}); {check}",
        error.error
    );
}

/// Makes a cancellation the timeout it was: the agent (`what`: `agent`, `sub-run`) was
/// stopped because the code cell waiting for it ran past `--exec-timeout`
/// (`cell_timeout`), which bounds a cell and the agents it waits on.
pub(crate) fn stopped_with_its_cell(
    error: &mut SubError,
    what: &str,
    cell_timeout: Duration,
    agent_timeout: Duration,
    ran: Duration,
) {
    error.cancelled = false;
    error.timed_out = true;
    error.timeout_secs = Some(cell_timeout.as_secs_f64());
    error.error = format!(
        "the {what} timed out: the code cell waiting for it ran past --exec-timeout ({} s), \
         which bounds a cell and the agents it waits on, so it was stopped after {:.1} s \
         (--agent-timeout is {} s); raise --exec-timeout to give agents longer, or give it \
         a smaller task",
        cell_timeout.as_secs_f64(),
        ran.as_secs_f64(),
        agent_timeout.as_secs_f64()
    );
}

/// Puts the scheduler's failure first (`--runner slurm`): the job did not run to its
/// end because of Slurm (no resources, a node failure, cancelled), not because of the
/// agent; `slurm` holds the scheduler's own line.
pub(crate) fn blame_the_scheduler(error: &mut SubError, failure: String) {
    error.error = format!(
        "{failure} ({}); the scheduler, not the agent, ended it",
        error.error
    );
    error.slurm = Some(failure);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The failure as the model reads it.
    fn failure_value(run: &Supervised, timeout: Duration, grace: Duration) -> serde_json::Value {
        rlm_protocol::SubResult::Error(failure(run, timeout, grace)).to_value()
    }

    fn run(termination: Termination, stdout: &[u8], total: u64) -> Supervised {
        Supervised {
            pid: 42,
            termination,
            stdout: stdout.to_vec(),
            stdout_truncated: total > stdout.len() as u64,
            stdout_total_bytes: total,
            stderr_tail: "boom\n".into(),
            duration: Duration::ZERO,
            forced_kill: false,
        }
    }

    #[test]
    fn a_plain_answer_is_trimmed() {
        let r = run(Termination::Exited(0), b"\n42 errors\n\n", 12);
        assert_eq!(stdout_text(&r), "42 errors");
    }

    #[test]
    fn a_cut_answer_ends_with_the_marker_and_no_broken_character() {
        // "é" is two bytes; the cap cut it in half.
        let r = run(Termination::Exited(0), b"abc\xc3", 1000);
        let text = stdout_text(&r);
        assert!(text.starts_with("abc\n"));
        assert!(!text.contains('\u{fffd}'));
        assert!(text.contains(OUTPUT_TRUNCATED_MARKER));
        assert!(text.ends_with("the first 4 of 1000 bytes are kept]"));
    }

    #[test]
    fn error_objects_name_the_failure() {
        let failed = failure_value(
            &run(Termination::Exited(3), b"partial", 7),
            Duration::from_secs(600),
            Duration::from_secs(2),
        );
        assert_eq!(failed["exit_code"], 3);
        assert_eq!(failed["stderr_tail"], "boom\n");
        assert_eq!(failed["stdout"], "partial");
        assert!(failed["error"].as_str().unwrap().contains("code 3"));

        let timed_out = failure_value(
            &run(Termination::TimedOut, b"", 0),
            Duration::from_secs(600),
            Duration::from_secs(2),
        );
        assert_eq!(timed_out["timed_out"], true);
        assert!(timed_out.get("stdout").is_none());

        let killed = failure_value(
            &run(Termination::Signaled(9), b"", 0),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        assert_eq!(killed["signal"], 9);
        assert!(killed["error"].as_str().unwrap().contains("SIGKILL"));

        let silent = failure_value(
            &run(Termination::Exited(0), b"  \n", 3),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        assert_eq!(silent["exit_code"], 0);
        assert!(silent["error"]
            .as_str()
            .unwrap()
            .contains("printed nothing"));
    }

    #[test]
    fn a_refused_key_is_named_in_the_error() {
        let mut refused = failure(
            &run(
                Termination::Exited(1),
                b"Invalid API key \xc2\xb7 Fix external API key\n",
                40,
            ),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        name_a_refused_key(
            &mut refused,
            &[
                "ANTHROPIC_API_KEY".to_owned(),
                "ANTHROPIC_BASE_URL".to_owned(),
            ],
        );
        assert!(
            refused
                .error
                .contains("refused its key (it said \"invalid api key\"); check the key the agent is given: ANTHROPIC_API_KEY ("),
            "{}",
            refused.error
        );
        assert!(!refused.error.contains("ANTHROPIC_BASE_URL ("));

        let mut other = failure(
            &run(Termination::Exited(1), b"no such file", 12),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        name_a_refused_key(&mut other, &["ANTHROPIC_API_KEY".to_owned()]);
        assert_eq!(other.error, "the agent exited with code 1");
    }

    #[test]
    fn long_stdout_in_an_error_is_clipped_with_the_marker() {
        let long = vec![b'y'; ERROR_STDOUT_CHARS + 10];
        let object = failure_value(
            &run(Termination::Exited(1), &long, long.len() as u64),
            Duration::from_secs(1),
            Duration::from_secs(2),
        );
        let stdout = object["stdout"].as_str().unwrap();
        assert!(stdout.starts_with(&"y".repeat(ERROR_STDOUT_CHARS)));
        assert!(stdout.ends_with(&format!(
            "{OUTPUT_TRUNCATED_MARKER} the first {ERROR_STDOUT_CHARS} characters of {} bytes are shown]",
            ERROR_STDOUT_CHARS + 10
        )));
    }
}
