//! The factory: a [`ProviderConfig`] in, the provider it describes out. The one place
//! that knows every kind of provider, so the settings need not.

use std::sync::Arc;

use crate::anthropic::AnthropicProvider;
use crate::cli::CliProvider;
use crate::config::{install_crypto_provider, ApiKey, ProviderConfig, ProviderKind};
use crate::openai::OpenAiProvider;
use crate::{Provider, ProviderError};

/// Builds the provider a configuration describes, reading its API key from the
/// environment. Fails when the key is missing for a non-local endpoint, when a `cli`
/// model has no command, or when the settings are invalid.
pub fn build_provider(config: &ProviderConfig) -> Result<Arc<dyn Provider>, ProviderError> {
    install_crypto_provider();
    let key = config.key_env().and_then(ApiKey::from_env);
    Ok(match config.kind {
        ProviderKind::OpenAi => Arc::new(OpenAiProvider::new(config, key)?),
        ProviderKind::Anthropic => Arc::new(AnthropicProvider::new(config, key)?),
        ProviderKind::Cli => Arc::new(CliProvider::new(config)?),
    })
}
