//! Text views: a variable's text as a plain file, for tools that read files line by
//! line (an agent CLI's `Read` tool, `grep`, `sed`) and cannot read a variable file,
//! which is one JSON line however large the value.
//!
//! A view of a `text` variable is its decoded string; of any other value, its
//! pretty-printed JSON (the variable's *text*, as [`crate::TextReader`] reads it). It
//! lives at `<data-dir>/views/<sha256>.txt`, named by the sha256 the variable's header
//! records for the value, so every process asking for the same value shares one file,
//! a changed variable gets a new one, and a view, once in place, is never rewritten
//! (unless its size shows it is not the one written: a crash before it reached the
//! disk, a hand edit). It is written streaming from the variable file, into a temp
//! file that is then linked into place (`0600` in a `0700` directory): two processes
//! making the same view at once both succeed and leave one whole file.
//!
//! A `file` variable needs no view: its view is the file it refers to, checked
//! unchanged. Views no variable has any more are removed by
//! [`Store::remove_stale_views`] (`rlm-orchestrate vars gc`).

use std::collections::HashSet;
use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{create_private_dir, refuse_symlinked_dir, Location, Store, VIEWS_DIR};
use crate::disk;
use crate::error::{Result, StoreError};
use crate::key::{display_key, validate_key};
use crate::private_fs::{self, Staged};
use crate::reference::{ListFilter, VariableType};
use crate::variable_file::VariableFile;

/// Views younger than this are never removed as stale: another process may have
/// just written the variable (after this one last read the directory) and made its
/// view, and is about to hand the path out.
pub const STALE_VIEW_GRACE: Duration = Duration::from_secs(120);

/// Suffix of a view's file name (after its 64 hex digits of sha256).
const VIEW_SUFFIX: &str = ".txt";

/// Buffer between the streamed text and a view's temp file.
const VIEW_WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Where the text of a view comes from: a variable file (read streaming), or a value
/// this store holds (in memory, spilled, or from a file in another program's layout).
enum ViewSource {
    File(VariableFile),
    Value(Arc<Value>),
}

impl ViewSource {
    /// Writes the text to `out`; the bytes of a variable file are checked against its
    /// recorded size and sha256 on the way (a mismatch fails at the end).
    fn write_to(&mut self, out: &mut dyn Write, path: &Path) -> Result<()> {
        match self {
            Self::File(file) => file.write_text_to(out),
            Self::Value(value) => disk::write_value(value, out, true)
                .map_err(|e| StoreError::io("write the text view", path, e)),
        }
    }
}

impl Store {
    /// The directory of text views (absolute; created by the first view).
    pub fn views_dir(&self) -> PathBuf {
        self.data_dir.join(VIEWS_DIR)
    }

    /// An absolute path to a plain-text file holding `key`'s text, readable line by
    /// line by any tool: for a `text` variable its string, for a `json` (or other)
    /// variable its pretty-printed JSON — both in a view `<data-dir>/views/<sha256>.txt`
    /// made on first use — and for a `file` variable the file it refers to, checked
    /// unchanged ([`StoreError::FileChanged`] otherwise).
    ///
    /// A view is written once, streaming from the variable file (memory stays bounded
    /// whatever the size), and reused while its size is the text's: the size is
    /// measured by one streaming read of the value, once per value and store, which
    /// also checks the value against its recorded sha256 ([`StoreError::Integrity`]
    /// when it does not match: no view is handed out for a value that cannot be
    /// trusted). A value this store holds only in memory (or spilled) is written from
    /// memory. Treat a view as read-only: it is shared by every process using the data
    /// directory.
    pub fn text_view(&self, key: &str) -> Result<PathBuf> {
        validate_key(key)?;
        let (source, sha) = match self.view_source(key)? {
            Ok(found) => found,
            Err(file) => return Ok(file),
        };
        let dir = self.views_dir();
        create_private_dir(&dir)?;
        refuse_symlinked_dir(&dir)?;
        let view = dir.join(format!("{sha}{VIEW_SUFFIX}"));
        let mut source = source;
        let existing = existing_size(&view)?;
        if let Some(size) = existing {
            if size == self.view_size(&sha, &mut source, &view)? {
                return Ok(view);
            }
            tracing::warn!(
                view = %view.display(),
                "the text view of {:?} does not have the size of its text (a crash before it reached the disk, or an edit): writing it again",
                display_key(key)
            );
        }
        let (staged, written) = self.write_view(&dir, &mut source, &view)?;
        self.lock_inner().view_sizes.insert(sha, written);
        if existing.is_some() {
            staged.publish(&view)?;
            return Ok(view);
        }
        match staged.publish_new(&view)? {
            None => Ok(view),
            // Another process made it meanwhile: keep theirs if it is whole.
            Some(ours) => {
                if existing_size(&view)? != Some(written) {
                    ours.publish(&view)?;
                }
                Ok(view)
            }
        }
    }

