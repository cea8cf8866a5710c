//! Keeping secrets out of this process's readable environment.
//!
//! `/proc/<pid>/environ` shows the environment block the process was *started* with,
//! whatever `remove_var` does later: any process allowed to read it (the same user's
//! model code, an agent, or root) would see the API keys. [`hide_secrets`] copies the
//! secret variables into memory, overwrites their values in that block with zero bytes,
//! and removes them from the environment; [`secret_var`] is how the rest of rlm reads
//! them afterwards. With `PR_SET_DUMPABLE` cleared as well, other processes of the user
//! cannot read this process's memory or `/proc` files at all (root still can, which is
//! why the block is overwritten).

use std::ffi::{CStr, CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::{Mutex, OnceLock, PoisonError};

/// The secrets taken out of the environment: name and value.
static HIDDEN: OnceLock<Mutex<Vec<(OsString, OsString)>>> = OnceLock::new();

/// Name suffixes of variables taken for secrets (besides the names given).
const SECRET_SUFFIXES: &[&str] = &["_API_KEY", "_TOKEN", "_SECRET", "_PASSWORD"];

/// Whether a variable called `name` is treated as a secret: one of `names`, or a name
/// ending in `_API_KEY`, `_TOKEN`, `_SECRET` or `_PASSWORD`.
pub fn is_secret_name(name: &str, names: &[&str]) -> bool {
    names.contains(&name) || SECRET_SUFFIXES.iter().any(|suffix| name.ends_with(suffix))
}

/// Takes every secret variable (see [`is_secret_name`]) out of the environment: keeps
/// its value for [`secret_var`], overwrites it in the initial environment block and
/// removes it. Returns the names taken.
///
/// Call it first thing in `main`, while the process has one thread: changing the
/// environment races with threads that read it.
pub fn hide_secrets(names: &[&str]) -> Vec<String> {
    let secrets: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, value)| {
            !value.is_empty()
                && name
                    .to_str()
                    .is_some_and(|name| is_secret_name(name, names))
        })
        .collect();
    let mut taken = Vec::new();
    for (name, _) in &secrets {
        overwrite_in_place(name);
        std::env::remove_var(name);
        taken.push(name.to_string_lossy().into_owned());
    }
    let hidden = HIDDEN.get_or_init(Mutex::default);
    hidden
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(secrets);
    #[cfg(target_os = "linux")]
    if let Err(error) = nix::sys::prctl::set_dumpable(false) {
        tracing::warn!(%error, "could not clear PR_SET_DUMPABLE");
    }
    taken
}

/// The value of environment variable `name`: a secret taken by [`hide_secrets`], or
/// the environment's.
pub fn secret_var(name: &str) -> Option<OsString> {
    let hidden = HIDDEN.get().and_then(|hidden| {
        hidden
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, value)| value.clone())
    });
    hidden.or_else(|| std::env::var_os(name))
}

/// Every secret taken by [`hide_secrets`] (for a model command that inherits them).
pub fn hidden_secrets() -> Vec<(OsString, OsString)> {
    HIDDEN
        .get()
        .map(|hidden| {
            hidden
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone()
        })
        .unwrap_or_default()
}

/// Secrets shorter than this many bytes are not scrubbed from text: too short to be a
/// credential, and likely to match ordinary words.
pub const MIN_SCRUBBED_SECRET_BYTES: usize = 8;

/// `text` with every secret taken by [`hide_secrets`] (of at least
/// [`MIN_SCRUBBED_SECRET_BYTES`]) replaced by `[redacted NAME]`, then every credential
/// of a known shape (`sk-ant-…`, `sk-…`, `ghp_…`, see
/// [`redact_key_shapes`](crate::redact_key_shapes)) by `[redacted key]`: the second
/// line of defence, for what a child printed (model code that read a key from a file,
/// an agent that echoes its environment or a key it found) on its way to a model, the
/// store, a trace or the terminal. Borrowed when there was nothing to replace.
pub fn redact_secrets(text: &str) -> std::borrow::Cow<'_, str> {
    let known = redact_known(text);
    match crate::key_shapes::redact_key_shapes(&known) {
        std::borrow::Cow::Borrowed(_) => known,
        std::borrow::Cow::Owned(scrubbed) => std::borrow::Cow::Owned(scrubbed),
    }
}

