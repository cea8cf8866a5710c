//! `rlm-orchestrate vars`: the context store from the shell.
//!
//! This is how a person inspects what a run left behind, and how a sub-agent written
//! in any language hands its result back (`vars set sub-result-<id> …`). Values can be
//! gigabytes, so text goes in through [`Store::set_text_from_reader`] and comes out
//! through [`Store::write_value_to`], both streaming. Commands that only read never
//! create a data directory as a side effect.

mod from_file;
mod value;

use std::fs;
use std::io::{self, BufWriter, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result};
use rlm_context_store::{
    validate_key, Expected, ListFilter, ScanProblem, SetOptions, Store, StoreError, StoreOptions,
    VariableRef, VariableType,
};
use rlm_orchestrator::format::{self, Capture};
use serde::Serialize;
use serde_json::Value;

use self::from_file::FromFile;
use self::value::{check_type, parse_json, Input};
use crate::cli::vars::{
    ByteRange, GetArgs, KeyArgs, LineRange, ListArgs, SetArgs, ShowArgs, VarsArgs, VarsCommand,
};
use crate::cli::GlobalArgs;
use crate::exit::{annotate, bad_input, ResultExt};
use crate::output::{self, PipeAware};

/// Characters of a value shown by `vars show`.
const PREVIEW_CHARS: usize = 200;

/// Bytes of a value read for a preview: enough for [`PREVIEW_CHARS`] of any UTF-8.
const PREVIEW_CAPTURE_BYTES: usize = PREVIEW_CHARS * 4 + 4;

/// Hex digits of the sha256 shown in `vars list`.
const SHORT_SHA_CHARS: usize = 12;

/// Stdout buffer size; `vars get` streams large values through it.
const STDOUT_BUFFER_BYTES: usize = 256 * 1024;

/// Values up to this size are read and checked against their sha256 in full before
/// `vars get` prints a byte of them; larger ones stream, and a mismatch found at the
/// end fails the command after the bytes went out (a file too short for its value
/// fails before anything is printed, whatever its size).
const VERIFY_BEFORE_PRINT_BYTES: u64 = 16 * 1024 * 1024;

/// Runs a `vars` sub-command.
pub fn run(global: &GlobalArgs, args: VarsArgs) -> Result<()> {
    let mut out = PipeAware::new(BufWriter::with_capacity(
        STDOUT_BUFFER_BYTES,
        io::stdout().lock(),
    ));
    let result = run_to(global, args, &mut out)
        .and_then(|()| out.flush().context("failed to write to stdout"));
    if out.is_closed() {
        // The reader of our stdout went away (`| head`): it has what it wanted.
        tracing::debug!("stdout closed early");
        return Ok(());
    }
    result
}

/// Runs a `vars` sub-command, writing what it prints to `out` (the MCP server's
/// `vars_*` tools use this).
pub fn run_to(global: &GlobalArgs, args: VarsArgs, out: &mut dyn Write) -> Result<()> {
    match args.command {
        VarsCommand::List(a) => list(global, a, out),
        VarsCommand::Show(a) => show(global, a, out),
        VarsCommand::Get(a) => get(global, a, out),
        VarsCommand::View(a) => view(global, a, out),
        VarsCommand::Set(a) => set(global, a, out),
        VarsCommand::Rm(a) => remove(global, a, out),
        VarsCommand::Clear => clear(global, out),
        VarsCommand::Gc => gc(global, out),
        VarsCommand::Path(a) => path(global, a, out),
    }
}

// ----- the sub-commands -----

fn list(global: &GlobalArgs, args: ListArgs, out: &mut dyn Write) -> Result<()> {
    let filter = ListFilter {
        scope: args.scope,
        var_type: args.var_type.map(VariableType::from),
    };
    let store = open_existing(global)?;
    let (refs, problems) = match &store {
        Some(store) => (store.list(&filter), store.problems()),
        None => (Vec::new(), Vec::new()),
    };
    if !global.quiet {
        for problem in &problems {
            report_problem(problem, "skipping");
        }
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &refs).context("failed to write to stdout")?;
        writeln!(out)?;
        return Ok(());
    }
    if refs.is_empty() {
        if !global.quiet {
            output::warning(format_args!(
                "no variables in {}",
                global.data_dir.display()
            ));
        }
        return Ok(());
    }
    let unsigned = store
        .as_ref()
        .map(|store| unsigned_file_variables(store, &refs))
        .unwrap_or_default();
    if !global.quiet {
        for key in &unsigned {
            output::warning(format_args!(
                "{} is a file variable this data directory did not sign (unsigned, or signed \
                 with another key): no reader follows it; if you made it, reference the file \
                 again with `rlm-orchestrate vars set KEY --ref PATH`",
                output::shown_key(key)
            ));
        }
    }
    write_list_marked(out, &refs, &unsigned)?;
    Ok(())
}

