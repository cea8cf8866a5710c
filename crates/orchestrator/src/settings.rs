//! Every setting of a run, as one serialisable type, and the checks it must pass.
//!
//! The front doors — the command line (flags, `RLM_*`, `rlm.toml`), a parent run
//! starting a nested one, and library users — all describe a run with one
//! [`RunSettings`]. A parent derives its children's settings with
//! [`RunSettings::for_child`] and hands them over as a file ([`crate::agents::ChildSpec`]),
//! so no setting is re-serialised into command-line flags and nothing (the query
//! included) shows on a command line. [`crate::launch`] turns settings into a run.
//!
//! API keys are never part of the settings: only the *names* of the variables holding
//! them are.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::accounting::Limits;
use crate::context::ContextSpec;
use crate::env::tools::{MicroTool, ToolProtocol};
use crate::env::EnvKind;
use crate::provider::ProviderConfig;

/// Default `--max-iterations`.
pub const DEFAULT_MAX_ITERATIONS: u32 = 20;
/// Default `--state-vars`: variables shown in the inventory.
pub const DEFAULT_STATE_VARS: usize = 20;
/// Default `--sub-context-chars`.
pub const DEFAULT_SUB_CONTEXT_CHARS: usize = 400_000;
/// Default `--max-parallel`.
pub const DEFAULT_MAX_PARALLEL: usize = 4;
/// Default `--max-depth`.
pub const DEFAULT_MAX_DEPTH: u32 = 2;
/// Default `--max-output-chars`.
pub const DEFAULT_MAX_OUTPUT_CHARS: usize = 20_000;
/// Default `--redact-ratio`.
pub const DEFAULT_REDACT_RATIO: f64 = 0.25;
/// Default `--exec-timeout`.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(120);
/// Default `--agent-timeout`.
pub const DEFAULT_AGENT_TIMEOUT: Duration = Duration::from_secs(600);
/// Default `--memory-ceiling-mb`, in bytes.
pub const DEFAULT_MEMORY_CEILING_BYTES: u64 = 256 << 20;
/// Default `--max-context-bytes`.
pub const DEFAULT_MAX_CONTEXT_BYTES: u64 = 1 << 30;
/// The longest timeout or time budget a setting may ask for (`--exec-timeout`,
/// `--agent-timeout`, `--request-timeout`, `--max-time`): 30 days. Longer than any run
/// needs, and short enough that a deadline (a clock reading plus the setting) never
/// overflows, whatever is added to it.
pub const MAX_DURATION: Duration = Duration::from_secs(30 * 86_400);
/// The longest `--retry-base-delay-ms`: the backoff between two attempts is capped at
/// this anyway ([`crate::provider::retry::MAX_BACKOFF_SECS`]).
pub const MAX_RETRY_BASE_DELAY: Duration =
    Duration::from_secs(crate::provider::retry::MAX_BACKOFF_SECS);
/// Default `--python`.
pub const DEFAULT_PYTHON: &str = "python3";

