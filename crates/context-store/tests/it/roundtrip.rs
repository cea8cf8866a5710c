//! Every variable type survives `set` → `get`, a reopen of the store, and a plain JSON
//! parser; references carry the right metadata; the basic operations (`list` filters,
//! `has`, `delete`, `clear`, `resolve`, `summarize`) behave as docs/store.md says.

use rlm_context_store::{
    ListFilter, SetOptions, Store, StoreError, VariableRef, VariableType, GLOBAL_SCOPE,
};
use serde_json::{json, Value};

use crate::support::{bulk, data_dir, read_plain_json};
use crate::support::{encode_value, sha256_hex};

/// One example per type (several per inferred type), with the type it must get.
fn samples() -> Vec<(&'static str, Value, SetOptions, VariableType)> {
    vec![
        (
            "text",
            json!("héllo \"world\"\n\ttabs \\ and 😀 \u{0}"),
            SetOptions::default(),
            VariableType::Text,
        ),
        (
            "empty-text",
            json!(""),
            SetOptions::default(),
            VariableType::Text,
        ),
        (
            "json-array",
            json!([1, 2.5, "x", null, true, {"nested": [[]]}]),
            SetOptions::default(),
            VariableType::Json,
        ),
        (
            "json-object",
            json!({"a": 1, "b": {"c": [1, 2, 3]}, "unicode": "ü"}),
            SetOptions::default(),
            VariableType::Json,
        ),
        (
            "json-scalar",
            json!(-12345678901234i64),
            SetOptions::default(),
            VariableType::Json,
        ),
        (
            "json-null",
            Value::Null,
            SetOptions::default(),
            VariableType::Json,
        ),
        (
            "memory-entries",
            json!({"entries": [{"role": "user", "text": "hi"}]}),
            SetOptions::default().scope("agent:a1"),
            VariableType::Memory,
        ),
        (
            "memory-memories",
            json!({"memories": ["one", "two"]}),
            SetOptions::default().scope("agent:a1"),
            VariableType::Memory,
        ),
        (
            "result-result",
            json!({"result": "42", "tokens": 7}),
            SetOptions::default().scope("agent:parent"),
            VariableType::Result,
        ),
        (
            "result-output",
            json!({"output": ["a", "b"]}),
            SetOptions::default().scope("session:s9"),
            VariableType::Result,
        ),
        (
            "stream-text",
            json!("line 1\nline 2\n"),
            SetOptions::default().var_type(VariableType::Stream),
            VariableType::Stream,
        ),
        (
            "stream-chunks",
            json!(["chunk 1", "chunk 2"]),
            SetOptions::default()
                .var_type(VariableType::Stream)
                .scope("session:s9"),
            VariableType::Stream,
        ),
        (
            "explicit-text-over-object",
            json!({"result": 1}),
            SetOptions::default().var_type(VariableType::Text),
            VariableType::Text,
        ),
    ]
}

fn check_reference(r: &VariableRef, key: &str, value: &Value, scope: &str, ty: VariableType) {
    let bytes = encode_value(value);
    assert_eq!(r.key, key);
    assert_eq!(r.scope, scope, "{key}");
    assert_eq!(r.var_type, ty, "{key}");
    assert_eq!(r.size_bytes, bytes.len() as u64, "{key}");
    assert_eq!(
        r.sha256.as_deref(),
        Some(sha256_hex(&bytes).as_str()),
        "{key}"
    );
    assert!(uuid::Uuid::parse_str(&r.id).is_ok(), "{key}: id {}", r.id);
    assert!(r.created_at > 1_600_000_000_000, "{key}: createdAt in ms");
}

#[test]
fn every_type_round_trips_through_disk_and_a_reopen() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let mut written = Vec::new();
    for (key, value, opts, ty) in samples() {
        let scope = opts
            .scope
            .clone()
            .unwrap_or_else(|| GLOBAL_SCOPE.to_owned());
        let r = store.set(key, value.clone(), opts).unwrap();
        check_reference(&r, key, &value, &scope, ty);
        assert_eq!(*store.get(key).unwrap(), value, "{key}");
        assert_eq!(*store.resolve(&r).unwrap(), value, "{key}");
        assert_eq!(store.reference(key).unwrap(), r);
        assert!(store.has(key));
        written.push((r, value));
    }

    // A sub-agent reading the files with a plain JSON parser sees the TypeScript store's layout.
    for (r, value) in &written {
        let path = store.path_of(&r.key).unwrap();
        let file = read_plain_json(&path);
        assert_eq!(file["value"], *value, "{}", r.key);
        assert_eq!(file["persist"], json!(true));
        let on_disk: VariableRef = serde_json::from_value(file["ref"].clone()).unwrap();
        assert_eq!(on_disk, *r);
    }

    // A second store on the same directory (another process, or the next run) sees
    // the same references, ids and values.
    drop(store);
    let reopened = Store::open(&data).unwrap();
    assert!(reopened.problems().is_empty(), "{:?}", reopened.problems());
    let mut expected: Vec<VariableRef> = written.iter().map(|(r, _)| r.clone()).collect();
    expected.sort_by(|a, b| a.key.cmp(&b.key));
    assert_eq!(reopened.list(&ListFilter::default()), expected);
    for (r, value) in &written {
        assert_eq!(reopened.reference(&r.key).unwrap(), *r);
        assert_eq!(*reopened.get(&r.key).unwrap(), *value, "{}", r.key);
    }
}