/// The keys among `refs` of `file` variables whose reference this data directory did
/// not sign: a process that may write variables could have pointed them anywhere.
fn unsigned_file_variables(store: &Store, refs: &[VariableRef]) -> Vec<String> {
    refs.iter()
        .filter(|r| r.var_type == VariableType::File)
        .filter(|r| !matches!(store.file_reference_is_signed(&r.key), Ok(Some(true))))
        .map(|r| r.key.clone())
        .collect()
}

/// The `vars list` table: key, type, scope, size, creation time, short sha256.
pub(crate) fn write_list(out: &mut dyn Write, refs: &[VariableRef]) -> io::Result<()> {
    write_list_marked(out, refs, &[])
}

/// [`write_list`], with the `file` variables named in `unsigned` marked as such.
fn write_list_marked(
    out: &mut dyn Write,
    refs: &[VariableRef],
    unsigned: &[String],
) -> io::Result<()> {
    let rows: Vec<Vec<String>> = refs
        .iter()
        .map(|r| {
            let var_type = if unsigned.contains(&r.key) {
                format!("{} (unsigned)", r.var_type)
            } else {
                r.var_type.to_string()
            };
            vec![
                output::shown_key(&r.key),
                var_type,
                output::shown_key(&r.scope),
                format::human_bytes(r.size_bytes),
                format::utc_time(r.created_at),
                short_sha(r),
            ]
        })
        .collect();
    output::write_table(
        out,
        &["KEY", "TYPE", "SCOPE", "SIZE", "CREATED (UTC)", "SHA256"],
        &rows,
    )
}

fn show(global: &GlobalArgs, args: ShowArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    let store = open_for_key(global, &key)?;
    let reference = missing_hint(store.reference(&key), &store)?;
    let path = store.path_of(&key)?;
    let file = store.file_reference(&key)?;
    let change = file.as_ref().and_then(|f| f.check().err());
    let status = file.as_ref().map(|_| match &change {
        None => "unchanged since it was referenced".to_owned(),
        Some(change) => format!("changed since it was referenced: {change}"),
    });
    let preview = if change.is_none() {
        preview(&store, &key).with_context(|| format!("failed to read variable {key:?}"))?
    } else {
        String::new()
    };
    if args.json {
        let shown = Shown {
            reference: &reference,
            path: &path,
            file: file.as_ref(),
            status: status.as_deref(),
            preview: &preview,
        };
        serde_json::to_writer_pretty(&mut *out, &shown).context("failed to write to stdout")?;
        writeln!(out)?;
        return Ok(());
    }
    let lines = [
        ("key", output::shown_key(&reference.key)),
        ("type", reference.var_type.to_string()),
        ("scope", output::shown_key(&reference.scope)),
        ("size", size_with_bytes(reference.size_bytes)),
        (
            "created",
            format!("{} UTC", format::utc_time(reference.created_at)),
        ),
        (
            "sha256",
            reference.sha256.clone().unwrap_or_else(|| "-".to_owned()),
        ),
        ("id", reference.id.clone()),
        ("path", path.display().to_string()),
    ];
    for (label, value) in lines {
        writeln!(out, "{:<9}{value}", format!("{label}:"))?;
    }
    if let (Some(file), Some(status)) = (&file, &status) {
        let modified = u64::try_from(file.mtime_ns / 1_000_000).unwrap_or(0);
        let file_lines = [
            (
                "file",
                output::escape_controls(&file.path.display().to_string()),
            ),
            ("size", size_with_bytes(file.size)),
            ("modified", format!("{} UTC", format::utc_time(modified))),
            ("inode", format!("{} (device {})", file.inode, file.device)),
            (
                "contents",
                match &file.sha256 {
                    Some(sha) => format!("sha256 {sha}"),
                    None => {
                        "sha256 not computed yet (`vars get` computes and records it)".to_owned()
                    }
                },
            ),
            ("status", status.clone()),
        ];
        for (label, value) in file_lines {
            writeln!(out, "  {:<10}{value}", format!("{label}:"))?;
        }
    }
    writeln!(
        out,
        "{:<9}{}",
        "preview:",
        output::escape_controls(&preview)
    )?;
    Ok(())
}

