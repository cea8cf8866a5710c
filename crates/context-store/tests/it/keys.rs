//! Keys are arbitrary UTF-8 of 1–512 bytes (docs/store.md): property tests that any such key
//! round-trips, that its file (and lock file) stays inside the store with a portable
//! name, and that two different keys never share a file.

use std::collections::HashMap;

use proptest::prelude::*;
use rlm_context_store::{file_name, ListFilter, SetOptions, Store, MAX_KEY_BYTES};
use serde_json::json;

use crate::support::{bulk, data_dir, file_names, read_plain_json};

/// Packs characters into a key of at most [`MAX_KEY_BYTES`] bytes (never empty: one
/// character is at most 4 bytes).
fn fit(chars: Vec<char>) -> String {
    let mut key = String::new();
    for c in chars {
        if key.len() + c.len_utf8() > MAX_KEY_BYTES {
            break;
        }
        key.push(c);
    }
    key
}

/// Keys of every shape: any Unicode scalar values (NUL, controls, emoji included),
/// path-like ASCII, keys at the length limit, and keys spelled like hashed file names.
fn arbitrary_key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => prop::collection::vec(any::<char>(), 1..=64).prop_map(fit),
        2 => "[A-Za-z0-9._/\\\\: -]{1,40}",
        1 => prop::collection::vec(any::<char>(), 128..=512).prop_map(fit),
        1 => "[a-z._]{0,8}--[0-9a-f]{16}",
        1 => prop::collection::vec(prop::char::range('a', 'c'), 150..=512)
            .prop_map(|cs| cs.into_iter().collect::<String>()),
    ]
}

/// Pairs of keys designed to collide if the naming were careless: a key and its own
/// sanitised name, a key and its ASCII-sanitised spelling, keys sharing a long prefix,
/// and unrelated keys.
fn key_pair() -> impl Strategy<Value = (String, String)> {
    prop_oneof![
        (arbitrary_key(), arbitrary_key()),
        arbitrary_key().prop_map(|k| {
            let stem = file_name(&k).trim_end_matches(".json").to_owned();
            (k, stem)
        }),
        arbitrary_key().prop_map(|k| {
            let ascii: String = k
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                .collect();
            (k, ascii)
        }),
        (arbitrary_key(), any::<char>()).prop_map(|(k, c)| {
            let mut longer = k.clone();
            longer.push(c);
            (k, fit(longer.chars().collect()))
        }),
        arbitrary_key().prop_map(|k| (k.clone(), k.to_uppercase())),
    ]
}

/// A file name that is portable and cannot leave its directory.
fn assert_portable_name(name: &str) {
    assert!(name.len() <= 255, "{name:?} is too long for a file name");
    assert!(!name.starts_with('.'), "{name:?} is hidden or a path step");
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')),
        "{name:?} has characters outside [A-Za-z0-9._-]"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn random_keys_round_trip_and_stay_inside_variables(key in arbitrary_key(), n in any::<i64>()) {
        let (_temp, data) = data_dir();
        let store = Store::open_with(&data, bulk()).unwrap();
        let value = json!({"key": key, "n": n});
        let r = store.set(&key, value.clone(), SetOptions::default()).unwrap();
        prop_assert_eq!(&r.key, &key);
        prop_assert_eq!(&*store.get(&key).unwrap(), &value);

        // Exactly one file, in variables/, named as `file_name` says, portable.
        let path = store.path_of(&key).unwrap();
        prop_assert_eq!(path.parent(), Some(store.variables_dir()));
        let name = file_name(&key);
        prop_assert_eq!(file_names(store.variables_dir()), vec![name.clone()]);
        assert_portable_name(&name);
        // The data dir holds nothing but the store's own directories, and the lock
        // file is portably named too.
        prop_assert_eq!(file_names(&data), vec!["locks".to_owned(), "variables".to_owned()]);
        for lock in file_names(&data.join("locks")) {
            assert_portable_name(&lock);
        }

        // The key survives a plain JSON parser and a reopen.
        prop_assert_eq!(&read_plain_json(&path)["ref"]["key"], &json!(key));
        drop(store);
        let reopened = Store::open_with(&data, bulk()).unwrap();
        prop_assert!(reopened.problems().is_empty(), "{:?}", reopened.problems());
        prop_assert_eq!(reopened.list(&ListFilter::default()), vec![r]);
        prop_assert_eq!(&*reopened.get(&key).unwrap(), &value);
    }

    #[test]
    fn distinct_keys_never_share_a_file((a, b) in key_pair()) {
        prop_assume!(a != b && !b.is_empty() && b.len() <= MAX_KEY_BYTES);
        prop_assert_ne!(file_name(&a), file_name(&b));

        // And in a store both live side by side.
        let (_temp, data) = data_dir();
        let store = Store::open_with(&data, bulk()).unwrap();
        store.set(&a, json!("a"), SetOptions::default()).unwrap();
        store.set(&b, json!("b"), SetOptions::default()).unwrap();
        prop_assert_eq!(file_names(store.variables_dir()).len(), 2);
        let reopened = Store::open_with(&data, bulk()).unwrap();
        prop_assert_eq!(&*reopened.get(&a).unwrap(), &json!("a"));
        prop_assert_eq!(&*reopened.get(&b).unwrap(), &json!("b"));
    }
}

#[test]
fn tricky_keys_round_trip() {
    let hashed_look_alike = format!("a--{}", "0123456789abcdef");
    let keys = [
        ".",
        "..",
        "../../etc/passwd",
        "/absolute",
        "a/b",
        "a_b",
        "a\\b",
        "a b",
        ".hidden",
        "-",
        "CON",
        "nul\u{0}byte",
        "tab\tnewline\n",
        "ключ",
        "😀",
        hashed_look_alike.as_str(),
        "a_b--0123456789abcdef",
    ];
    let long_ascii = "k".repeat(MAX_KEY_BYTES);
    let long_unicode = "é".repeat(MAX_KEY_BYTES / 2);
    let (_temp, data) = data_dir();
    let store = Store::open_with(&data, bulk()).unwrap();
    let all: Vec<&str> = keys
        .iter()
        .copied()
        .chain([long_ascii.as_str(), long_unicode.as_str()])
        .collect();
    for key in &all {
        store.set(key, json!(key), SetOptions::default()).unwrap();
    }
    let names = file_names(store.variables_dir());
    assert_eq!(names.len(), all.len(), "{names:?}");
    for name in &names {
        assert_portable_name(name);
    }
    let reopened = Store::open_with(&data, bulk()).unwrap();
    assert!(reopened.problems().is_empty(), "{:?}", reopened.problems());
    for key in &all {
        assert_eq!(*reopened.get(key).unwrap(), json!(key), "{key:?}");
    }
}

#[test]
fn many_similar_keys_get_distinct_names() {
    // 20 000 keys that sanitise to few distinct stems: the hash suffix keeps them apart.
    let mut seen: HashMap<String, String> = HashMap::new();
    let separators = ["/", "_", " ", ":", "\\", "é", "\u{0}", "--", "."];
    for i in 0..20_000usize {
        let sep = separators[i % separators.len()];
        let key = format!("a{sep}{}", i / separators.len());
        let name = file_name(&key);
        if let Some(previous) = seen.insert(name.clone(), key.clone()) {
            panic!("{key:?} and {previous:?} share the file {name}");
        }
    }
}
