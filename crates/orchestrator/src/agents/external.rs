//! Running one external agent: prompt, environment, supervised process, and the
//! `sub-result-<id>` variable that always exists afterwards.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rlm_context_store::private_fs::write_private;
use rlm_context_store::{
    Durability, Expected, SetOptions, Store, StoreError, LOCKS_DIR, SPILL_DIR, VARIABLES_DIR,
};
use rlm_process::{
    inherited_environment, run_supervised, AllowList, CancellationToken, SpawnOptions,
    SuperviseOptions, Termination, DEFAULT_GRACE,
};
use serde_json::Value;

use super::confine::AgentSandbox;
use super::lineage::{EnvVars, Lineage};
use super::outcome::{failure, stderr_text, stdout_text};
use super::prepare_error::PrepareError;
use super::prompt::{agent_prompt, AgentRef, AnswerChannel};
use super::stored_result::{adopt, read_stored, Stored};
use crate::agent_cli::{render_value, AgentCommand, Substitutions, MAX_ARG_BYTES};
use crate::ids::AgentId;
use rlm_protocol::{SubAnswer, SubError, SubResult};

/// Directory of the data dir holding per-agent files (`agents/<id>/prompt.txt`).
pub const AGENTS_DIR: &str = "agents";
/// Name of the prompt file: given as `{prompt_file}`, and kept for `runs show` whatever
/// the template.
pub const PROMPT_FILE_NAME: &str = "prompt.txt";

/// Name of the binary whose directory is appended to an agent's `PATH`, so the
/// `rlm-orchestrate vars set …` the prompt suggests works without an install.
const OWN_BINARY_NAME: &str = "rlm-orchestrate";

/// Everything needed to run one external agent.
#[derive(Debug, Clone)]
pub struct ExternalAgentSpec {
    /// The agent's place in the tree: its id, its parent's (the scope of its result,
    /// `agent:<parent id>`), its depth and its result key.
    pub lineage: Lineage,
    /// The data directory; must be the store's. Given to the agent as an absolute
    /// `RLM_DATA_DIR`; the prompt file goes under `<data_dir>/agents/<agent_id>/`.
    pub data_dir: PathBuf,
    /// The task, first in the prompt.
    pub task: String,
    /// The context variables the prompt names (by file path only).
    pub refs: Vec<AgentRef>,
    /// `--agent-timeout`.
    pub timeout: Duration,
    /// Bytes of stdout kept as the answer (default 1 MiB); larger stored results are
    /// returned as a pointer to the variable instead of inline.
    pub stdout_cap: usize,
    /// Names of environment variables the user allowed through (a preset's and
    /// `--agent-env`).
    pub pass_env: Vec<String>,
    /// Variables a preset sets, as templates (`{agent_tmp}`, `{data_dir}`, …): applied
    /// after `pass_env`; a value naming a path inside `{agent_tmp}` is created as a
    /// directory first, and, under `--agent-sandbox on`, a value naming an absolute path
    /// elsewhere that does not exist is not set (the agent could not create it).
    pub set_env: Vec<(String, String)>,
    /// The `rlm-orchestrate` executable the prompt's commands name and `RLM_BIN` holds
    /// (`None`: this process, if it is `rlm-orchestrate`).
    pub rlm_bin: Option<PathBuf>,
    /// Under `--agent-sandbox on`: more paths the agent may read, as templates (a
    /// preset's `confined_read`); empty ones are skipped.
    pub confined_read: Vec<String>,
    /// `--agent-sandbox on`: confine the agent (`None`: it runs as the user).
    pub sandbox: Option<AgentSandbox>,
    /// `--runner`: a local process or a Slurm job.
    pub runner: crate::runner::Runner,
    /// Stops the agent (SIGTERM, grace, SIGKILL to its group) when cancelled.
    pub cancel: Option<CancellationToken>,
    /// Set when the code that waited for the agent ended first (its cell timed out):
    /// the agent stopped through `cancel` then reports a timeout of the cell, not a
    /// cancellation (`None`: a stop is always a cancellation).
    pub abandoned: Option<Abandonment>,
}