    /// Where `key`'s view comes from and the sha256 that names it, or (as `Err`) the
    /// path of the file a `file` variable refers to, checked unchanged.
    fn view_source(&self, key: &str) -> Result<Result<(ViewSource, String), PathBuf>> {
        let mut inner = self.lock_inner();
        let entry = self.entry(&mut inner, key)?;
        drop(inner);
        if entry.reference.var_type != VariableType::File {
            if let Location::Disk { path, .. } = &entry.location {
                // Header and value from one open file: another process may rename a
                // new version over it at any moment.
                let file = VariableFile::open(path)?;
                let recorded = file.reference();
                if recorded.key != key {
                    return Err(StoreError::Corrupt {
                        path: path.clone(),
                        reason: format!(
                            "it holds key {:?}, not {:?}",
                            display_key(&recorded.key),
                            display_key(key)
                        ),
                    });
                }
                if let (Some(sha), Some(_)) = (recorded.sha256.clone(), file.value_offset()) {
                    if recorded.var_type != VariableType::File {
                        return Ok(Ok((ViewSource::File(file), sha)));
                    }
                }
            }
        }
        if entry.reference.var_type == VariableType::File
            || self.reference(key)?.var_type == VariableType::File
        {
            return match self.unchanged_file_reference(key)? {
                Some(file) => Ok(Err(file.path)),
                // It stopped being a file variable meanwhile.
                None => self.view_source(key),
            };
        }
        let (value, reference) = self.get_with_reference(key)?;
        let sha = reference.sha256.ok_or_else(|| StoreError::Corrupt {
            path: self.canonical_path(key),
            reason: "the value has no sha256 to name its text view".to_owned(),
        })?;
        Ok(Ok((ViewSource::Value(value), sha)))
    }

    /// The size of the view of the value `sha` (from `source`): remembered, or
    /// measured by streaming the text once.
    fn view_size(&self, sha: &str, source: &mut ViewSource, view: &Path) -> Result<u64> {
        if let Some(size) = self.lock_inner().view_sizes.get(sha) {
            return Ok(*size);
        }
        let mut counter = Counter {
            inner: io::sink(),
            written: 0,
        };
        source.write_to(&mut counter, view)?;
        self.lock_inner()
            .view_sizes
            .insert(sha.to_owned(), counter.written);
        Ok(counter.written)
    }

    /// Writes the text of `source` to a locked temp file in `dir`; returns it (not yet
    /// in place) and its size.
    fn write_view(
        &self,
        dir: &Path,
        source: &mut ViewSource,
        view: &Path,
    ) -> Result<(Staged, u64)> {
        let mut failed: Option<StoreError> = None;
        let mut written = 0;
        let staged = private_fs::stage_private(dir, self.options.durability, |file| {
            let mut out = Counter {
                inner: BufWriter::with_capacity(VIEW_WRITE_BUFFER_BYTES, file),
                written: 0,
            };
            let copied = source.write_to(&mut out, view);
            written = out.written;
            match copied {
                Ok(()) => out.flush(),
                Err(e) => {
                    failed = Some(e);
                    Err(io::Error::other("the text could not be read"))
                }
            }
        });
        match (staged, failed) {
            (_, Some(e)) => Err(e),
            (Ok(staged), None) => Ok((staged, written)),
            (Err(e), None) => Err(e),
        }
    }

