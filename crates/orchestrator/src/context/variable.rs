//! Using a variable already in the store as the context (`--context-var`): nothing is
//! copied, only described — a referenced file from samples, a text variable by
//! streaming it through a counter.

use rlm_context_store::{Store, StoreError, VariableType};
use rlm_protocol::ContextShape;
use serde_json::Value;

use super::describe::{describe_referenced_file, describe_streamed_text, describe_value};
use super::error::ContextError;
use super::info::{ContextInfo, LoadedContext};
use super::lazy::LazyPolicy;
use super::sample::sample;
use super::stats::StatsWriter;

/// Describes the existing variable `key` as the context; `lazy` says whether a file
/// it refers to is read lazily.
pub(super) fn describe_variable(
    store: &Store,
    key: &str,
    lazy: LazyPolicy,
) -> Result<LoadedContext, ContextError> {
    let reference = store.reference(key).map_err(|e| match e {
        StoreError::NotFound { .. } => ContextError::MissingVariable(key.to_owned()),
        other => ContextError::Store(other),
    })?;
    let path = store.persist_for_sub_agent(key)?;
    let keys = vec![key.to_owned()];
    let origin = format!("variable {key:?}");
    if let Some(file) = store.unchanged_file_reference(key)? {
        let sampled = sample(&file.path, file.size)?;
        let origin = format!("{origin}, the file {}", file.path.display());
        let info = describe_referenced_file(sampled, file.size, lazy.is_lazy(file.size), origin);
        return Ok(LoadedContext::new(
            ContextShape::Single,
            vec![path],
            info,
            keys,
            vec![file.path],
        ));
    }
    let info =
        if reference.var_type == VariableType::Text || reference.var_type == VariableType::Stream {
            describe_stored_text(store, key, reference.size_bytes, origin)?
        } else {
            let value = store.get(key)?;
            let mut info = describe_value(&value, origin);
            info.total_bytes = reference.size_bytes;
            info
        };
    Ok(LoadedContext::new(
        ContextShape::Single,
        vec![path],
        info,
        keys,
        Vec::new(),
    ))
}

/// Describes a text or stream variable by streaming it through a counter. (The
/// `get` that tells a string from another value then loads it from the store too.)
fn describe_stored_text(
    store: &Store,
    key: &str,
    size_bytes: u64,
    origin: String,
) -> Result<ContextInfo, ContextError> {
    let mut counter = StatsWriter::default();
    store.write_value_to(key, &mut counter, false)?;
    Ok(match store.get(key).ok().as_deref() {
        Some(Value::String(_)) | None => {
            describe_streamed_text(counter.stats(), size_bytes, counter.preview(), origin)
        }
        Some(other) => describe_value(other, origin),
    })
}

#[cfg(test)]
mod tests {
    use rlm_context_store::SetOptions;
    use rlm_process::CancellationToken;

    use super::*;
    use crate::context::load_context;
    use crate::context::spec::ContextSpec;
    use crate::context::test_support::{store, test_keys};

    #[test]
    fn an_existing_variable_is_described_by_streaming() {
        let (_dir, store) = store();
        store
            .set(
                "big",
                serde_json::json!("z".repeat(5000)),
                SetOptions::default(),
            )
            .unwrap();
        let spec = ContextSpec {
            var: Some("big".into()),
            max_bytes: 1,
            ..ContextSpec::default()
        };
        let loaded = load_context(
            &store,
            &spec,
            &test_keys("unused"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.total_chars, 5000);
        assert_eq!(loaded.keys, vec!["big"]);
        let missing = ContextSpec {
            var: Some("nope".into()),
            ..ContextSpec::default()
        };
        assert!(matches!(
            load_context(&store, &missing, &test_keys("x"), &CancellationToken::new()).unwrap_err(),
            ContextError::MissingVariable(_)
        ));
    }
}
