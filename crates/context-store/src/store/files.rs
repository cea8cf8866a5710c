//! `file` variables in the store: making a reference, reading it back, and streaming
//! the referenced file's contents (checked against the reference) to a writer.

use std::io::Write;
use std::path::Path;

use crate::error::{Result, StoreError};
use crate::file_ref::FileRef;
use crate::key::display_key;
use crate::private_fs::Durability;
use crate::reference::{Expected, SetOptions, VariableRef, VariableType};

use super::Store;
use crate::file_ref_checks::{decode, file_copy_error, signing_key, verify};

impl Store {
    /// Stores a `file` variable under `key` that refers to the regular file at `path`
    /// as it is now (a `stat`; nothing of the file is read). Readers check the file
    /// has not changed before they read it.
    pub fn set_file_reference(
        &self,
        key: &str,
        path: &Path,
        opts: SetOptions,
    ) -> Result<(VariableRef, FileRef)> {
        let mut file = FileRef::of(path)
            .map_err(|e| StoreError::io("reference the file", path.to_owned(), e))?;
        file.signature = Some(file.sign(&signing_key(self.data_dir())?));
        let value = serde_json::to_value(&file).map_err(|e| StoreError::Json {
            action: "encode",
            key: display_key(key),
            source: e,
        })?;
        // A reference is a few hundred bytes that a run can make again from the file
        // it names: it needs no fsync (they cost milliseconds on a slow disk).
        let opts = SetOptions {
            durability: opts.durability.or(Some(Durability::Bulk)),
            ..opts
        }
        .var_type(VariableType::File);
        let reference = self.set(key, value, opts)?;
        Ok((reference, file))
    }

    /// The file `key` refers to, or `None` when `key` is not a `file` variable.
    pub fn file_reference(&self, key: &str) -> Result<Option<FileRef>> {
        if self.reference(key)?.var_type != VariableType::File {
            return Ok(None);
        }
        let value = self.get(key)?;
        let file = decode(key, &value)?;
        verify(&file, key, &self.canonical_path(key), self.data_dir())?;
        Ok(Some(file))
    }

    /// Whether the `file` variable `key` carries this data directory's signature:
    /// `None` when `key` is not a `file` variable, `Some(false)` for a reference rlm did
    /// not make (unsigned, or signed with another key), which every reader refuses.
    pub fn file_reference_is_signed(&self, key: &str) -> Result<Option<bool>> {
        if self.reference(key)?.var_type != VariableType::File {
            return Ok(None);
        }
        let value = self.get(key)?;
        let file = decode(key, &value)?;
        Ok(Some(file.signed_by(&signing_key(self.data_dir())?)))
    }

    /// [`file_reference`](Self::file_reference), checked: the file must still be the one
    /// referenced ([`StoreError::FileChanged`] otherwise). What every reader that hands
    /// the file on (to a sub-agent, a child run, the model) calls.
    pub fn unchanged_file_reference(&self, key: &str) -> Result<Option<FileRef>> {
        let Some(file) = self.file_reference(key)? else {
            return Ok(None);
        };
        file.check().map_err(|change| StoreError::FileChanged {
            key: display_key(key),
            path: file.path.clone(),
            change: change.0,
        })?;
        Ok(Some(file))
    }

    /// Streams the contents of the file `key` refers to into `out`, checked against
    /// the reference before and after; records the contents' sha256 in the variable
    /// the first time it is computed (unless the variable changed meanwhile).
    pub(super) fn copy_referenced_file(&self, key: &str, out: &mut dyn Write) -> Result<()> {
        let (value, reference) = self.get_with_reference(key)?;
        let file = decode(key, &value)?;
        verify(&file, key, &self.canonical_path(key), self.data_dir())?;
        let sha = file
            .copy_to(out)
            .map_err(|e| file_copy_error(key, &file, &self.canonical_path(key), e))?;
        if file.sha256.is_none() {
            self.record_sha256(key, &reference, file, sha);
        }
        Ok(())
    }