    /// Removes the text views whose sha256 no variable has any more (after a
    /// [`refresh`](Self::refresh)), except those younger than [`STALE_VIEW_GRACE`],
    /// and the temp files of view writers that were killed. A process that opened a
    /// view before keeps reading it. A view of a variable another program wrote (no
    /// sha256 in its header) is removed too; [`text_view`](Self::text_view) makes it
    /// again when asked. Files in `views/` that are not views are left alone. Returns
    /// how many views were removed.
    pub fn remove_stale_views(&self) -> Result<usize> {
        let dir = self.views_dir();
        match fs::symlink_metadata(&dir) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
            _ => refuse_symlinked_dir(&dir)?,
        }
        self.refresh()?;
        let live: HashSet<String> = self
            .list(&ListFilter::default())
            .into_iter()
            .filter_map(|r| r.sha256)
            .collect();
        super::scan::remove_stale_temp_files(&dir);
        let entries = fs::read_dir(&dir).map_err(|e| StoreError::io("list", &dir, e))?;
        let mut removed = 0;
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("list", &dir, e))?;
            let name = entry.file_name();
            let Some(sha) = name.to_str().and_then(|n| n.strip_suffix(VIEW_SUFFIX)) else {
                continue;
            };
            if !is_sha256(sha) || live.contains(sha) {
                continue;
            }
            let path = entry.path();
            let meta = match fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StoreError::io("inspect text view", path, e)),
            };
            let young = meta
                .modified()
                .ok()
                .and_then(|modified| modified.elapsed().ok())
                .is_none_or(|age| age < STALE_VIEW_GRACE);
            if young {
                continue;
            }
            match fs::remove_file(&path) {
                Ok(()) => removed += 1,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(StoreError::io("remove text view", path, e)),
            }
        }
        self.lock_inner()
            .view_sizes
            .retain(|sha, _| live.contains(sha));
        Ok(removed)
    }
}

/// The size of the regular file at `view`, `None` when there is none (a symbolic link
/// or anything else there counts as none: it is replaced).
fn existing_size(view: &Path) -> Result<Option<u64>> {
    match fs::symlink_metadata(view) {
        Ok(meta) if meta.is_file() => Ok(Some(meta.len())),
        Ok(_) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::io("inspect text view", view, e)),
    }
}

/// True for 64 lowercase hex digits.
fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Passes writes through and counts the bytes.
struct Counter<W> {
    inner: W,
    written: u64,
}