/// How an agent learns that the code waiting for it ended before it did.
#[derive(Debug, Clone)]
pub struct Abandonment {
    /// Cancelled (before the agent's `cancel`) when the waiting code ended.
    pub token: CancellationToken,
    /// `--exec-timeout`: how long a code cell may run, the agents it waits on included.
    pub cell_timeout: Duration,
}

/// What an agent produced.
#[derive(Debug, Clone)]
pub struct AgentOutcome {
    /// The agent's id.
    pub agent_id: AgentId,
    /// Its pid (0 if it could not be started).
    pub pid: u32,
    /// `sub-result-<agent_id>`: the variable holding [`AgentOutcome::value`].
    pub result_key: String,
    /// The answer: what the agent stored in `sub-result-<id>`; else its stdout as a
    /// string (with [`OUTPUT_TRUNCATED_MARKER`](super::OUTPUT_TRUNCATED_MARKER) when
    /// cut); else the error object, a [`SubResult::Error`] in its wire form
    /// (`{"status": "error", "error": …, "exit_code" | "signal" | "timed_out" |
    /// "cancelled": …, "stderr_tail": …, "stdout"?: …}`). A stored result larger than
    /// `stdout_cap` is returned as a string pointing to the variable.
    pub value: Value,
    /// The value is an answer, not an error object.
    pub ok: bool,
    /// How the process ended. An agent that could not be started reports
    /// `Exited(127)` (not found) or `Exited(126)` (other failure), as a shell would.
    pub termination: Termination,
    /// Wall time, preparation and collection included.
    pub duration: Duration,
    /// The agent stored `sub-result-<id>` itself (rather than rlm storing its stdout
    /// or the error).
    pub stored_by_agent: bool,
    /// The end of the agent's stderr (also in the error object when it failed).
    pub stderr_tail: String,
}

/// The agent's complete environment: [`AllowList::BASE`] from ours (with the
/// directory of a running `rlm-orchestrate` appended to `PATH`); then its lineage
/// ([`EnvVars`]: `RLM_DATA_DIR`, `RLM_AGENT_ID`, `RLM_PARENT_ID`, `RLM_DEPTH`,
/// `RLM_RESULT_KEY`, `RLM_RESULT_FILE`, and `RLM_BIN` when the executable is known);
/// then the `pass_env` names that are set (they cannot replace the `RLM_*` ones).
/// Nothing else: API keys reach an agent only through `pass_env`. (A preset's
/// `set_env` is applied later, when the agent's temporary directory exists.)
pub fn agent_environment(
    spec: &ExternalAgentSpec,
    data_dir: &Path,
    result_file: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited_environment(&AllowList::BASE, &[])
        .into_iter()
        .map(|(name, value)| {
            let value = if name == "PATH" {
                path_with_own_dir(value)
            } else {
                value
            };
            (name, value)
        })
        .collect();
    let mut ours = spec.lineage.env_vars(data_dir);
    ours.push((
        EnvVars::RLM_RESULT_FILE.into(),
        result_file.as_os_str().to_owned(),
    ));
    if let Some(bin) = rlm_bin(spec) {
        ours.push((EnvVars::RLM_BIN.into(), bin.into_os_string()));
    }
    for (name, value) in &ours {
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), value.clone()));
    }
    for name in &spec.pass_env {
        if EnvVars::ALL.contains(&name.as_str()) {
            tracing::debug!(
                name,
                "--agent-env cannot replace an RLM_* variable of the agent"
            );
            continue;
        }
        if name.is_empty() || name.contains(['=', '\0']) {
            continue;
        }
        if let Some(value) = rlm_process::secret_var(name) {
            env.retain(|(n, _)| n != name.as_str());
            env.push((name.into(), value));
        }
    }
    env
}

/// The `rlm-orchestrate` executable an agent is told about: the configured one, else
/// this process if it is `rlm-orchestrate`.
fn rlm_bin(spec: &ExternalAgentSpec) -> Option<PathBuf> {
    spec.rlm_bin.clone().or_else(own_binary)
}

/// This process's executable, if it is `rlm-orchestrate`.
fn own_binary() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    (exe.file_name().and_then(|n| n.to_str()) == Some(OWN_BINARY_NAME)).then_some(exe)
}