fn get(global: &GlobalArgs, args: GetArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    let store = open_for_key(global, &key)?;
    let reference = missing_hint(store.reference(&key), &store)?;
    if args.count {
        return count(&store, &key, out);
    }
    if let Some(range) = args.lines {
        return get_lines(global, &store, &key, range, out);
    }
    if let Some(range) = args.bytes {
        return get_bytes(global, &store, &key, range, out);
    }
    // A file variable prints the file it refers to: its size is the file's.
    let size = match store.file_reference(&key)? {
        Some(file) => file.size,
        None => reference.size_bytes,
    };
    if size <= VERIFY_BEFORE_PRINT_BYTES {
        let mut checked = Vec::with_capacity(size as usize + 1);
        missing_hint(store.write_value_to(&key, &mut checked, true), &store)
            .with_context(|| format!("failed to print variable {key:?}"))?;
        out.write_all(&checked)?;
    } else {
        missing_hint(store.write_value_to(&key, out, true), &store)
            .with_context(|| format!("failed to print variable {key:?}"))?;
    }
    if !matches!(
        reference.var_type,
        VariableType::Text | VariableType::Stream | VariableType::File
    ) {
        writeln!(out)?;
    }
    Ok(())
}

/// `vars get KEY --count`: the text's lines, bytes and characters as one JSON line.
fn count(store: &Store, key: &str, out: &mut dyn Write) -> Result<()> {
    let measure = missing_hint(
        store.text_reader(key).and_then(|reader| reader.measure()),
        store,
    )
    .with_context(|| format!("failed to count the text of variable {key:?}"))?;
    let counts = Counts {
        lines: measure.lines,
        bytes: measure.bytes,
        chars: measure.chars,
    };
    serde_json::to_writer(&mut *out, &counts).context("failed to write to stdout")?;
    writeln!(out)?;
    Ok(())
}

/// `vars get KEY --lines A:B`.
fn get_lines(
    global: &GlobalArgs,
    store: &Store,
    key: &str,
    range: LineRange,
    out: &mut dyn Write,
) -> Result<()> {
    let read = missing_hint(
        store
            .text_reader(key)
            .and_then(|reader| reader.write_lines(range.first, range.last, out)),
        store,
    )
    .with_context(|| format!("failed to print lines of variable {key:?}"))?;
    if let (0, Some(total), false) = (read.written, read.total, global.quiet) {
        if total < range.first {
            output::warning(format_args!(
                "the text of {} has {total} line{}: nothing from line {} on",
                output::shown_key(key),
                if total == 1 { "" } else { "s" },
                range.first
            ));
        }
    }
    Ok(())
}

/// `vars get KEY --bytes A:B`.
fn get_bytes(
    global: &GlobalArgs,
    store: &Store,
    key: &str,
    range: ByteRange,
    out: &mut dyn Write,
) -> Result<()> {
    let read = missing_hint(
        store
            .text_reader(key)
            .and_then(|reader| reader.write_bytes(range.start, range.end, out)),
        store,
    )
    .with_context(|| format!("failed to print bytes of variable {key:?}"))?;
    if let (0, Some(total), false) = (read.written, read.total, global.quiet) {
        if total <= range.start && range.end != Some(range.start) {
            output::warning(format_args!(
                "the text of {} has {total} byte{}: nothing from byte {} on",
                output::shown_key(key),
                if total == 1 { "" } else { "s" },
                range.start
            ));
        }
    }
    Ok(())
}

/// `vars view KEY`: the path of a plain-text file with the variable's text.
fn view(global: &GlobalArgs, args: KeyArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    let store = open_for_key(global, &key)?;
    let path = missing_hint(store.text_view(&key), &store)
        .with_context(|| format!("failed to make a text view of variable {key:?}"))?;
    out.write_all(path.as_os_str().as_bytes())?;
    writeln!(out)?;
    Ok(())
}

/// `vars gc`: removes the text views no variable has any more.
fn gc(global: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let removed = match open_existing(global)? {
        Some(store) => remove_stale_views(&store)?,
        None => 0,
    };
    let plural = if removed == 1 { "" } else { "s" };
    writeln!(out, "removed {removed} stale text view{plural}")?;
    Ok(())
}

/// [`Store::remove_stale_views`], with the error saying what failed.
fn remove_stale_views(store: &Store) -> Result<usize> {
    store.remove_stale_views().with_context(|| {
        format!(
            "failed to remove stale text views in {}",
            store.views_dir().display()
        )
    })
}