/// Everything that decides how a run goes, besides its task and its place in the tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunSettings {
    /// The data directory (the store, traces, agents' files).
    pub data_dir: PathBuf,
    /// Where the context comes from.
    pub context: ContextSpec,
    /// The root model.
    pub model: ProviderConfig,
    /// The model of sub-calls (`llm_query`, `summarize`) and of nested runs.
    pub sub_model: ProviderConfig,
    /// Where the model's code runs.
    pub env: EnvKind,
    /// The python3 executable of the `python` environment.
    pub python: PathBuf,
    /// `--js-memory-mb`: the `js` environment's memory limit (default: 4× the context,
    /// at least 1 GiB).
    pub js_memory_mb: Option<u64>,
    /// `--tools`: the micro-tools the `tools` environment offers.
    pub tools: Vec<MicroTool>,
    /// `--tool-protocol`: how tool calls travel under `--env tools` (a `cli` model
    /// always writes them as text).
    pub tool_protocol: ToolProtocol,
    /// `--max-depth`: depth at which `sub_rlm` becomes a plain sub-model call.
    pub max_depth: u32,
    /// `--max-iterations`: model turns before an answer is forced.
    pub max_iterations: u32,
    /// `--corrections`: the rules the loop asks at its hook points (docs/loop.md);
    /// nested runs inherit them.
    #[serde(default)]
    pub corrections: crate::corrections::Corrections,
    /// `--max-output-chars`: REPL output shown to the model per block.
    pub max_output_chars: usize,
    /// `--redact-ratio`: output longer than this fraction of the context is redacted.
    pub redact_ratio: f64,
    /// `--state-vars`: variables shown in the inventory.
    pub state_vars: usize,
    /// `--exec-timeout`: how long one code block may run.
    #[serde(with = "crate::format::duration_ms", rename = "exec_timeout_ms")]
    pub exec_timeout: Duration,
    /// `--output-schema`: a JSON Schema file SUBMIT payloads must satisfy.
    pub output_schema: Option<PathBuf>,
    /// `--system-prompt`: a file whose text replaces the built-in system prompt.
    pub system_prompt: Option<PathBuf>,
    /// `--agent-cmd`: the external agent template of `spawn_agent`.
    pub agent_cmd: Option<String>,
    /// `--agent NAME|FILE`: the external agent preset of `spawn_agent` (wins over
    /// `agent_cmd`).
    #[serde(default)]
    pub agent: Option<crate::agent_cli::AgentPreset>,
    /// `--agent-env`: environment variables external agents may see.
    pub agent_env: Vec<String>,
    /// `--agent-user-config`: a preset's CLI reads the user's own configuration (and
    /// starts the MCP servers it names) instead of leaving it out.
    #[serde(default)]
    pub agent_user_config: bool,
    /// `--agent-timeout`: how long a sub-agent (external or nested run) may take.
    #[serde(with = "crate::format::duration_ms", rename = "agent_timeout_ms")]
    pub agent_timeout: Duration,
    /// `--max-parallel`: sub-calls and sub-agents running at once, per call.
    pub max_parallel: usize,
    /// `--sub-context-chars`: the longest prompt a sub-call may send.
    pub sub_context_chars: usize,
    /// Budgets of the run (a child gets what its parent has left).
    pub limits: Limits,
    /// Answer identical sub-calls from the store (`--no-cache` turns it off).
    pub cache: bool,
    /// `--memory-ceiling-mb`, in bytes: memory for cached variable values.
    pub memory_ceiling_bytes: u64,
    /// `--sandbox`: how the Python kernel is confined.
    #[serde(default)]
    pub sandbox: rlm_sandbox::Mode,
    /// `--kernel-memory-mb`: the confined kernel's address space (default: 4 GiB or
    /// 3× the context, whichever is larger).
    #[serde(default)]
    pub kernel_memory_mb: Option<u64>,
    /// `--agent-sandbox on`: external agents are confined too.
    #[serde(default)]
    pub agent_sandbox: bool,
    /// `--agent-network off`: confined agents open no network socket.
    #[serde(default = "network_on")]
    pub agent_network: bool,
    /// `--agent-allow-connect`: with `--agent-network off`, TCP ports confined agents
    /// may still connect to (their model endpoint).
    #[serde(default)]
    pub agent_allow_connect: Vec<u16>,
    /// `--max-requests`: model requests in flight at once across the whole tree.
    #[serde(default)]
    pub max_requests: Option<usize>,
    /// `--max-agents`: external agent processes at once across the whole tree.
    #[serde(default)]
    pub max_agents: Option<usize>,
    /// `--runner`: how agents and nested runs start (local processes, Slurm jobs).
    #[serde(default)]
    pub runner: crate::runner::Runner,
    /// A nested run's share of its tree's budget: the ledger file its root created
    /// (set by the parent, never by a user).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ledger: Option<PathBuf>,
}

fn network_on() -> bool {
    true
}