/// `PATH` with the directory of the running `rlm-orchestrate` appended (if that is
/// what runs and its directory is not already there).
pub(super) fn path_with_own_dir(path: OsString) -> OsString {
    let Some(exe) = own_binary() else {
        return path;
    };
    let Some(dir) = exe.parent() else {
        return path;
    };
    if std::env::split_paths(&path).any(|p| p == dir) {
        return path;
    }
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.push(dir.to_owned());
    std::env::join_paths(dirs).unwrap_or(path)
}

/// Runs `command` for `spec` and returns its answer; never fails. Afterwards
/// `sub-result-<agent_id>` holds [`AgentOutcome::value`] (stored by the agent, or by
/// this function with scope `agent:<parent_id>`).
pub async fn run_external_agent(
    command: &AgentCommand,
    spec: ExternalAgentSpec,
    store: Arc<Store>,
) -> AgentOutcome {
    let started = Instant::now();
    let agent_id = spec.lineage.agent_id.clone();
    let key = super::result_key(&agent_id);
    let timeout = spec.timeout;
    let (pid, termination, stderr_tail, fallback) = match prepare(command, &spec, &store).await {
        Err(error) => (
            0,
            Termination::Exited(NOT_STARTABLE),
            String::new(),
            Fallback::error(SubError::not_started(error.to_string(), NOT_STARTABLE)),
        ),
        Ok(Prepared { spawn, stdin, _tmp }) => {
            let program = spawn.program_name();
            let options = SuperviseOptions {
                timeout: Some(spec.timeout),
                stdout_cap: spec.stdout_cap,
                stdin,
                cancel: spec.cancel.clone(),
                ..SuperviseOptions::default()
            };
            tracing::debug!(%agent_id, %program, "starting an external agent");
            let job = spec.runner.guard(&agent_id);
            match run_supervised(spawn, options).await {
                Ok(run) => {
                    if !matches!(
                        run.termination,
                        Termination::TimedOut | Termination::Cancelled
                    ) {
                        job.finished();
                    }
                    let answer = stdout_text(&run);
                    let fallback = if run.termination.success() && !answer.is_empty() {
                        Fallback::answer(Value::String(answer))
                    } else {
                        let mut error = failure(&run, timeout, DEFAULT_GRACE);
                        if run.termination == Termination::Cancelled {
                            if let Some(abandoned) =
                                spec.abandoned.as_ref().filter(|a| a.token.is_cancelled())
                            {
                                super::outcome::stopped_with_its_cell(
                                    &mut error,
                                    "agent",
                                    abandoned.cell_timeout,
                                    timeout,
                                    run.duration,
                                );
                            }
                        }
                        super::outcome::name_a_refused_key(&mut error, &spec.pass_env);
                        if let Some(sandbox) = &spec.sandbox {
                            sandbox.explain(&mut error, &run.termination);
                        }
                        if let Some(failure) = spec.runner.failure(&error.stderr_tail) {
                            super::outcome::blame_the_scheduler(&mut error, failure);
                        }
                        Fallback::error(error)
                    };
                    (run.pid, run.termination, stderr_text(&run), fallback)
                }
                Err(error) => {
                    job.finished(); // it never started
                    let code = if error.source.kind() == io::ErrorKind::NotFound {
                        NOT_FOUND
                    } else {
                        NOT_STARTABLE
                    };
                    let mut message = format!("{error}: {}", error.source);
                    if code == NOT_FOUND {
                        message.push_str(" (is it installed and on PATH? check --agent-cmd)");
                    }
                    (
                        0,
                        Termination::Exited(code),
                        String::new(),
                        Fallback::error(SubError::not_started(message, code)),
                    )
                }
            }
        }
    };
    let scope = match &spec.lineage.parent_id {
        Some(parent) => parent.scope(),
        None => rlm_context_store::GLOBAL_SCOPE.to_owned(),
    };
    let inline_cap = spec.stdout_cap as u64;
    let settled = {
        let store = Arc::clone(&store);
        let key = key.clone();
        tokio::task::spawn_blocking(move || settle(&store, &key, &scope, inline_cap, fallback))
            .await
    };
    let (result, stored_by_agent) = match settled {
        Ok(settled) => settled,
        Err(error) => (
            SubResult::Error(SubError::message(format!(
                "collecting the agent's result failed: {error}"
            ))),
            false,
        ),
    };
    let ok = result.is_answer();
    tracing::debug!(%agent_id, %termination, ok, stored_by_agent, "external agent finished");
    let value = model_view(result);
    AgentOutcome {
        agent_id,
        pid,
        result_key: key,
        value,
        ok,
        termination,
        duration: started.elapsed(),
        stored_by_agent,
        stderr_tail,
    }
}