/// The scope of an agent's own result when the agent stores it: `agent:<parent id>`,
/// as the parent would have stored it, when `key` is the `RLM_RESULT_KEY` a parent
/// gave this process (with its `RLM_PARENT_ID`). `None` otherwise (global).
fn own_result_scope(key: &str) -> Option<String> {
    let own_key = std::env::var(rlm_orchestrator::agents::EnvVars::RLM_RESULT_KEY).ok()?;
    let parent = std::env::var(rlm_orchestrator::agents::EnvVars::RLM_PARENT_ID).ok()?;
    (own_key == key && !parent.is_empty()).then(|| format!("agent:{parent}"))
}

fn set(global: &GlobalArgs, args: SetArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    if args.scope.as_deref() == Some("") {
        return Err(bad_input("--scope must not be empty"));
    }
    let var_type = args.var_type.map(VariableType::from);
    let opts = SetOptions {
        scope: args.scope.or_else(|| own_result_scope(&key)),
        var_type,
        persist: true,
        durability: None,
    };
    let expected = args.if_sha256;
    let stored = match (args.value, args.file) {
        _ if args.reference.is_some() => {
            let path = args.reference.unwrap_or_default();
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_file() => {}
                Ok(_) => {
                    return Err(bad_input(format!(
                        "--ref {} is not a regular file; --ref refers to one file (store a directory's files with `run --context-dir`)",
                        path.display()
                    )))
                }
                Err(e) => {
                    return Err(bad_input(format!(
                        "--ref {}: {e}; give the path of an existing file",
                        path.display()
                    )))
                }
            }
            let store = open(global)?;
            store
                .set_file_reference(&key, &path, opts)
                .map(|(reference, _)| reference)
        }
        (Some(value), None) => {
            let value = if args.json {
                parse_json(value.as_bytes(), "VALUE")?
            } else {
                Value::String(value)
            };
            check_type(&value, var_type)?;
            let store = open(global)?;
            store_value(&store, &key, value, opts, expected.as_ref())
        }
        (None, Some(file)) => {
            let input = Input::check(&file)?;
            let from_file = FromFile {
                json: args.json,
                var_type,
                expected: expected.as_ref(),
                max_bytes: args.max_bytes,
            };
            from_file.store(global, &key, &input, opts)?
        }
        _ => return Err(bad_input("give either VALUE or --file FILE")),
    };
    let reference = match stored {
        Err(e @ StoreError::Conflict { .. }) => Err(e).hint(|| {
            format!(
                "see the current value with `rlm-orchestrate vars show {}`, \
                 then retry with its sha256",
                shell_word(&key)
            )
        }),
        other => other.map_err(anyhow::Error::from),
    }
    .with_context(|| format!("failed to store variable {key:?}"))?;
    writeln!(
        out,
        "{}: {}, scope {}, {} bytes, sha256 {}",
        output::shown_key(&reference.key),
        reference.var_type,
        output::shown_key(&reference.scope),
        reference.size_bytes,
        reference.sha256.as_deref().unwrap_or("-")
    )?;
    Ok(())
}

fn remove(global: &GlobalArgs, args: KeyArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    let store = open_for_key(global, &key)?;
    missing_hint(store.delete(&key), &store)
        .with_context(|| format!("failed to remove variable {key:?}"))?;
    writeln!(out, "removed {}", output::shown_key(&key))?;
    Ok(())
}

fn clear(global: &GlobalArgs, out: &mut dyn Write) -> Result<()> {
    let removed = match open_existing(global)? {
        Some(store) => {
            let removed = store.clear().context("failed to clear the context store")?;
            remove_stale_views(&store)?;
            if !global.quiet {
                for problem in store.problems() {
                    report_problem(&problem, "left in place");
                }
            }
            removed
        }
        None => 0,
    };
    let plural = if removed == 1 { "" } else { "s" };
    writeln!(out, "removed {removed} variable{plural}")?;
    Ok(())
}

fn path(global: &GlobalArgs, args: KeyArgs, out: &mut dyn Write) -> Result<()> {
    let key = args.key;
    validate_key(&key)?;
    let store = open_for_key(global, &key)?;
    let path = missing_hint(store.persist_for_sub_agent(&key), &store)
        .with_context(|| format!("failed to locate variable {key:?}"))?;
    // A sub-agent given a file variable reads the file it refers to.
    let path = match store.file_reference(&key)? {
        Some(file) => file.path,
        None => path,
    };
    out.write_all(path.as_os_str().as_bytes())?;
    writeln!(out)?;
    Ok(())
}

// ----- opening the store -----

/// Opens (creating if needed) the store in the data directory. The CLI always
/// persists, with fsync.
fn open(global: &GlobalArgs) -> Result<Store> {
    let dir = &global.data_dir;
    let store = Store::open_with(dir, StoreOptions::default())
        .with_context(|| format!("failed to open the context store in {}", dir.display()))?;
    tracing::debug!(data_dir = %store.data_dir().display(), "opened store");
    Ok(store)
}

