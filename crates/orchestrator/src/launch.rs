//! From [`RunSettings`] to a [`RunConfig`], and from a finished run back to the
//! [`SubResult`] its parent waits for: the path every front door shares (the command
//! line, nested runs, library users), so each checks and builds a run the same way.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rlm_context_store::Store;
use rlm_process::CancellationToken;

use crate::agent_cli::ProgramOptions;
use crate::agents::{
    publish, AgentPreset, AgentProgram, AgentSandbox, Lineage, PresetError, SubRlmLauncher,
};
use crate::discovery::DiscoveryCache;
use crate::env::python::KernelSandbox;
use crate::env::tools::ToolProtocol;
use crate::env::{factory_for, EnvOptions};
use crate::host::{Delegation, Model};
use crate::provider::{build_provider, ProviderConfig, ProviderError, ProviderKind};
use crate::rlm::LoopSettings;
use crate::run::{RunConfig, RunError, RunReport};
use crate::settings::{InvalidSetting, RunSettings};
use crate::slots::{Slots, SlottedProvider};
use crate::window::ModelWindow;
use rlm_protocol::{SubAnswer, SubResult};

/// Which of a run's two models a [`LaunchError::Model`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelRole {
    /// The root model (`--model`, `--provider`, …).
    Root,
    /// The sub-model (`--sub-model`, `--sub-provider`, …).
    Sub,
}

impl std::fmt::Display for ModelRole {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Root => "root model",
            Self::Sub => "sub-model",
        })
    }
}