impl RunSettings {
    /// Settings with every default, for `model` as root and sub-model, over `data_dir`.
    pub fn new(data_dir: impl Into<PathBuf>, model: ProviderConfig) -> Self {
        Self {
            data_dir: data_dir.into(),
            context: ContextSpec {
                max_bytes: DEFAULT_MAX_CONTEXT_BYTES,
                ..ContextSpec::default()
            },
            sub_model: model.clone(),
            model,
            env: EnvKind::default(),
            python: PathBuf::from(DEFAULT_PYTHON),
            js_memory_mb: None,
            tools: MicroTool::ALL.to_vec(),
            tool_protocol: ToolProtocol::default(),
            max_depth: DEFAULT_MAX_DEPTH,
            max_iterations: DEFAULT_MAX_ITERATIONS,
            corrections: crate::corrections::Corrections::all(),
            max_output_chars: DEFAULT_MAX_OUTPUT_CHARS,
            redact_ratio: DEFAULT_REDACT_RATIO,
            state_vars: DEFAULT_STATE_VARS,
            exec_timeout: DEFAULT_EXEC_TIMEOUT,
            output_schema: None,
            system_prompt: None,
            agent_cmd: None,
            agent_env: Vec::new(),
            agent_user_config: false,
            agent: None,
            agent_timeout: DEFAULT_AGENT_TIMEOUT,
            max_parallel: DEFAULT_MAX_PARALLEL,
            sub_context_chars: DEFAULT_SUB_CONTEXT_CHARS,
            limits: Limits::default(),
            cache: true,
            memory_ceiling_bytes: DEFAULT_MEMORY_CEILING_BYTES,
            sandbox: rlm_sandbox::Mode::Auto,
            kernel_memory_mb: None,
            agent_sandbox: false,
            agent_network: true,
            agent_allow_connect: Vec::new(),
            max_requests: None,
            max_agents: None,
            runner: crate::runner::Runner::Local,
            budget_ledger: None,
        }
    }

    /// Checks the numbers a user can get wrong; the message names the flag. A number
    /// that would silently switch a limit off (`NaN` never compares greater, a negative
    /// price makes spending earn budget, a zero timeout fails every call at once) is
    /// refused here, whichever front door it came through.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if let Some(message) = self
            .duration_problem()
            .or_else(|| self.model_problem())
            .or_else(|| self.limit_problem())
        {
            return Err(InvalidSetting(message));
        }
        let problems = [
            (
                self.max_iterations == 0,
                "--max-iterations must be at least 1",
            ),
            (self.max_parallel == 0, "--max-parallel must be at least 1"),
            (
                !(self.redact_ratio >= 0.0 && self.redact_ratio.is_finite()),
                "--redact-ratio must be a number ≥ 0",
            ),
            (
                self.exec_timeout.is_zero(),
                "--exec-timeout must be at least 1 second",
            ),
            (
                !self.tools.contains(&MicroTool::FinalAnswer),
                "--tools must offer final_answer (it is added when the list is parsed)",
            ),
            (
                self.max_output_chars == 0,
                "--max-output-chars must be at least 1",
            ),
            (
                self.max_requests == Some(0),
                "--max-requests must be at least 1",
            ),
            (
                self.max_agents == Some(0),
                "--max-agents must be at least 1",
            ),
            (
                self.kernel_memory_mb.is_some_and(|mb| mb < 64),
                "--kernel-memory-mb must be at least 64 (the interpreter alone needs some)",
            ),
        ];
        match problems.iter().find(|(bad, _)| *bad) {
            Some((_, message)) => Err(InvalidSetting((*message).to_owned())),
            None => Ok(()),
        }
    }

    /// A duration past its upper bound ([`MAX_DURATION`], [`MAX_RETRY_BASE_DELAY`]):
    /// each becomes a deadline somewhere (`Instant::now()` plus it), which must not
    /// overflow, and none means anything that long.
    fn duration_problem(&self) -> Option<String> {
        let mut durations = vec![
            ("--exec-timeout", self.exec_timeout),
            ("--agent-timeout", self.agent_timeout),
        ];
        durations.extend(self.limits.max_time.map(|max| ("--max-time", max)));
        for (model, flag) in [
            (&self.model, "--request-timeout"),
            (&self.sub_model, "--sub-model's request-timeout"),
        ] {
            durations.push((flag, model.request_timeout));
        }
        for (flag, duration) in durations {
            if duration > MAX_DURATION {
                return Some(format!(
                    "{flag} must be at most {} seconds (30 days), not {}",
                    MAX_DURATION.as_secs(),
                    duration.as_secs()
                ));
            }
        }
        for (model, flag) in [
            (&self.model, "--retry-base-delay-ms"),
            (&self.sub_model, "--sub-model's retry-base-delay-ms"),
        ] {
            if model.retry_base_delay > MAX_RETRY_BASE_DELAY {
                return Some(format!(
                    "{flag} must be at most {} (the backoff between attempts is capped at {} s), not {}",
                    MAX_RETRY_BASE_DELAY.as_millis(),
                    MAX_RETRY_BASE_DELAY.as_secs(),
                    model.retry_base_delay.as_millis()
                ));
            }
        }
        None
    }

    /// A model setting out of range, for the root model or the sub-model.
    fn model_problem(&self) -> Option<String> {
        for (model, prefix) in [(&self.model, "--"), (&self.sub_model, "--sub-model's ")] {
            if model.request_timeout.is_zero() {
                return Some(format!(
                    "{prefix}request-timeout must be at least 1 second (it bounds each model request)"
                ));
            }
            if let Some(prices) = &model.prices {
                for (price, flag) in [
                    (prices.input_usd_per_million, "--price-input"),
                    (prices.output_usd_per_million, "--price-output"),
                ] {
                    if !is_amount(price) {
                        return Some(format!(
                            "{flag} must be a finite number of USD ≥ 0, not {price}"
                        ));
                    }
                }
            }
            if let Some(t) = model.temperature.filter(|t| !(0.0..=2.0).contains(t)) {
                return Some(format!("--temperature must be from 0 to 2, not {t}"));
            }
        }
        None
    }

    /// A budget or timeout that would not bound anything.
    fn limit_problem(&self) -> Option<String> {
        if let Some(max) = self.limits.max_cost_usd.filter(|max| !is_amount(*max)) {
            return Some(format!(
                "--max-cost-usd must be a finite number of USD ≥ 0, not {max}"
            ));
        }
        if self.agent_timeout.is_zero() {
            return Some("--agent-timeout must be at least 1 second".to_owned());
        }
        None
    }

    /// The settings of a nested run started by a run with these settings: its model
    /// is this run's sub-model (and so is its own sub-model), its context comes by
    /// reference (set by the caller), and its budgets are `remaining`, what this run
    /// has left. Everything else is inherited.
    pub fn for_child(&self, remaining: Limits) -> Self {
        Self {
            context: ContextSpec {
                max_bytes: self.context.max_bytes,
                copy: self.context.copy,
                lazy: self.context.lazy,
                ..ContextSpec::default()
            },
            model: self.sub_model.clone(),
            sub_model: self.sub_model.clone(),
            limits: remaining,
            ..self.clone()
        }
    }
}