#[test]
fn every_type_round_trips_in_memory_without_touching_disk() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    for (key, value, opts, ty) in samples() {
        let scope = opts
            .scope
            .clone()
            .unwrap_or_else(|| GLOBAL_SCOPE.to_owned());
        let opts = SetOptions {
            persist: false,
            ..opts
        };
        let set = store.set(key, value.clone(), opts).unwrap();
        // In-memory values are hashed lazily: on first reference (or list, CAS, spill).
        assert_eq!(set.sha256, None, "{key}");
        let r = store.reference(key).unwrap();
        check_reference(&r, key, &value, &scope, ty);
        assert_eq!(
            VariableRef {
                sha256: None,
                ..r.clone()
            },
            set
        );
        assert_eq!(*store.get(key).unwrap(), value, "{key}");
        assert!(!store.path_of(key).unwrap().exists(), "{key} was persisted");
    }
    assert_eq!(store.list(&ListFilter::default()).len(), samples().len());
    // Nothing was persisted, so a fresh store sees nothing.
    let other = Store::open(&data).unwrap();
    assert!(other.list(&ListFilter::default()).is_empty());
}

#[test]
fn list_filters_by_scope_and_type_and_sorts_by_key() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    for (key, value, opts, _) in samples() {
        store.set(key, value, opts).unwrap();
    }
    let keys = |filter: ListFilter| -> Vec<String> {
        store.list(&filter).into_iter().map(|r| r.key).collect()
    };
    let all = keys(ListFilter::default());
    let mut sorted = all.clone();
    sorted.sort();
    assert_eq!(all, sorted);
    assert_eq!(
        keys(ListFilter {
            scope: Some("session:s9".into()),
            var_type: None,
        }),
        ["result-output", "stream-chunks"]
    );
    assert_eq!(
        keys(ListFilter {
            scope: None,
            var_type: Some(VariableType::Memory),
        }),
        ["memory-entries", "memory-memories"]
    );
    assert_eq!(
        keys(ListFilter {
            scope: Some("session:s9".into()),
            var_type: Some(VariableType::Stream),
        }),
        ["stream-chunks"]
    );
    assert_eq!(
        keys(ListFilter {
            scope: Some("agent:nobody".into()),
            var_type: None,
        }),
        Vec::<String>::new()
    );
}

#[test]
fn overwrite_delete_has_and_clear() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let first = store.set("k", json!("one"), SetOptions::default()).unwrap();
    let second = store
        .set("k", json!(["two"]), SetOptions::default())
        .unwrap();
    assert_ne!(first.id, second.id, "every write gets a new id");
    assert_eq!(second.var_type, VariableType::Json);
    assert_eq!(*store.get("k").unwrap(), json!(["two"]));

    store.delete("k").unwrap();
    assert!(!store.has("k"));
    assert!(!store.path_of("k").unwrap().exists());
    assert!(matches!(store.get("k"), Err(StoreError::NotFound { .. })));
    assert!(matches!(
        store.delete("k"),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        store.reference("k"),
        Err(StoreError::NotFound { .. })
    ));

    store.set("a", json!(1), SetOptions::default()).unwrap();
    store.set("b", json!(2), SetOptions::in_memory()).unwrap();
    assert_eq!(store.clear().unwrap(), 2);
    assert!(store.list(&ListFilter::default()).is_empty());
    assert!(crate::support::file_names(store.variables_dir()).is_empty());
}

#[test]
fn invalid_keys_are_rejected_with_the_reason() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    for key in [String::new(), "x".repeat(513)] {
        let err = store
            .set(&key, json!(1), SetOptions::default())
            .unwrap_err();
        assert!(matches!(err, StoreError::InvalidKey { .. }), "{err}");
    }
    assert!(store
        .set(&"x".repeat(512), json!(1), SetOptions::default())
        .is_ok());
}

#[test]
fn summaries_truncate_and_follow_the_value() {
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    store
        .set(
            "long",
            json!("abcdefghij".repeat(10)),
            SetOptions::default(),
        )
        .unwrap();
    let summary = store.summarize("long", 2).unwrap();
    assert!(summary.starts_with("abcdefgh…"), "{summary}");
    assert!(summary.contains("100 chars total"), "{summary}");
    // Cached by sha256: a new value gets a new summary.
    store
        .set("long", json!("short"), SetOptions::default())
        .unwrap();
    assert_eq!(store.summarize("long", 2).unwrap(), "short");
}