/// Why a run could not be set up; nothing was asked and nothing stored was touched.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A number out of range.
    #[error(transparent)]
    Setting(#[from] InvalidSetting),
    /// A model could not be configured (a missing key, a `cli` model without command…).
    #[error("failed to set up the {role}: {source}")]
    Model {
        /// Which model.
        role: ModelRole,
        /// Its provider.
        kind: ProviderKind,
        /// Why.
        #[source]
        source: ProviderError,
    },
    /// `--output-schema` cannot be used.
    #[error("failed to use --output-schema {}: {message}", path.display())]
    Schema {
        /// The schema file.
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// `--system-prompt` cannot be read.
    #[error("failed to read --system-prompt {}: {message}", path.display())]
    SystemPrompt {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// `--agent` or `--agent-cmd` cannot be used.
    #[error("invalid agent (--agent / --agent-cmd): {0}")]
    AgentCommand(#[from] PresetError),
    /// The data directory's absolute path cannot be found.
    #[error("failed to resolve the data directory {}: {source}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// `--runner slurm` without Slurm's client.
    #[error("--runner slurm: `srun` is not on PATH; install Slurm's client (Debian: slurm-client) or start a one-node cluster with scripts/slurm-local.sh")]
    NoSrun,
}

impl LaunchError {
    /// True when the user's input is at fault (exit code 2) rather than the machine.
    pub fn is_bad_input(&self) -> bool {
        match self {
            Self::Setting(_)
            | Self::Schema { .. }
            | Self::SystemPrompt { .. }
            | Self::AgentCommand(_)
            | Self::NoSrun => true,
            Self::Model { source, .. } => matches!(
                source,
                ProviderError::MissingKey { .. } | ProviderError::Config(_)
            ),
            Self::DataDir { .. } => false,
        }
    }
}

/// Checks `settings` and builds everything a run needs from them. `lineage` is where
/// this process stands when a parent started it (`None` for a root run); `program`
/// is the `rlm-orchestrate` executable nested `sub_rlm` runs are started with (`None`:
/// `sub_rlm` is always a plain sub-model call).
pub fn prepare(
    settings: &RunSettings,
    lineage: Option<Lineage>,
    program: Option<PathBuf>,
    cancel: CancellationToken,
) -> Result<RunConfig, LaunchError> {
    settings.validate()?;
    let data_dir =
        std::path::absolute(&settings.data_dir).map_err(|source| LaunchError::DataDir {
            path: settings.data_dir.clone(),
            source,
        })?;
    if let crate::runner::Runner::Slurm { .. } = settings.runner {
        if !on_path(crate::runner::SRUN) {
            return Err(LaunchError::NoSrun);
        }
        // Said once, by the root run (its children share its data directory).
        if lineage.is_none() {
            if let Some(warning) = crate::runner::data_dir_warning(&data_dir) {
                tracing::warn!("{warning}");
            }
        }
    }
    let agent_slots = settings
        .max_agents
        .map(|count| Slots::new(&data_dir, "agents", count));
    let request_slots = settings
        .max_requests
        .map(|count| Slots::new(&data_dir, "requests", count));
    // What each server said of itself is kept beside the runs, for later runs and for
    // the children (which share this data directory).
    let cache = DiscoveryCache::new(&data_dir);
    let root = model(
        &settings.model,
        ModelRole::Root,
        request_slots.as_ref(),
        &cache,
    )?;
    let sub = if settings.sub_model == settings.model {
        // One model: one client, one window to find, one token estimate to calibrate.
        root.clone()
    } else {
        model(
            &settings.sub_model,
            ModelRole::Sub,
            request_slots.as_ref(),
            &cache,
        )?
    };
    let output_schema = settings
        .output_schema
        .as_deref()
        .map(load_schema)
        .transpose()?;
    let system_prompt = settings
        .system_prompt
        .as_deref()
        .map(load_system_prompt)
        .transpose()?;
    let agent = match (&settings.agent, &settings.agent_cmd) {
        (Some(preset), _) => Some(preset.clone()),
        (None, Some(template)) => Some(AgentPreset::custom(template)),
        (None, None) => None,
    }
    .map(|preset| {
        let options = ProgramOptions {
            extra_env: settings.agent_env.clone(),
            user_config: settings.agent_user_config,
            base_dir: std::env::current_dir().ok(),
        };
        AgentProgram::new(preset, &options)
    })
    .transpose()?;
    let sandbox = KernelSandbox {
        mode: settings.sandbox,
        launcher: program.clone(),
        memory_bytes: settings
            .kernel_memory_mb
            .map(|mb| mb.saturating_mul(1 << 20)),
    };
    let agent_sandbox = match (settings.agent_sandbox, &program) {
        (true, Some(launcher)) => Some(AgentSandbox {
            launcher: launcher.clone(),
            network: settings.agent_network,
            connect_ports: settings.agent_allow_connect.clone(),
        }),
        _ => None,
    };
    let rlm_bin = program.clone();
    let sub_rlm = program.map(|program| SubRlmLauncher {
        program,
        settings: RunSettings {
            data_dir: data_dir.clone(),
            ..settings.clone()
        },
        // The children need the sub-model's key, and nothing else of ours.
        pass_env: settings
            .sub_model
            .key_env()
            .map(str::to_owned)
            .into_iter()
            .collect(),
        timeout: settings.agent_timeout,
    });
    let depth = lineage.as_ref().map_or(0, |l| l.depth);
    Ok(RunConfig {
        root,
        sub,
        env: factory_for(
            settings.env,
            &EnvOptions {
                python: settings.python.clone(),
                js_memory_bytes: settings.js_memory_mb.map(|mb| mb.saturating_mul(1 << 20)),
                tools: settings.tools.clone(),
                sandbox,
            },
        ),
        context: settings.context.clone(),
        data_dir,
        memory_ceiling_bytes: settings.memory_ceiling_bytes,
        loop_settings: LoopSettings {
            max_iterations: settings.max_iterations,
            max_output_chars: settings.max_output_chars,
            redact_ratio: settings.redact_ratio,
            state_vars: settings.state_vars,
            depth,
            max_depth: settings.max_depth,
            sub_context_chars: settings.sub_context_chars,
            output_schema,
            system_prompt,
            agents: agent.is_some(),
            corrections: settings.corrections.clone(),
            tool_protocol: match settings.model.kind {
                // A command-line model has no tool calling of its own.
                ProviderKind::Cli => ToolProtocol::Text,
                _ => settings.tool_protocol,
            },
        },
        delegation: Delegation {
            max_parallel: settings.max_parallel,
            sub_context_chars: settings.sub_context_chars,
            max_depth: settings.max_depth,
            cache: settings.cache,
            sub_rlm,
            agent,
            rlm_bin,
            agent_timeout: settings.agent_timeout,
            cell_timeout: settings.exec_timeout,
            agent_sandbox,
            agent_slots,
            runner: settings.runner.clone(),
        },
        limits: settings.limits,
        exec_timeout: settings.exec_timeout,
        lineage,
        budget_ledger: settings.budget_ledger.clone(),
        cancel,
        history: Vec::new(),
    })
}

fn model(
    config: &ProviderConfig,
    role: ModelRole,
    slots: Option<&Slots>,
    cache: &DiscoveryCache,
) -> Result<Model, LaunchError> {
    let mut provider = build_provider(config).map_err(|source| LaunchError::Model {
        role,
        kind: config.kind,
        source,
    })?;
    if let Some(slots) = slots {
        provider = Arc::new(SlottedProvider::new(provider, slots.clone()));
    }
    Ok(Model {
        provider,
        price: config.prices,
        window: Arc::new(ModelWindow::with_cache(config, Some(cache.clone()))),
    })
}

fn load_system_prompt(path: &Path) -> Result<Arc<str>, LaunchError> {
    let text = std::fs::read_to_string(path).map_err(|source| LaunchError::SystemPrompt {
        path: path.to_owned(),
        message: source.to_string(),
    })?;
    if text.trim().is_empty() {
        return Err(LaunchError::SystemPrompt {
            path: path.to_owned(),
            message: "it is empty".to_owned(),
        });
    }
    Ok(Arc::from(text))
}

fn load_schema(path: &Path) -> Result<Arc<jsonschema::Validator>, LaunchError> {
    let fail = |message: String| LaunchError::Schema {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read it: {e}")))?;
    let schema: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| fail(format!("it is not valid JSON: {e}")))?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| fail(format!("it is not a valid JSON Schema: {e}")))?;
    Ok(Arc::new(validator))
}

/// What a finished run hands its parent.
pub fn sub_result(outcome: &Result<RunReport, RunError>) -> SubResult {
    match outcome {
        Ok(report) => SubResult::Answer(SubAnswer {
            result: serde_json::Value::String(report.answer.clone()),
            forced: report.forced,
            run_id: Some(report.run_id.clone()),
            iterations: report.iterations,
            depth_reached: report.depth_reached,
            totals: report.totals,
        }),
        Err(error) => SubResult::error(error.to_string()),
    }
}

/// Writes this run's result where its parent waits for it, when a parent does
/// (`RLM_RESULT_KEY`). Failures are logged: the parent then reports the run as having
/// said nothing.
pub fn publish_result(data_dir: &Path, lineage: &Lineage, outcome: &Result<RunReport, RunError>) {
    let Some(key) = &lineage.result_key else {
        return;
    };
    let written =
        Store::open(data_dir).and_then(|store| publish(&sub_result(outcome), &store, lineage));
    if let Err(e) = written {
        tracing::error!("failed to write the result variable {key}: {e}");
    }
}

/// True when `program` is found in this process's `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
