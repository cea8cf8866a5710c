//! `eval --arm rlms`: the official RLM library (`rlms` on PyPI, the paper's reference
//! implementation) as an external arm out of the box, with the model, server, API key
//! variable, iteration limit, request timeout and temperature of the `rlm` arm.
//!
//! A bare `--arm rlms` becomes the external arm `rlms=PYTHON OUT/arms/rlms.py …`: the
//! adapter `scripts/arms/rlms.py` is built into the binary and written beside the
//! arms' files, so it runs from any directory; PYTHON is `RLM_RLMS_PYTHON`, else the
//! venv `scripts/arms/setup-rlms.sh` makes (`${RLM_ARMS_DIR:-.local-models}/rlms-venv`).
//! The interpreter is asked once to import the library before any item runs, so a
//! missing library is one clear error, not a failed item each. The library's trajectory
//! (every iteration's reply, code and output) is kept beside each answer as
//! `answer.out.trajectory.json`, so a score can be explained as the rlm arm's traces are.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rlm_orchestrator::settings::RunSettings;

use crate::cli::env::{RLM_ARMS_DIR, RLM_RLMS_PYTHON};
use crate::exit::bad_input;

/// The built-in arm's name.
pub(super) const NAME: &str = "rlms";

/// The adapter (`scripts/arms/rlms.py`).
const ADAPTER: &str = include_str!("../../../../scripts/arms/rlms.py");

/// How to install the library, for messages.
const HINT: &str = "run scripts/arms/setup-rlms.sh (it installs rlms 0.1.3 into .local-models/rlms-venv), or set RLM_RLMS_PYTHON to a python that has rlms installed";

/// The python of the built-in arm.
fn python() -> anyhow::Result<PathBuf> {
    if let Some(python) = std::env::var_os(RLM_RLMS_PYTHON).filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(python));
    }
    let dir = std::env::var_os(RLM_ARMS_DIR)
        .filter(|d| !d.is_empty())
        .map_or_else(|| PathBuf::from(".local-models"), PathBuf::from);
    let venv = dir.join("rlms-venv").join("bin").join("python");
    if venv.exists() {
        return std::path::absolute(&venv)
            .with_context(|| format!("cannot make {} absolute", venv.display()));
    }
    Err(bad_input(format!(
        "--arm rlms: no python with the official RLM library was found (looked at {RLM_RLMS_PYTHON} and {}): {HINT}",
        venv.display()
    )))
}

/// Replaces each bare `rlms` in `specs` (the `--arm` values) by the built-in arm's
/// `NAME=COMMAND`, writing the adapter into `out/arms/`.
pub(super) fn expand(
    specs: &mut [String],
    settings: &RunSettings,
    out: &Path,
) -> anyhow::Result<()> {
    if !specs.iter().any(|s| s.trim() == NAME) {
        return Ok(());
    }
    let python = python()?;
    check_library(&python)?;
    let dir = out.join("arms");
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the arms' directory {}", dir.display()))?;
    let adapter = std::path::absolute(dir.join("rlms.py"))
        .with_context(|| format!("cannot make {} absolute", dir.display()))?;
    std::fs::write(&adapter, ADAPTER)
        .with_context(|| format!("cannot write the rlms adapter {}", adapter.display()))?;
    let model = &settings.model;
    let mut command = vec![
        python.display().to_string(),
        adapter.display().to_string(),
        "--base-url".into(),
        "{base_url}".into(),
        "--model".into(),
        "{model}".into(),
        "--api-key-env".into(),
        "{api_key_env}".into(),
        "--max-iterations".into(),
        settings.max_iterations.to_string(),
        "--timeout".into(),
        model.request_timeout.as_secs().max(1).to_string(),
    ];
    if let Some(temperature) = model.temperature {
        command.extend(["--temperature".into(), temperature.to_string()]);
    }
    command.extend(
        [
            "--context-file",
            "{context_file}",
            "--question-file",
            "{question_file}",
            "--output-file",
            "{output_file}",
            "--trajectory-file",
            "{output_file}.trajectory.json",
        ]
        .map(str::to_owned),
    );
    let spec = format!("{NAME}={}", shell_words::join(&command));
    for entry in specs.iter_mut().filter(|s| s.trim() == NAME) {
        entry.clone_from(&spec);
    }
    Ok(())
}

/// Asks `python` to import the library (with the arms' environment).
fn check_library(python: &Path) -> anyhow::Result<()> {
    let output = std::process::Command::new(python)
        .args(["-c", "import rlm"])
        .env_clear()
        .envs(super::arm::arm_environment(&[]))
        .stdin(std::process::Stdio::null())
        .output();
    match output {
        Ok(output) if output.status.success() => Ok(()),
        Ok(output) => Err(bad_input(format!(
            "--arm rlms: {} cannot import the official RLM library ({}): {HINT}",
            python.display(),
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("no error message")
        ))),
        Err(error) => Err(bad_input(format!(
            "--arm rlms: cannot run {}: {error}; {HINT}",
            python.display()
        ))),
    }
}
