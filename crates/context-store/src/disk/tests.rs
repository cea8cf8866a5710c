//! Round trips of the on-disk format: written, read back, streamed out.

use std::io::{self, Write};

use serde_json::Value;

use super::*;
use crate::error::StoreError;
use crate::integrity::{encode_value, sha256_hex};
use crate::private_fs::Durability;
use crate::reference::VariableRef;
use crate::reference::VariableType;
use serde_json::json;

fn header(key: &str, value: &[u8]) -> FileHeader {
    FileHeader {
        format_version: Some(FORMAT_VERSION),
        reference: VariableRef {
            id: "id".into(),
            key: key.into(),
            scope: "global".into(),
            var_type: VariableType::Text,
            size_bytes: value.len() as u64,
            created_at: 1,
            sha256: Some(sha256_hex(value)),
        },
        persist: true,
    }
}

#[test]
fn written_file_is_plain_json_with_ref_first() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("k.json");
    let value = encode_value(&json!("hello\nworld"));
    write_file(&path, &header("k", &value), &value, Durability::Bulk).unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.starts_with(r#"{"formatVersion":1,"ref":{"id":"id","key":"k""#),
        "{text}"
    );
    let parsed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(parsed["value"], json!("hello\nworld"));
    let h = read_header(&path).unwrap();
    assert_eq!(h.header.reference.key, "k");
    assert_eq!(
        read_value(&path, h.value_offset, &h.header.reference).unwrap(),
        json!("hello\nworld")
    );
}

#[test]
fn streamed_text_matches_in_memory_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.json");
    let text = "héllo \"q\" \\ \u{1}\t\n€😀".repeat(50_000);
    let mut reader = text.as_bytes();
    let r = write_text_streaming(
        &path,
        header("s", b""),
        &mut reader,
        "input",
        Durability::Bulk,
    )
    .unwrap();
    let expected = encode_value(&Value::String(text.clone()));
    assert_eq!(r.size_bytes, expected.len() as u64);
    assert_eq!(r.sha256.as_deref(), Some(sha256_hex(&expected).as_str()));
    let h = read_header(&path).unwrap();
    assert_eq!(h.header.reference, r);
    let mut out = Vec::new();
    copy_text_value(&path, h.value_offset.unwrap(), &r, &mut out).unwrap();
    assert_eq!(out, text.as_bytes());
    assert_eq!(
        read_value(&path, h.value_offset, &r).unwrap(),
        Value::String(text)
    );
}

#[test]
fn invalid_utf8_names_the_offset_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.json");
    let mut bytes = vec![b'a'; 3_000_000];
    bytes[2_500_000] = 0xff;
    let err = write_text_streaming(
        &path,
        header("bad", b""),
        &mut bytes.as_slice(),
        "big.log",
        Durability::Bulk,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::InvalidUtf8 {
                offset: 2_500_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(!path.exists());
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "temp file left behind"
    );
}

#[test]
fn foreign_layout_without_sha256_is_readable() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.json");
    std::fs::write(
        &path,
        r#"{"value": {"a": [1,2]}, "persist": true,
           "ref": {"id":"u","key":"f","scope":"global","type":"json","sizeBytes":13,"createdAt":5}}"#,
    )
    .unwrap();
    let h = read_header(&path).unwrap();
    assert_eq!(h.value_offset, None);
    assert_eq!(h.header.reference.sha256, None);
    assert_eq!(
        read_value(&path, None, &h.header.reference).unwrap(),
        json!({"a": [1, 2]})
    );
}

#[test]
fn write_errors_while_streaming_json_are_io_errors() {
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.json");
    let value = encode_value(&json!({"a": [1, 2, 3]}));
    let header = header("j", &value);
    let offset = write_file(&path, &header, &value, Durability::Bulk).unwrap();
    let err = copy_json_value(&path, offset, &header.reference, &mut Closed, true).unwrap_err();
    assert!(
        matches!(&err, StoreError::Io { source, .. } if source.kind() == io::ErrorKind::BrokenPipe),
        "{err:?}"
    );
}

#[test]
fn json_value_streams_pretty() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("j.json");
    let value = encode_value(&json!({"a": [1, {"b": "c"}]}));
    write_file(&path, &header("j", &value), &value, Durability::Bulk).unwrap();
    let h = read_header(&path).unwrap();
    let mut out = Vec::new();
    copy_json_value(
        &path,
        h.value_offset.unwrap(),
        &h.header.reference,
        &mut out,
        true,
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        serde_json::to_string_pretty(&json!({"a": [1, {"b": "c"}]})).unwrap()
    );
}
