//! REPL environments: where model-written code runs.
//!
//! The loop drives a [`CodeRepl`] (code in fenced blocks) or a [`ToolBox`] (tool
//! calls), both on the lifecycle every [`Environment`] has; an environment calls back into the
//! orchestrator through a [`Host`] for everything that needs a
//! model, the store or a sub-agent (`llm_query`, `sub_rlm`, `store.set`, …), as typed
//! [`HostCall`]s. The seam is the `rlm-env` crate; each kind is
//! its own crate (`rlm-env-python`, `rlm-env-js`, `rlm-env-tools`), and this module is
//! the one place that knows all three: [`factory_for`] maps an [`EnvKind`] to its
//! factory.

use std::path::PathBuf;
use std::sync::Arc;

pub use rlm_env::*;
pub use rlm_env_js as js;
pub use rlm_env_python as python;
pub use rlm_env_tools as tools;

/// Options of every kind of environment, for [`factory_for`].
#[derive(Debug, Clone)]
pub struct EnvOptions {
    /// The python3 executable of the `python` environment.
    pub python: PathBuf,
    /// `--js-memory-mb` of the `js` environment, in bytes (`None`: its default).
    pub js_memory_bytes: Option<u64>,
    /// `--tools` of the `tools` environment: the micro-tools offered.
    pub tools: Vec<tools::MicroTool>,
    /// `--sandbox` of the `python` environment.
    pub sandbox: python::KernelSandbox,
}

impl Default for EnvOptions {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            js_memory_bytes: None,
            tools: tools::MicroTool::ALL.to_vec(),
            sandbox: python::KernelSandbox::off(),
        }
    }
}

/// The factory of environments of `kind`.
pub fn factory_for(kind: EnvKind, options: &EnvOptions) -> Arc<dyn EnvironmentFactory> {
    match kind {
        EnvKind::Python => Arc::new(python::PythonFactory::new(python::PythonOptions {
            sandbox: options.sandbox.clone(),
            ..python::PythonOptions::from(options.python.clone())
        })),
        EnvKind::Js => Arc::new(js::JsFactory::new(js::JsOptions {
            memory_limit_bytes: options.js_memory_bytes,
            ..js::JsOptions::default()
        })),
        EnvKind::Tools => Arc::new(tools::ToolsFactory::new(tools::ToolsOptions {
            tools: options.tools.clone(),
            plan_only: false,
        })),
        EnvKind::Plan => Arc::new(tools::ToolsFactory::new(tools::ToolsOptions::plan())),
    }
}