/// A ready-to-start agent.
struct Prepared {
    spawn: SpawnOptions,
    stdin: Option<Vec<u8>>,
    /// The agent's private temporary directory (`{agent_tmp}`; a confined agent's
    /// `TMPDIR` and working directory), removed once it has ended.
    _tmp: tempfile::TempDir,
}

/// Builds the prompt, writes the prompt file (for `{prompt_file}` and the trace), and
/// fills in the command and environment.
async fn prepare(
    command: &AgentCommand,
    spec: &ExternalAgentSpec,
    store: &Store,
) -> Result<Prepared, PrepareError> {
    let agent_id = &spec.lineage.agent_id;
    let key = super::result_key(agent_id);
    let result_file = store.path_of(&key)?;
    let data_dir = std::path::absolute(&spec.data_dir).map_err(|source| PrepareError::DataDir {
        path: spec.data_dir.clone(),
        source,
    })?;
    let rlm_bin = rlm_bin(spec);
    let prompt = agent_prompt(
        &spec.task,
        &spec.refs,
        &AnswerChannel {
            result_key: key.clone(),
            result_file: result_file.clone(),
            rlm_bin: rlm_bin.clone(),
        },
    );
    let prompt_file = data_dir
        .join(AGENTS_DIR)
        .join(agent_id.as_str())
        .join(PROMPT_FILE_NAME);
    let (path, text) = (prompt_file.clone(), prompt.clone());
    tokio::task::spawn_blocking(move || write_private(&path, text.as_bytes()))
        .await?
        .map_err(|e| PrepareError::PromptFile {
            path: prompt_file.clone(),
            source: e.source,
        })?;
    let tmp = tempfile::Builder::new()
        .prefix("rlm-agent-")
        .tempdir()
        .map_err(PrepareError::TempDir)?;
    let read_paths: Vec<PathBuf> = spec
        .refs
        .iter()
        .map(|r| r.readable_path().to_owned())
        .collect();
    let mut env = agent_environment(spec, &data_dir, &result_file);
    let values = Substitutions {
        prompt: &prompt,
        prompt_file: &prompt_file,
        result_file: &result_file,
        agent_id: agent_id.as_str(),
        result_key: &key,
        rlm_bin: rlm_bin.as_deref(),
        data_dir: &data_dir,
        agent_tmp: tmp.path(),
        read_paths: &read_paths,
        env: &[],
    };
    let set: Vec<(OsString, OsString)> = {
        let values = Substitutions {
            env: &env,
            ..values
        };
        spec.set_env
            .iter()
            .map(|(name, template)| (OsString::from(name), render_value(template, &values)))
            .collect()
    };
    for (name, value) in set {
        let path = Path::new(&value);
        if path.starts_with(tmp.path()) && path != tmp.path() {
            std::fs::create_dir_all(path).map_err(PrepareError::TempDir)?;
        } else if spec.sandbox.is_some() && path.is_absolute() && !path.exists() {
            // A confined agent could not create it (it writes only its temporary
            // directory and the store): the CLI keeps its own default instead.
            continue;
        }
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    }
    let args = command.render_args(&Substitutions {
        env: &env,
        ..values
    });
    let longest = args.iter().map(|a| a.len()).max().unwrap_or(0);
    if longest > MAX_ARG_BYTES {
        return Err(PrepareError::PromptTooLong { bytes: longest });
    }
    let mut spawn = SpawnOptions {
        program: command.program().into(),
        args,
        env,
        cwd: None,
        parent_death_signal: true,
    };
    if let Some(sandbox) = &spec.sandbox {
        let store_dirs = [VARIABLES_DIR, LOCKS_DIR, SPILL_DIR].map(|dir| data_dir.join(dir));
        let values = Substitutions {
            env: &spawn.env,
            ..values
        };
        let mut readable = read_paths.clone();
        readable.extend(
            spec.confined_read
                .iter()
                .map(|template| PathBuf::from(render_value(template, &values)))
                .filter(|path| !path.as_os_str().is_empty()),
        );
        super::confine::confine_agent(
            sandbox,
            &mut spawn,
            &store_dirs,
            &readable,
            &prompt_file,
            tmp.path(),
        );
    }
    // Outermost: the job runs the (confined) agent.
    spec.runner.wrap(&mut spawn, &spec.lineage.agent_id);
    let stdin = command.reads_stdin().then(|| prompt.into_bytes());
    Ok(Prepared {
        spawn,
        stdin,
        _tmp: tmp,
    })
}

