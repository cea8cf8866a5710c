//! What an agent stored under its result key, read as the agent may have written it,
//! and made sound: an agent stores its answer with `rlm-orchestrate vars set` (scope
//! `global` unless told otherwise) or by writing the variable file by hand in the shape
//! its prompt gives (which claims no size, no time and scope `agent`). Either way the
//! result becomes a variable like the ones rlm writes: scope `agent:<parent>`, its real
//! size, sha256 and time, and text normalised like an answer on stdout.

use std::fs;
use std::io::{self, Read as _};
use std::sync::Arc;
use std::time::Duration;

use rlm_context_store::{SetOptions, Store, StoreError, VariableRef};

use super::outcome::answer_text;
use serde_json::Value;

/// What the agent stored under its result key.
pub(super) enum Stored {
    /// The value, read whole, with the reference the store holds for it (`None` for a
    /// file the agent wrote by hand that the store does not take for a variable).
    Value(Value, Option<VariableRef>),
    /// A value too large to return inline: a message pointing to the variable.
    TooLarge(Value),
    /// Nothing stored.
    Absent,
    /// Something is there that is not a result (why, in words).
    Unreadable(String),
}

/// Looks at the disk (not just the store's index) for the agent's result.
pub(super) fn read_stored(store: &Store, key: &str, inline_cap: u64) -> Stored {
    // Most agents just print: no file, and nothing in the index, is "absent" for the
    // probe below too, found without the file-system watcher `wait_for` sets up.
    let no_file = store.path_of(key).is_ok_and(
        |path| matches!(fs::metadata(path), Err(e) if e.kind() == io::ErrorKind::NotFound),
    );
    if no_file && !store.has(key) {
        return Stored::Absent;
    }
    // `wait_for` with no wait probes the file itself, so a result the agent wrote (or
    // rewrote) is seen even if the index holds an older state.
    // A file the store does not take for a variable (a header written by hand) is
    // still the agent's: read its value as the agent wrote it.
    let absent = |error: StoreError| {
        if no_file {
            Stored::Absent
        } else {
            hand_written_or(store, key, inline_cap, &error)
        }
    };
    let reference = match store.wait_for(key, Duration::ZERO) {
        Ok(reference) => reference,
        Err(error @ (StoreError::WaitTimeout { .. } | StoreError::NotFound { .. })) => {
            return absent(error)
        }
        Err(StoreError::Watch { .. }) => match store.reference(key) {
            Ok(reference) => reference,
            Err(error @ StoreError::NotFound { .. }) => return absent(error),
            Err(error) => return hand_written_or(store, key, inline_cap, &error),
        },
        Err(error) => return hand_written_or(store, key, inline_cap, &error),
    };
    // Files written by hand may claim any size: trust the file's length too.
    let file_len = store
        .path_of(key)
        .ok()
        .and_then(|p| fs::metadata(p).ok())
        .map_or(0, |m| m.len());
    let size = reference.size_bytes.max(file_len);
    if size > inline_cap {
        return Stored::TooLarge(Value::String(format!(
            "[the agent stored a result of {size} bytes in variable {key:?}, too large to return inline \
             (over {inline_cap} bytes): read it from the store (store.get({key:?})) or slice it]"
        )));
    }
    match store.get(key) {
        Ok(value) => Stored::Value(Arc::unwrap_or_clone(value), Some(reference)),
        Err(error) => hand_written_or(store, key, inline_cap, &error),
    }
}

/// The value of a file the agent wrote by hand, else what the store said of it.
fn hand_written_or(store: &Store, key: &str, inline_cap: u64, error: &StoreError) -> Stored {
    match hand_written_value(store, key, inline_cap) {
        Some(value) => Stored::Value(value, None),
        None => Stored::Unreadable(error.to_string()),
    }
}

/// The `"value"` of a variable file the agent wrote by hand whose header the store
/// refuses (the prompt's shape claims 0 bytes): the agent is its only writer, so its
/// value is its answer. `None` when the file is larger than `inline_cap` allows, is
/// not JSON, or has no `"value"`.
fn hand_written_value(store: &Store, key: &str, inline_cap: u64) -> Option<Value> {
    let path = store.path_of(key).ok()?;
    // Room for the header and the JSON escaping of a value up to the cap.
    let most = inline_cap.saturating_mul(2).saturating_add(64 * 1024);
    let mut bytes = Vec::new();
    fs::File::open(path)
        .ok()?
        .take(most.saturating_add(1))
        .read_to_end(&mut bytes)
        .ok()?;
    if bytes.len() as u64 > most {
        return None;
    }
    let mut file: Value = serde_json::from_slice(&bytes).ok()?;
    file.get_mut("value").map(Value::take)
}

/// Makes the agent's stored `value` sound and returns it as the answer: text trimmed
/// like an answer on stdout, every string in it scrubbed of secrets, and the variable rewritten
/// as rlm writes it — scope `scope`, its real size, sha256 and time — unless it already
/// is. A failed rewrite is logged; the answer stands.
pub(super) fn adopt(
    store: &Store,
    key: &str,
    scope: &str,
    value: Value,
    reference: Option<VariableRef>,
) -> Value {
    let (value, changed) = match value {
        Value::String(text) => {
            let answer = answer_text(&text);
            let changed = answer != text;
            (Value::String(answer), changed)
        }
        mut other => {
            let before = other.clone();
            rlm_process::redact_value(&mut other);
            let changed = other != before;
            (other, changed)
        }
    };
    let sound = !changed && reference.is_some_and(|r| r.scope == scope && r.created_at > 0);
    if !sound {
        if let Err(error) = store.set(key, value.clone(), SetOptions::default().scope(scope)) {
            tracing::warn!(key, %error, "could not store an agent's result soundly");
        }
    }
    value
}