impl<W: Write> Write for Counter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::ops::ControlFlow;
    use std::os::unix::fs::PermissionsExt;
    use std::time::SystemTime;

    use proptest::prelude::*;
    use serde_json::json;

    use super::*;
    use crate::reference::SetOptions;

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    /// Makes every file in `dir` older than the grace, as if written long ago.
    fn age_all(dir: &Path) {
        let long_ago = SystemTime::now() - STALE_VIEW_GRACE * 2;
        for entry in fs::read_dir(dir).unwrap() {
            let file = fs::File::options()
                .write(true)
                .open(entry.unwrap().path())
                .unwrap();
            file.set_modified(long_ago).unwrap();
        }
    }

    #[test]
    fn a_text_view_is_the_decoded_string_named_by_its_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let text = "line \"one\"\r\n\ttwo é 😀\\\n\u{1}three";
        let reference = store.set("t", json!(text), SetOptions::default()).unwrap();
        let view = store.text_view("t").unwrap();
        assert!(view.is_absolute());
        assert_eq!(
            view,
            store
                .views_dir()
                .join(format!("{}.txt", reference.sha256.unwrap()))
        );
        assert_eq!(fs::read_to_string(&view).unwrap(), text);
        assert_eq!((mode(&view), mode(&store.views_dir())), (0o600, 0o700));
        // Asked again (by this store or another), the same file, not rewritten.
        let inode = |p: &Path| std::os::unix::fs::MetadataExt::ino(&fs::metadata(p).unwrap());
        let before = inode(&view);
        assert_eq!(store.text_view("t").unwrap(), view);
        let other = Store::open(dir.path()).unwrap();
        assert_eq!(other.text_view("t").unwrap(), view);
        assert_eq!(inode(&view), before);
        // A changed variable gets a new view; the old one stays for its readers.
        store.set("t", json!("new"), SetOptions::default()).unwrap();
        let new_view = store.text_view("t").unwrap();
        assert_ne!(new_view, view);
        assert_eq!(fs::read_to_string(&new_view).unwrap(), "new");
        assert!(view.exists());
        assert_eq!(
            fs::read_dir(store.views_dir()).unwrap().count(),
            2,
            "no temp file left behind"
        );
    }

    #[test]
    fn a_json_view_is_pretty_and_a_file_view_is_the_file_itself() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        let value = json!({"k": [1, "two\nlines"], "é": null});
        store
            .set("j", value.clone(), SetOptions::default())
            .unwrap();
        let view = store.text_view("j").unwrap();
        assert_eq!(
            fs::read_to_string(&view).unwrap(),
            serde_json::to_string_pretty(&value).unwrap()
        );
        let log = dir.path().join("ctx.log");
        fs::write(&log, "one\ntwo\n").unwrap();
        store
            .set_file_reference("f", &log, SetOptions::default())
            .unwrap();
        assert_eq!(
            store.text_view("f").unwrap(),
            fs::canonicalize(&log).unwrap()
        );
        fs::write(&log, "changed\n").unwrap();
        assert!(matches!(
            store.text_view("f"),
            Err(StoreError::FileChanged { .. })
        ));
        assert!(matches!(
            store.text_view("absent"),
            Err(StoreError::NotFound { .. })
        ));
        assert!(matches!(
            store.text_view(""),
            Err(StoreError::InvalidKey { .. })
        ));
    }

    #[test]
    fn an_in_memory_value_gets_a_view_too() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let opts = SetOptions {
            persist: false,
            ..SetOptions::default()
        };
        store.set("m", json!("in memory\n"), opts).unwrap();
        let view = store.text_view("m").unwrap();
        assert_eq!(fs::read_to_string(view).unwrap(), "in memory\n");
    }

    #[test]
    fn a_view_of_the_wrong_size_or_a_link_is_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .set("t", json!("hello\n"), SetOptions::default())
            .unwrap();
        let view = store.text_view("t").unwrap();
        // A crash before the view reached the disk leaves it empty.
        fs::write(&view, "").unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        assert_eq!(fresh.text_view("t").unwrap(), view);
        assert_eq!(fs::read_to_string(&view).unwrap(), "hello\n");
        // A link planted in its place is replaced, never followed.
        let elsewhere = dir.path().join("elsewhere");
        fs::write(&elsewhere, "hellO\n").unwrap();
        fs::remove_file(&view).unwrap();
        std::os::unix::fs::symlink(&elsewhere, &view).unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        assert_eq!(fresh.text_view("t").unwrap(), view);
        assert!(fs::symlink_metadata(&view).unwrap().is_file());
        assert_eq!(fs::read_to_string(&view).unwrap(), "hello\n");
        assert_eq!(fs::read_to_string(&elsewhere).unwrap(), "hellO\n");
    }

    #[test]
    fn a_tampered_value_gets_no_view() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        store
            .set("t", json!("hello"), SetOptions::default())
            .unwrap();
        let path = store.path_of("t").unwrap();
        let edited = fs::read_to_string(&path).unwrap().replace("hello", "hellO");
        fs::write(&path, edited).unwrap();
        let fresh = Store::open(dir.path()).unwrap();
        assert!(matches!(
            fresh.text_view("t"),
            Err(StoreError::Integrity { .. })
        ));
        let views = fresh.views_dir();
        assert_eq!(fs::read_dir(views).unwrap().count(), 0, "nothing published");
    }

    #[test]
    fn two_threads_making_the_same_view_both_get_one_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let text = "é line\n".repeat(200_000);
        Store::open(dir.path())
            .unwrap()
            .set("t", json!(text), SetOptions::default())
            .unwrap();
        let barrier = std::sync::Barrier::new(2);
        let views: Vec<PathBuf> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        // Each its own store, as two processes would have.
                        let store = Store::open(dir.path()).unwrap();
                        barrier.wait();
                        store.text_view("t").unwrap()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(views[0], views[1]);
        assert_eq!(fs::read_to_string(&views[0]).unwrap(), text);
        let names: Vec<_> = fs::read_dir(views[0].parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "one view, no temp file: {names:?}");
    }

    #[test]
    fn stale_views_are_removed_and_live_or_young_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.remove_stale_views().unwrap(), 0, "no views/ yet");
        store
            .set("keep", json!("kept"), SetOptions::default())
            .unwrap();
        store
            .set("gone", json!("gone"), SetOptions::default())
            .unwrap();
        store
            .set("old", json!("v1"), SetOptions::default())
            .unwrap();
        let kept = store.text_view("keep").unwrap();
        let gone = store.text_view("gone").unwrap();
        let old = store.text_view("old").unwrap();
        store.delete("gone").unwrap();
        store
            .set("old", json!("v2"), SetOptions::default())
            .unwrap();
        let young_stale = {
            store
                .set("young", json!("young"), SetOptions::default())
                .unwrap();
            let view = store.text_view("young").unwrap();
            store.delete("young").unwrap();
            view
        };
        let other = store.views_dir().join("notes.txt");
        fs::write(&other, "not a view").unwrap();
        age_all(&store.views_dir());
        let young = SystemTime::now();
        fs::File::options()
            .write(true)
            .open(&young_stale)
            .unwrap()
            .set_modified(young)
            .unwrap();
        // Another process's store sees the deletions.
        let other_store = Store::open(dir.path()).unwrap();
        assert_eq!(other_store.remove_stale_views().unwrap(), 2);
        assert!(kept.exists() && young_stale.exists() && other.exists());
        assert!(!gone.exists() && !old.exists());
        // The store that made them makes them again when asked.
        store
            .set("old", json!("v1"), SetOptions::default())
            .unwrap();
        assert_eq!(store.text_view("old").unwrap(), old);
        assert_eq!(fs::read_to_string(&old).unwrap(), "v1");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// A view holds exactly the variable's text, and the line and byte ranges of
        /// the text are the same ranges of the view.
        #[test]
        fn a_view_and_the_ranges_agree_with_the_value_in_memory(
            text in "(?s)[a-zé日\n\r\"\\\\\t😀\u{1}\u{7f}]{0,120}",
            first in 0u64..12,
            lines in 0u64..6,
            start in 0u64..140,
            len in 0u64..140,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let store = Store::open_with(dir.path(), crate::StoreOptions {
                durability: crate::Durability::Bulk,
                ..crate::StoreOptions::default()
            }).unwrap();
            store.set("t", json!(text), SetOptions::default()).unwrap();
            let view = fs::read(store.text_view("t").unwrap()).unwrap();
            prop_assert_eq!(&view, text.as_bytes());
            let reader = store.text_reader("t").unwrap();
            let mut got = Vec::new();
            reader.write_lines(first, Some(first + lines), &mut got).unwrap();
            let want: Vec<u8> = view
                .split_inclusive(|b| *b == b'\n')
                .enumerate()
                .filter(|(i, _)| (first.max(1)..=first + lines).contains(&(*i as u64 + 1)))
                .flat_map(|(_, line)| line.to_vec())
                .collect();
            prop_assert_eq!(got, want);
            let mut got = Vec::new();
            reader.write_bytes(start, Some(start + len), &mut got).unwrap();
            let boundary = |at: u64| {
                let at = (at as usize).min(text.len());
                (at..=text.len()).find(|i| text.is_char_boundary(*i)).unwrap()
            };
            let want = &view[boundary(start)..boundary(start + len).max(boundary(start))];
            prop_assert_eq!(got.as_slice(), want);
            let mut counted = 0u64;
            reader.stream(&mut |buf| { counted += buf.len() as u64; ControlFlow::Continue(()) }).unwrap();
            prop_assert_eq!(counted, view.len() as u64);
        }
    }
}