/// The exit code reported for an agent whose program was not found, as a shell does.
const NOT_FOUND: i32 = 127;

/// The exit code reported for an agent that was found but could not be started (its
/// prompt file could not be written, it is not executable…), as a shell does.
const NOT_STARTABLE: i32 = 126;

/// What rlm stores when the agent stored nothing: its stdout as the answer, or how it
/// failed.
struct Fallback(SubResult);

impl Fallback {
    fn answer(value: Value) -> Self {
        Self(SubResult::Answer(SubAnswer::plain(value)))
    }

    fn error(error: SubError) -> Self {
        Self(SubResult::Error(error))
    }
}

/// What the model and `sub-result-<id>` hold for an agent: its answer as it gave it
/// (a value it stored, or its stdout as text), or the tagged error object; either way
/// scrubbed of secrets (what an agent wrote never carries a key further).
fn model_view(result: SubResult) -> Value {
    let mut value = match result {
        SubResult::Answer(answer) => answer.result,
        error @ SubResult::Error(_) => error.to_value(),
    };
    rlm_process::redact_value(&mut value);
    value
}

/// Picks the answer (the agent's stored result wins) and makes sure the result
/// variable holds it. Returns `(result, stored_by_agent)`.
fn settle(
    store: &Store,
    key: &str,
    scope: &str,
    inline_cap: u64,
    Fallback(fallback): Fallback,
) -> (SubResult, bool) {
    let stored = |value| (SubResult::Answer(SubAnswer::plain(value)), true);
    match read_stored(store, key, inline_cap) {
        Stored::Value(value, reference) => {
            return stored(adopt(store, key, scope, value, reference))
        }
        Stored::TooLarge(pointer) => return stored(pointer),
        Stored::Absent => {
            // What rlm stores here is derived from the run it just watched (stdout or an
            // error object) and is returned to the caller directly: written atomically
            // (readers, `kill -9`), without the fsyncs, which took longer than a
            // trivial agent's whole run. A power failure may lose it; the run that
            // would read it is lost with it.
            let options = SetOptions::default().scope(scope);
            match store.compare_and_set_with(
                key,
                &Expected::Absent,
                model_view(fallback.clone()),
                options,
                Durability::Bulk,
            ) {
                Ok(_) => {}
                Err(StoreError::Conflict { .. }) => {
                    // Written behind our back after all (e.g. by a process that escaped
                    // the clean-up): the agent's value wins.
                    match read_stored(store, key, inline_cap) {
                        Stored::Value(value, reference) => {
                            return stored(adopt(store, key, scope, value, reference))
                        }
                        Stored::TooLarge(pointer) => return stored(pointer),
                        Stored::Absent | Stored::Unreadable(_) => {}
                    }
                }
                Err(error) => tracing::warn!(key, %error, "could not store an agent's result"),
            }
        }
        Stored::Unreadable(problem) => {
            tracing::warn!(key, %problem, "the agent stored an unreadable result; replacing it");
            let mut replacement = fallback;
            if let SubResult::Error(error) = &mut replacement {
                error.stored_result_error = Some(problem);
            }
            let value = model_view(replacement.clone());
            if let Err(error) = store.set(key, value, SetOptions::default().scope(scope)) {
                tracing::warn!(key, %error, "could not store an agent's result");
            }
            return (replacement, false);
        }
    }
    (fallback, false)
}
