//! Property tests of the variable-file format: any JSON value and any text survive
//! `set` (whole or streamed) → a fresh process's `get` and `write_value_to`, with the
//! sha256 of the value's canonical bytes, and the file stays plain JSON.

use proptest::prelude::*;
use rlm_context_store::{SetOptions, Store};
use serde_json::Value;

use crate::support::{bulk, data_dir, read_plain_json};
use crate::support::{encode_value, sha256_hex};

/// Text with what JSON escapes: quotes, backslashes, controls, non-ASCII, astral.
fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            any::<char>(),
            Just('"'),
            Just('\\'),
            Just('\n'),
            Just('\u{0}'),
            Just('\u{1f}'),
            Just('é'),
            Just('😀'),
            Just('\u{2028}'),
        ],
        0..200,
    )
    .prop_map(|chars| chars.into_iter().collect())
}

/// JSON values up to a few levels deep (floats finite, as JSON allows).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e300_f64..1e300).prop_map(Value::from),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 8, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
            proptest::collection::btree_map(text(), inner, 0..8)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_value_round_trips_through_the_file(value in json_value()) {
        let (_temp, data) = data_dir();
        let stored = {
            let store = Store::open_with(&data, bulk()).unwrap();
            store.set("v", value.clone(), SetOptions::default()).unwrap()
        };
        // A fresh store: the value comes from the file, not a cache.
        let store = Store::open_with(&data, bulk()).unwrap();
        prop_assert_eq!(&*store.get("v").unwrap(), &value);
        let sha = sha256_hex(&encode_value(&value));
        prop_assert_eq!(stored.sha256.as_deref(), Some(sha.as_str()));
        prop_assert_eq!(store.reference("v").unwrap().sha256, Some(sha));
        let mut written = Vec::new();
        store.write_value_to("v", &mut written, false).unwrap();
        let expected = match &value {
            Value::String(text) => text.clone().into_bytes(),
            other => encode_value(other),
        };
        prop_assert_eq!(written, expected);
        let path = store.path_of("v").unwrap();
        prop_assert_eq!(&read_plain_json(&path)["value"], &value);
    }

    #[test]
    fn streamed_text_round_trips_and_hashes_like_a_whole_value(text in text()) {
        let (_temp, data) = data_dir();
        let streamed = {
            let store = Store::open_with(&data, bulk()).unwrap();
            let mut reader = text.as_bytes();
            store
                .set_text_from_reader("s", &mut reader, "the test", SetOptions::default())
                .unwrap()
        };
        let store = Store::open_with(&data, bulk()).unwrap();
        prop_assert_eq!(&*store.get("s").unwrap(), &Value::String(text.clone()));
        let whole = store.set("w", Value::String(text.clone()), SetOptions::default()).unwrap();
        prop_assert_eq!(streamed.sha256, whole.sha256);
        prop_assert_eq!(streamed.size_bytes, whole.size_bytes);
    }
}