/// `text` with the secrets taken by [`hide_secrets`] replaced by `[redacted NAME]`.
fn redact_known(text: &str) -> std::borrow::Cow<'_, str> {
    let Some(hidden) = HIDDEN.get() else {
        return std::borrow::Cow::Borrowed(text);
    };
    let hidden = hidden.lock().unwrap_or_else(PoisonError::into_inner);
    let mut out = std::borrow::Cow::Borrowed(text);
    for (name, value) in hidden.iter() {
        let Some(value) = value.to_str() else {
            continue;
        };
        if value.len() >= MIN_SCRUBBED_SECRET_BYTES && out.contains(value) {
            let replacement = format!("[redacted {}]", name.to_string_lossy());
            out = std::borrow::Cow::Owned(out.replace(value, &replacement));
        }
    }
    out
}

/// Every string in `value` (object keys included) passed through [`redact_secrets`].
pub fn redact_value(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(text) => {
            if let std::borrow::Cow::Owned(scrubbed) = redact_secrets(text) {
                *text = scrubbed;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(redact_value),
        Value::Object(map) => {
            let needs_new_keys = map
                .keys()
                .any(|key| matches!(redact_secrets(key), std::borrow::Cow::Owned(_)));
            if needs_new_keys {
                *map = std::mem::take(map)
                    .into_iter()
                    .map(|(key, value)| (redact_secrets(&key).into_owned(), value))
                    .collect();
            }
            map.values_mut().for_each(redact_value);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Overwrites the value of `name` with zero bytes where the C environment keeps it
/// (for a variable the process started with: its initial environment block, which is
/// what `/proc/<pid>/environ` shows).
#[allow(unsafe_code)]
fn overwrite_in_place(name: &OsString) {
    let Ok(name) = CString::new(name.as_bytes()) else {
        return;
    };
    // SAFETY: single-threaded (documented on `hide_secrets`), so nothing changes the
    // environment meanwhile; `getenv` returns null or a NUL-terminated string inside
    // the environment, writable memory of this process, and exactly its bytes before
    // the NUL are overwritten.
    unsafe {
        let value = nix::libc::getenv(name.as_ptr());
        if value.is_null() {
            return;
        }
        let len = CStr::from_ptr(value).to_bytes().len();
        std::ptr::write_bytes(value, 0, len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_secrets_are_scrubbed_from_text() {
        HIDDEN.get_or_init(Mutex::default).lock().unwrap().extend([
            (
                OsString::from("TEST_SCRUB_API_KEY"),
                OsString::from("sk-test-0123456789"),
            ),
            (OsString::from("TEST_SHORT_TOKEN"), OsString::from("abc")),
        ]);
        assert_eq!(
            redact_secrets("key=sk-test-0123456789; again sk-test-0123456789"),
            "key=[redacted TEST_SCRUB_API_KEY]; again [redacted TEST_SCRUB_API_KEY]"
        );
        assert!(matches!(
            redact_secrets("nothing here, abc stays"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn secret_names_are_the_given_ones_and_the_usual_suffixes() {
        let names = ["MY_KEY"];
        for secret in [
            "MY_KEY",
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET",
            "DB_PASSWORD",
        ] {
            assert!(is_secret_name(secret, &names), "{secret}");
        }
        for plain in ["PATH", "HOME", "TOKENIZERS_PARALLELISM", "MY_KEYS"] {
            assert!(!is_secret_name(plain, &names), "{plain}");
        }
    }
}