/// Opens the store only if the data directory exists.
fn open_existing(global: &GlobalArgs) -> Result<Option<Store>> {
    let dir = &global.data_dir;
    match fs::metadata(dir) {
        Ok(_) => open(global).map(Some),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            tracing::debug!(data_dir = %dir.display(), "data directory does not exist");
            Ok(None)
        }
        Err(e) => Err(e).with_context(|| format!("failed to inspect {}", dir.display())),
    }
}

/// Opens the store to read `key`; a missing data directory means a missing key.
fn open_for_key(global: &GlobalArgs, key: &str) -> Result<Store> {
    let dir = &global.data_dir;
    open_existing(global)?.ok_or_else(|| {
        let missing = StoreError::NotFound {
            key: key.to_owned(),
        };
        let hint = format!(
            "the data directory {} does not exist; pick another with --data-dir or RLM_DATA_DIR",
            dir.display()
        );
        annotate(missing.into(), None, Some(hint))
    })
}

/// Adds a hint naming the data directory when `result` is a missing variable.
fn missing_hint<T>(result: Result<T, StoreError>, store: &Store) -> Result<T> {
    match result {
        Err(e @ StoreError::NotFound { .. }) => Err(e).hint(|| {
            format!(
                "the data directory is {}; pick another with --data-dir or RLM_DATA_DIR",
                store.data_dir().display()
            )
        }),
        other => Ok(other?),
    }
}

// ----- values -----

/// Writes `value` (with compare-and-set when `expected` is given).
fn store_value(
    store: &Store,
    key: &str,
    value: Value,
    opts: SetOptions,
    expected: Option<&Expected>,
) -> Result<VariableRef, StoreError> {
    match expected {
        Some(expected) => store.compare_and_set(key, expected, value, opts),
        None => store.set(key, value, opts),
    }
}

/// The first [`PREVIEW_CHARS`] characters of the value (compact JSON unless text),
/// with `…` when there is more. Reads only the start of values stored in our layout.
fn preview(store: &Store, key: &str) -> Result<String> {
    let mut capture = Capture::new(PREVIEW_CAPTURE_BYTES);
    if let Err(e) = store.write_value_to(key, &mut capture, false) {
        if !capture.is_full() {
            return Err(e.into());
        }
    }
    let text = String::from_utf8_lossy(capture.bytes());
    let mut preview: String = text.chars().take(PREVIEW_CHARS).collect();
    if capture.is_full() || text.chars().nth(PREVIEW_CHARS).is_some() {
        preview.push('…');
    }
    Ok(preview)
}

/// Warns about a file the store could not use, naming it once.
fn report_problem(problem: &ScanProblem, what_happened: &str) {
    let path = problem.path.display().to_string();
    if problem.message.contains(&path) {
        output::warning(format_args!("{what_happened}: {}", problem.message));
    } else {
        output::warning(format_args!("{what_happened} {path}: {}", problem.message));
    }
}

/// `vars show --json`: the reference, the file and a preview, in this order.
#[derive(Serialize)]
struct Shown<'a> {
    #[serde(rename = "ref")]
    reference: &'a VariableRef,
    path: &'a Path,
    /// For a `file` variable: the file it refers to, and whether it changed since.
    #[serde(skip_serializing_if = "Option::is_none")]
    file: Option<&'a rlm_context_store::FileRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'a str>,
    preview: &'a str,
}

/// `vars get --count`: the size of a variable's text, in this order.
#[derive(Serialize)]
struct Counts {
    lines: u64,
    bytes: u64,
    chars: u64,
}

/// `1.5 KiB (1536 bytes)`, or just `12 bytes` when that says it all.
fn size_with_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{} ({bytes} bytes)", format::human_bytes(bytes))
    }
}

fn short_sha(reference: &VariableRef) -> String {
    match &reference.sha256 {
        Some(sha) => sha.chars().take(SHORT_SHA_CHARS).collect(),
        None => "-".to_owned(),
    }
}

/// `key` quoted for a shell command line when it needs it.
fn shell_word(key: &str) -> String {
    let plain = key
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-_./:@%+=,".contains(&b));
    if plain {
        key.to_owned()
    } else {
        format!("'{}'", key.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words_are_quoted_when_needed() {
        assert_eq!(shell_word("chunk-3"), "chunk-3");
        assert_eq!(shell_word("it's here"), r"'it'\''s here'");
    }
}
