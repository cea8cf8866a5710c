//! The factory that starts [`PythonEnv`]s with fixed [`PythonOptions`]: the one door
//! through which a run gets a python environment.

use std::sync::Arc;

use rlm_env::{EnvConfig, EnvError, EnvKind, EnvironmentFactory, Host, Started};

use crate::env::PythonEnv;
use crate::options::PythonOptions;

/// Starts [`PythonEnv`]s with fixed [`PythonOptions`].
#[derive(Debug, Clone)]
pub struct PythonFactory {
    options: PythonOptions,
}

impl PythonFactory {
    /// A factory of kernels run with `options`.
    pub fn new(options: PythonOptions) -> Self {
        Self { options }
    }
}

#[async_trait::async_trait]
impl EnvironmentFactory for PythonFactory {
    fn kind(&self) -> EnvKind {
        EnvKind::Python
    }

    async fn start(&self, config: EnvConfig, host: Arc<dyn Host>) -> Result<Started, EnvError> {
        let env = PythonEnv::start(config, host, self.options.clone()).await?;
        Ok(Started::Code(Box::new(env)))
    }
}