    /// Fills in the content sha256 of a reference, only if the variable is still the
    /// one that was read (a lost race just leaves it to the next reader).
    fn record_sha256(&self, key: &str, read: &VariableRef, mut file: FileRef, sha: String) {
        let Some(expected) = read.sha256.clone() else {
            return;
        };
        file.sha256 = Some(sha);
        let Ok(value) = serde_json::to_value(&file) else {
            return;
        };
        let opts = SetOptions::default()
            .scope(read.scope.clone())
            .var_type(VariableType::File);
        let written = self.compare_and_set_with(
            key,
            &Expected::Sha256(expected),
            value,
            opts,
            Durability::Bulk,
        );
        if let Err(error) = written {
            tracing::debug!(%error, key, "the sha256 of a referenced file was not recorded");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;
    use crate::file_ref_checks::{SIGNING_KEY_BYTES, SIGNING_KEY_FILE};
    use crate::integrity;

    /// Issue 22 item 11: referencing a context on a new data directory never waits for
    /// the disk (the signing key's fsync waited for a multi-GB context to be flushed).
    #[test]
    fn referencing_a_file_on_a_new_data_directory_does_not_fsync() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("big.log");
        fs::write(&log, "text").unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        let before = crate::private_fs::fsync_count::get();
        store
            .set_file_reference("ctx", &log, SetOptions::default())
            .unwrap();
        assert_eq!(
            crate::private_fs::fsync_count::get(),
            before,
            "it waited for the disk"
        );
        assert!(dir.path().join("data").join(SIGNING_KEY_FILE).exists());
    }

    #[test]
    fn the_signing_key_survives_a_reopen_and_a_lost_one_is_made_again() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("big.log");
        fs::write(&log, "text").unwrap();
        let data = dir.path().join("data");
        let key_path = data.join(SIGNING_KEY_FILE);
        {
            let store = Store::open(&data).unwrap();
            store
                .set_file_reference("ctx", &log, SetOptions::default())
                .unwrap();
        }
        let key = fs::read(&key_path).unwrap();
        assert_eq!(key.len(), SIGNING_KEY_BYTES);
        let store = Store::open(&data).unwrap();
        assert!(store.file_reference("ctx").unwrap().is_some());
        assert_eq!(fs::read(&key_path).unwrap(), key);
        // A crash before the key reached the disk leaves it empty: a new key is made,
        // and the variable signed with the old one says to reference the file again.
        drop(store);
        fs::write(&key_path, b"").unwrap();
        let store = Store::open(&data).unwrap();
        let error = store.file_reference("ctx").unwrap_err().to_string();
        assert!(
            error.contains("lost in a crash") && error.contains("--ref"),
            "{error}"
        );
        let new_key = fs::read(&key_path).unwrap();
        assert_eq!(new_key.len(), SIGNING_KEY_BYTES);
        assert_ne!(new_key, key);
        store
            .set_file_reference("ctx", &log, SetOptions::default())
            .unwrap();
        assert!(store.file_reference("ctx").unwrap().is_some());
    }

    #[test]
    fn a_file_variable_is_a_reference_read_through_to_the_file_and_hashed_on_first_read() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("big.log");
        fs::write(&log, "line one\nline two\n").unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        let (reference, file) = store
            .set_file_reference("ctx", &log, SetOptions::default())
            .unwrap();
        assert_eq!(reference.var_type, VariableType::File);
        assert!(
            reference.size_bytes < 400,
            "the variable is a reference, not a copy"
        );
        assert_eq!(file.size, 18);
        assert_eq!(store.file_reference("ctx").unwrap(), Some(file.clone()));

        let mut out = Vec::new();
        store.write_value_to("ctx", &mut out, false).unwrap();
        assert_eq!(out, b"line one\nline two\n");
        let recorded = store.file_reference("ctx").unwrap().unwrap();
        assert_eq!(
            recorded.sha256.as_deref(),
            Some(integrity::sha256_hex(b"line one\nline two\n").as_str())
        );
        // Another process sees the same reference through the variable file.
        let path = store.path_of("ctx").unwrap();
        assert_eq!(
            crate::VariableFile::open(&path)
                .unwrap()
                .file_reference()
                .unwrap(),
            Some(recorded)
        );

        fs::write(&log, "line one\nline 2\n").unwrap();
        let error = store
            .write_value_to("ctx", &mut Vec::new(), false)
            .unwrap_err();
        let message = error.to_string();
        assert!(
            matches!(error, StoreError::FileChanged { .. })
                && message.contains("changed since it was referenced")
                && message.contains("size went from 18 to 16")
                && message.contains("--copy-context"),
            "{message}"
        );
        assert!(matches!(
            store.unchanged_file_reference("ctx"),
            Err(StoreError::FileChanged { .. })
        ));
        // The variable itself is untouched by the failed read.
        assert!(store.file_reference("ctx").unwrap().is_some());
    }

    #[test]
    fn a_file_variable_rlm_did_not_sign_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret.txt");
        fs::write(&secret, "not for agents").unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        store
            .set_file_reference("mine", &secret, SetOptions::default())
            .unwrap();
        // What a child that may write variables could do: copy a reference by hand,
        // or write one from scratch.
        let mut forged = store.file_reference("mine").unwrap().unwrap();
        forged.signature = None;
        for (key, value) in [
            ("unsigned", serde_json::to_value(&forged).unwrap()),
            ("resigned", {
                forged.signature = Some(forged.sign(b"a key the forger made up"));
                serde_json::to_value(&forged).unwrap()
            }),
        ] {
            store
                .set(
                    key,
                    value,
                    SetOptions::default().var_type(VariableType::File),
                )
                .unwrap();
            let error = store.file_reference(key).unwrap_err().to_string();
            assert!(
                error.contains("does not carry this data directory's signature"),
                "{error}"
            );
            assert!(store.write_value_to(key, &mut Vec::new(), false).is_err());
            let path = store.path_of(key).unwrap();
            assert!(crate::VariableFile::open(&path)
                .and_then(|mut file| file.file_reference())
                .is_err());
        }
        // The key lives beside variables/, where confined children cannot read it.
        let key = dir.path().join("data").join(SIGNING_KEY_FILE);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            fs::metadata(&key).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert!(store.file_reference("mine").unwrap().is_some());
    }

    #[test]
    fn only_regular_files_can_be_referenced() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        let error = store
            .set_file_reference("d", dir.path(), SetOptions::default())
            .unwrap_err();
        let cause = std::error::Error::source(&error).map(ToString::to_string);
        assert!(
            cause.unwrap_or_default().contains("not a regular file"),
            "{error}"
        );
        assert!(!store.has("d"));
        assert_eq!(store.file_reference("d").ok(), None);
        store
            .set("t", serde_json::json!("x"), SetOptions::default())
            .unwrap();
        assert_eq!(store.file_reference("t").unwrap(), None);
    }
}
