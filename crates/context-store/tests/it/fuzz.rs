//! Fuzz target (bolero) for the store's file reader: whatever bytes a variable file
//! holds (hand-edited, truncated, written by something else), opening the store,
//! listing, reading a reference and a value never panic — each is a value or an error.
//!
//! `cargo test` runs it briefly; a long run is
//! `BOLERO_RANDOM_TEST_TIME_MS=600000 cargo test -p rlm-context-store --test it fuzz::`.

use rlm_context_store::{file_name, ListFilter, Store, VARIABLES_DIR};

/// Pieces a variable file is made of; each input byte picks one (or is itself).
const PIECES: &[&str] = &[
    "{\"formatVersion\":1,\"ref\":{",
    "\"id\":\"c80730df-5b0e-4416-a21f-e4a9774da1bf\",",
    "\"key\":\"k\",",
    "\"scope\":\"global\",",
    "\"type\":\"text\",",
    "\"type\":\"json\",",
    "\"sizeBytes\":13,",
    "\"sizeBytes\":18446744073709551615,",
    "\"createdAt\":1795478843588,",
    "\"sha256\":\"87ae466dcddb9afd92f911ea19b5c7082aad3e2f35aaee4ec4403e3d185f294b\"",
    "},\"persist\":true,\n",
    "\"value\":",
    "\"hello \\\"x\\\"\"",
    "[1,2,{\"a\":null}]",
    "}",
    "\n",
    "\"",
    "\\u00e9",
    "\\ud800",
    ",",
];

fn file_from(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for &b in bytes {
        match PIECES.get(usize::from(b)) {
            Some(piece) => out.extend_from_slice(piece.as_bytes()),
            None => out.push(b),
        }
    }
    out
}

#[test]
fn variable_file_reader() {
    let dir = tempfile::tempdir().unwrap();
    let variables = dir.path().join(VARIABLES_DIR);
    std::fs::create_dir_all(&variables).unwrap();
    let path = variables.join(file_name("k"));
    bolero::check!().for_each(|bytes: &[u8]| {
        std::fs::write(&path, file_from(bytes)).unwrap();
        let Ok(store) = Store::open(dir.path()) else {
            return;
        };
        let listed = store.list(&ListFilter::default());
        let reference = store.reference("k");
        let value = store.get("k");
        // What is listed can be referenced; a value read is one the header announced.
        if listed.iter().any(|r| r.key == "k") {
            assert!(reference.is_ok(), "listed but not readable: {reference:?}");
        }
        if let (Ok(reference), Ok(_)) = (&reference, &value) {
            assert_eq!(reference.key, "k");
        }
    });
}