/// True for a usable amount of money: finite and not negative.
fn is_amount(usd: f64) -> bool {
    usd.is_finite() && usd >= 0.0
}

/// A setting out of range; the message names the flag and what it must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidSetting(pub String);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::ProviderKind;

    fn settings() -> RunSettings {
        let mut settings = RunSettings::new(
            "/data",
            ProviderConfig::new(ProviderKind::OpenAi, "root-model"),
        );
        settings.sub_model = ProviderConfig::new(ProviderKind::Anthropic, "sub-model");
        settings.context.files = vec!["big.log".into()];
        settings.limits.max_llm_calls = Some(10);
        settings
    }

    #[test]
    fn a_child_runs_on_the_sub_model_with_what_is_left() {
        let parent = settings();
        let remaining = Limits {
            max_llm_calls: Some(3),
            ..Limits::default()
        };
        let child = parent.for_child(remaining);
        assert_eq!(child.model.model, "sub-model");
        assert_eq!(child.sub_model.model, "sub-model");
        assert!(child.context.files.is_empty());
        assert_eq!(child.limits, remaining);
        assert_eq!(child.max_depth, parent.max_depth);
        assert_eq!(child.data_dir, parent.data_dir);
    }

    #[test]
    fn settings_round_trip_strictly() {
        let settings = settings();
        let json = serde_json::to_value(&settings).unwrap();
        assert_eq!(json["exec_timeout_ms"], 120_000);
        let back: RunSettings = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(back, settings);
        let mut typo = json;
        typo["max_iteratons"] = 3.into();
        let error = serde_json::from_value::<RunSettings>(typo).unwrap_err();
        assert!(error.to_string().contains("max_iteratons"), "{error}");
    }

    #[test]
    fn out_of_range_numbers_are_named() {
        let mut bad = settings();
        bad.max_parallel = 0;
        assert!(bad.validate().unwrap_err().0.contains("--max-parallel"));
        let mut bad = settings();
        bad.redact_ratio = f64::NAN;
        assert!(bad.validate().unwrap_err().0.contains("--redact-ratio"));
        assert_eq!(settings().validate(), Ok(()));
    }

    /// Seen failing before the checks existed: each of these was accepted and switched
    /// its limit off.
    #[test]
    fn numbers_that_would_disable_a_limit_are_refused() {
        use crate::provider::Prices;
        type Spoil = Box<dyn Fn(&mut RunSettings)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (
                Box::new(|s| s.limits.max_cost_usd = Some(f64::NAN)),
                "--max-cost-usd",
            ),
            (
                Box::new(|s| s.limits.max_cost_usd = Some(-1.0)),
                "--max-cost-usd",
            ),
            (
                Box::new(|s| s.limits.max_cost_usd = Some(f64::INFINITY)),
                "--max-cost-usd",
            ),
            (
                Box::new(|s| s.model.request_timeout = Duration::ZERO),
                "--request-timeout",
            ),
            (
                Box::new(|s| s.sub_model.request_timeout = Duration::ZERO),
                "request-timeout",
            ),
            (
                Box::new(|s| s.agent_timeout = Duration::ZERO),
                "--agent-timeout",
            ),
            (
                Box::new(|s| s.model.temperature = Some(f32::NAN)),
                "--temperature",
            ),
            (
                Box::new(|s| {
                    s.model.prices = Some(Prices {
                        input_usd_per_million: -3.0,
                        output_usd_per_million: 1.0,
                    })
                }),
                "--price-input",
            ),
            (
                Box::new(|s| {
                    s.sub_model.prices = Some(Prices {
                        input_usd_per_million: 1.0,
                        output_usd_per_million: f64::NAN,
                    })
                }),
                "--price-output",
            ),
        ];
        for (spoil, flag) in cases {
            let mut bad = settings();
            spoil(&mut bad);
            let message = bad.validate().unwrap_err().0;
            assert!(message.contains(flag), "{message} should name {flag}");
        }
        // A child given what its parent has left may get a budget of zero: that bounds.
        let mut spent = settings();
        spent.limits.max_cost_usd = Some(0.0);
        assert_eq!(spent.validate(), Ok(()));
    }

    /// Any duration: every size of seconds, from the flags' whole seconds to the
    /// largest `Duration` (a `--child-spec` file carries milliseconds of any size).
    fn any_duration() -> impl proptest::strategy::Strategy<Value = Duration> {
        use proptest::prelude::*;
        prop_oneof![
            (0u64..=3 * MAX_DURATION.as_secs()).prop_map(Duration::from_secs),
            any::<u64>().prop_map(Duration::from_millis),
            (any::<u64>(), 0u32..1_000_000_000).prop_map(|(s, n)| Duration::new(s, n)),
            Just(Duration::MAX),
        ]
    }

    proptest::proptest! {
        /// Issue 22, item 7: any value of the duration settings either validates or is
        /// refused with a message naming its flag, and a value that validates can be
        /// added to a clock reading (std's and tokio's `Instant`, as the deadlines of
        /// the kernel, agents, requests and the time budget are) without a panic.
        #[test]
        fn any_duration_setting_validates_or_is_refused_never_a_panic(
            exec in any_duration(),
            agent in any_duration(),
            request in any_duration(),
            sub_request in any_duration(),
            max_time in proptest::option::of(any_duration()),
            retry_base in any_duration(),
        ) {
            let mut s = settings();
            s.exec_timeout = exec;
            s.agent_timeout = agent;
            s.model.request_timeout = request;
            s.sub_model.request_timeout = sub_request;
            s.limits.max_time = max_time;
            s.model.retry_base_delay = retry_base;
            let named = [
                "--exec-timeout",
                "--agent-timeout",
                "request-timeout",
                "--max-time",
                "--retry-base-delay-ms",
            ];
            match s.validate() {
                Err(InvalidSetting(message)) => {
                    proptest::prop_assert!(
                        named.iter().any(|flag| message.contains(flag)),
                        "{message} names no duration flag"
                    );
                }
                Ok(()) => {
                    let durations = [exec, agent, request, sub_request, retry_base]
                        .into_iter()
                        .chain(max_time);
                    for duration in durations {
                        proptest::prop_assert!(duration <= MAX_DURATION);
                        let _ = std::time::Instant::now() + duration;
                        let _ = tokio::time::Instant::now() + duration;
                    }
                    let policy = crate::provider::RetryPolicy::new(u32::MAX, retry_base);
                    for retry in [1, 2, 30, u32::MAX] {
                        let _ = std::time::Instant::now() + policy.backoff(retry);
                    }
                }
            }
        }
    }
}
