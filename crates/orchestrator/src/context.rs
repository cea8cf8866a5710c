//! Loading the user's context into the store, and describing it without showing it.
//!
//! A `--context` file is *referenced*, not copied: it becomes a `file` variable naming
//! the file (see `rlm_context_store::FileRef`), and it is described from samples
//! ([`sample`]), so loading costs the same for 2 KB and 40 GB and the first model
//! request never waits for it. The REPL reads the file where it is, whole or — above
//! `--lazy-above` — lazily ([`LazyPolicy`]). Stdin, pipes, devices, `.json` files,
//! directories and `--copy-context` are copied into the store as before.
//!
//! Every input is checked (exists, is a file or directory as expected, fits
//! `--max-context-bytes` when it is copied or loaded whole) before anything is
//! written; copied text is streamed into the store with UTF-8 validated on the way, so
//! a decode error names the file and byte offset. Sizes known in advance are checked
//! first, and every byte copied is counted as well ([`input`]): pipes, devices and
//! stdin (`--context -`) have no size to check, and reading stops at the limit or at
//! Ctrl-C / SIGTERM. Context variables get run-scoped keys, so a bad input never
//! touches variables that were already stored; whatever a failed or stopped load
//! wrote is removed again (a half-streamed variable never leaves its temporary file).
//!
//! The description ([`ContextInfo`]) is what the model sees: type, sizes, item count
//! and a preview of at most 200 characters — its size does not depend on the context's.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use rlm_context_store::{SetOptions, Store, StoreError, VariableType};
use rlm_process::CancellationToken;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::env::{ContextShape, ContextSource};

mod input;
mod lazy;
mod sample;

pub use input::STDIN_PATH;
use input::{special_kind, Budget, Input, Stop};
pub use lazy::{LazyMode, LazyPolicy, DEFAULT_LAZY_ABOVE_BYTES};

/// Longest preview shown to the model, in characters.
pub const PREVIEW_CHARS: usize = 200;

pub use rlm_protocol::CHUNK_CHARS;

/// Default `--max-context-bytes`: 1 GiB.
pub const DEFAULT_MAX_CONTEXT_BYTES: u64 = 1 << 30;

/// How `--context-dir` becomes a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirAs {
    /// A list of file contents in lexical order of their paths.
    #[default]
    List,
    /// `{relative path: content}`.
    Dict,
    /// One string: each file preceded by a `=== path ===` line.
    Concat,
}

/// Where the context comes from (at most one of the three kinds).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSpec {
    /// `--context` files; several make a list. `-` ([`STDIN_PATH`]) is stdin.
    pub files: Vec<PathBuf>,
    /// `--context-dir`.
    pub dir: Option<PathBuf>,
    /// `--dir-as`.
    pub dir_as: DirAs,
    /// `--context-var`: an existing variable.
    pub var: Option<String>,
    /// `--max-context-bytes`: the most that is copied into the store or loaded whole.
    pub max_bytes: u64,
    /// `--copy-context`: copy `--context` files into the store instead of referencing
    /// them.
    #[serde(default)]
    pub copy: bool,
    /// `--lazy-context` and `--lazy-above`: which referenced files the REPL reads lazily.
    #[serde(default)]
    pub lazy: LazyPolicy,
}

impl ContextSpec {
    /// True when no context was given.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dir.is_none() && self.var.is_none()
    }
}

/// What the model is told about the context.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize)]
pub struct ContextInfo {
    /// `str`, `list`, `dict` or another JSON kind (`number`, …).
    pub kind: String,
    /// Characters (text) or characters of the compact JSON (other values).
    pub total_chars: u64,
    /// Bytes of the stored JSON values.
    pub total_bytes: u64,
    /// Items of a list or dict.
    pub items: Option<u64>,
    /// At most [`PREVIEW_CHARS`] characters from the start.
    pub preview: String,
    /// Where it came from, for the prompt (file names, not contents).
    pub origin: String,
    /// Text statistics of a single text context (the kernel uses them to load fast).
    pub text: Option<TextStats>,
    /// Lines of a text context, when counted or estimated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lines: Option<u64>,
    /// True when `total_chars` and `lines` are estimated from samples of a referenced
    /// file (it was not read whole).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub estimated: bool,
    /// True when the REPL reads it lazily (a view of the file, not a `str`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub lazy: bool,
    /// True when it is a file referenced where it is (not copied into the store).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub referenced: bool,
}

/// Statistics of a text gathered while streaming it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct TextStats {
    /// Unicode scalar values.
    pub chars: u64,
    /// Upper bound of the largest code point: 127, 255, 65535 or 1114111.
    pub max_char: u32,
}

/// A loaded context.
#[derive(Debug, Clone)]
pub struct LoadedContext {
    /// How the environment finds it.
    pub source: ContextSource,
    /// What the model is told.
    pub info: ContextInfo,
    /// The variables holding it.
    pub keys: Vec<String>,
}

/// Why a context could not be loaded. All of these are bad input (exit 2) except
/// [`ContextError::Cancelled`].
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// A path does not exist.
    #[error("context path {} does not exist", .0.display())]
    NotFound(PathBuf),
    /// `--context` was given a directory.
    #[error("context path {} is a directory; use --context-dir for directories", .0.display())]
    IsDirectory(PathBuf),
    /// `--context-dir` was given something else.
    #[error("{} is not a directory; use --context for files", .0.display())]
    NotDirectory(PathBuf),
    /// The inputs are larger than allowed.
    #[error("context is {size} bytes ({}), over --max-context-bytes {max}, the most that is copied or loaded whole; {hint}", .path.display())]
    TooLarge {
        /// The file or directory that crossed the limit.
        path: PathBuf,
        /// Bytes counted so far.
        size: u64,
        /// The limit.
        max: u64,
        /// What to do instead.
        hint: &'static str,
    },
    /// An input turned out larger than allowed while it was read (a pipe, device or
    /// stdin has no size to check first; a file may grow).
    #[error("context is over --max-context-bytes ({max} bytes): reading {} crossed the limit, so nothing of it was stored; raise --max-context-bytes or pass less (a regular file passed by path is referenced, not copied, and read lazily when large)", .path.display())]
    OverLimit {
        /// The input being read when the limit was crossed.
        path: PathBuf,
        /// The limit.
        max: u64,
    },
    /// Ctrl-C or SIGTERM stopped the load.
    #[error("loading the context from {} was stopped (Ctrl-C or SIGTERM); nothing of it was stored", .path.display())]
    Cancelled {
        /// The input being read.
        path: PathBuf,
    },
    /// A `--context-dir` entry is not a regular file.
    #[error("{} in --context-dir is a {kind}, not a regular file; --context-dir reads regular files only: move it out of the directory, or pass it with --context", .path.display())]
    NotRegular {
        /// The entry.
        path: PathBuf,
        /// What it is (`FIFO (named pipe)`, `character device`, …).
        kind: &'static str,
    },
    /// A text file is not UTF-8.
    #[error("context file {} is not valid UTF-8 at byte offset {offset}; convert it to UTF-8 (e.g. iconv) first", .path.display())]
    InvalidUtf8 {
        /// The file.
        path: PathBuf,
        /// Offset of the first bad byte.
        offset: u64,
    },
    /// A `.json` file does not parse.
    #[error("context file {} is not valid JSON: {message}", .path.display())]
    InvalidJson {
        /// The file.
        path: PathBuf,
        /// serde_json's message (with line and column).
        message: String,
    },
    /// A file could not be read.
    #[error("cannot read context file {}: {source}", .path.display())]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// `--context-var` names no variable.
    #[error(
        "context variable {0:?} does not exist; list variables with `rlm-orchestrate vars list`"
    )]
    MissingVariable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a run's context variables go.
#[derive(Debug, Clone)]
pub struct ContextKeys {
    /// Key of a single context; several get `-0`, `-1`, … appended.
    pub prefix: String,
    /// Their scope, e.g. `session:<run-id>`.
    pub scope: String,
}

/// Loads the context described by `spec` into `store` under `keys`. Cancelling
/// `cancel` stops the load within a read, leaving nothing of it in the store.
///
/// A `--context` file is referenced ([`Store::set_file_reference`]) and described from
/// samples, so this costs the same for any size; stdin, pipes, `.json` files,
/// directories and `--copy-context` are copied. `--max-context-bytes` bounds what is
/// copied or will be loaded whole, not what is read lazily.
pub fn load_context(
    store: &Store,
    spec: &ContextSpec,
    keys: &ContextKeys,
    cancel: &CancellationToken,
) -> Result<LoadedContext, ContextError> {
    if let Some(key) = &spec.var {
        return describe_variable(store, key, spec.lazy);
    }
    let mut budget = Budget::new(spec.max_bytes, cancel.clone());
    if let Some(dir) = &spec.dir {
        let files = collect_dir(dir, spec.max_bytes)?;
        return with_cleanup(store, |written| {
            load_dir(store, dir, &files, spec.dir_as, keys, &mut budget, written)
        });
    }
    let mut plans = Vec::with_capacity(spec.files.len());
    let mut whole = 0u64;
    for path in &spec.files {
        let plan = plan(path, spec)?;
        if !plan.is_lazy() {
            whole += plan.size();
            if whole > spec.max_bytes {
                return Err(ContextError::TooLarge {
                    path: path.clone(),
                    size: whole,
                    max: spec.max_bytes,
                    hint: plan.over_limit_hint(),
                });
            }
        }
        plans.push(plan);
    }
    with_cleanup(store, |written| {
        load_files(store, &spec.files, &plans, keys, &mut budget, written)
    })
}

/// How one `--context` file becomes a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Plan {
    /// A `file` variable referring to it, read whole or lazily by the REPL.
    Reference { size: u64, lazy: bool },
    /// Copied into the store (counted while read: pipes and stdin have no size).
    Copy { size: u64, why: CopyReason },
}

/// Why a file is copied rather than referenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CopyReason {
    /// `--copy-context`.
    Asked,
    /// Stdin, a pipe or a device: there is no file to refer to.
    NotAFile,
    /// A `.json` file: parsed into a value.
    Json,
}

impl Plan {
    fn size(self) -> u64 {
        match self {
            Self::Reference { size, .. } | Self::Copy { size, .. } => size,
        }
    }

    fn is_lazy(self) -> bool {
        matches!(self, Self::Reference { lazy: true, .. })
    }

    /// What the error for a context over `--max-context-bytes` suggests.
    fn over_limit_hint(self) -> &'static str {
        match self {
            Self::Reference { .. } => {
                "read it lazily instead (--lazy-context always, or auto with a lower --lazy-above), or raise --max-context-bytes"
            }
            Self::Copy {
                why: CopyReason::Asked,
                ..
            } => "drop --copy-context so the file is referenced and read lazily, or raise --max-context-bytes",
            Self::Copy {
                why: CopyReason::Json,
                ..
            } => "a .json context is parsed and loaded whole: raise --max-context-bytes, or give the data as text (another extension) to read it lazily",
            Self::Copy {
                why: CopyReason::NotAFile,
                ..
            } => "save it to a file and pass its path (files are referenced and read lazily), or raise --max-context-bytes",
        }
    }
}

/// Decides how `path` is loaded (checking it exists and is not a directory).
fn plan(path: &Path, spec: &ContextSpec) -> Result<Plan, ContextError> {
    let (size, regular) = check_file(path)?;
    let why = if spec.copy {
        Some(CopyReason::Asked)
    } else if !regular {
        Some(CopyReason::NotAFile)
    } else if is_json_file(path) {
        Some(CopyReason::Json)
    } else {
        None
    };
    Ok(match why {
        Some(why) => Plan::Copy { size, why },
        None => Plan::Reference {
            size,
            lazy: spec.lazy.is_lazy(size),
        },
    })
}

/// Runs a load; on failure removes every variable it wrote.
fn with_cleanup(
    store: &Store,
    load: impl FnOnce(&mut Vec<String>) -> Result<LoadedContext, ContextError>,
) -> Result<LoadedContext, ContextError> {
    let mut written = Vec::new();
    let result = load(&mut written);
    if result.is_err() {
        for key in &written {
            let _ = store.delete(key);
        }
    }
    result
}

/// The size `path` says it has (0 for stdin, pipes and devices: those are counted
/// while they are read), and whether it is a regular file.
fn check_file(path: &Path) -> Result<(u64, bool), ContextError> {
    if path.as_os_str() == STDIN_PATH {
        return Ok((0, false));
    }
    let meta = fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ContextError::NotFound(path.to_owned()),
        _ => ContextError::Unreadable {
            path: path.to_owned(),
            source: e,
        },
    })?;
    if meta.is_dir() {
        return Err(ContextError::IsDirectory(path.to_owned()));
    }
    Ok(if meta.is_file() {
        (meta.len(), true)
    } else {
        (0, false)
    })
}

/// Opens an input under `budget`, naming it in errors.
fn open_input<'b>(path: &Path, budget: &'b mut Budget) -> Result<Input<'b>, ContextError> {
    if budget.is_cancelled() {
        return Err(ContextError::Cancelled {
            path: path.to_owned(),
        });
    }
    Input::open(path, budget).map_err(|e| ContextError::Unreadable {
        path: path.to_owned(),
        source: e,
    })
}

/// The error for a read of `path` that the budget stopped, if it did.
fn stopped(path: &Path, budget: &Budget) -> Option<ContextError> {
    budget.stopped().map(|stop| match stop {
        Stop::Cancelled => ContextError::Cancelled {
            path: path.to_owned(),
        },
        Stop::OverLimit => ContextError::OverLimit {
            path: path.to_owned(),
            max: budget.max(),
        },
    })
}

/// How an input is named to the model and in messages.
fn input_name(path: &Path) -> String {
    if path.as_os_str() == STDIN_PATH {
        "stdin".to_owned()
    } else {
        path.display().to_string()
    }
}

/// How a context slot is stored: in the run's scope, and, when it is a copy of a file
/// or directory the user still has, without the fsyncs (a 512 MiB copy spent seconds
/// waiting for the disk; a power failure loses the run anyway, not the input). Stdin
/// is kept durable: it cannot be read again.
fn copy_options(keys: &ContextKeys, source: &Path) -> SetOptions {
    let options = SetOptions::default().scope(keys.scope.clone());
    if source.as_os_str() == STDIN_PATH {
        options
    } else {
        options.durability(rlm_context_store::Durability::Bulk)
    }
}

fn is_json_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

fn load_files(
    store: &Store,
    files: &[PathBuf],
    plans: &[Plan],
    keys: &ContextKeys,
    budget: &mut Budget,
    written: &mut Vec<String>,
) -> Result<LoadedContext, ContextError> {
    let single = files.len() == 1;
    let mut paths = Vec::new();
    let mut infos = Vec::new();
    let mut referenced = Vec::new();
    for (i, (path, plan)) in files.iter().zip(plans).enumerate() {
        let key = if single {
            keys.prefix.clone()
        } else {
            format!("{}-{i}", keys.prefix)
        };
        let info = match *plan {
            Plan::Reference { size, lazy } => {
                if budget.is_cancelled() {
                    return Err(ContextError::Cancelled { path: path.clone() });
                }
                let sampled = sample::sample(path, size)?;
                let options = SetOptions::default().scope(keys.scope.clone());
                let (_, file) =
                    store
                        .set_file_reference(&key, path, options)
                        .map_err(|e| match e {
                            StoreError::Io { source, .. } => ContextError::Unreadable {
                                path: path.clone(),
                                source,
                            },
                            other => ContextError::Store(other),
                        })?;
                referenced.push(file.path);
                referenced_info(sampled, size, lazy, input_name(path))
            }
            Plan::Copy {
                why: CopyReason::Json,
                ..
            } => {
                let value = read_json_file(path, budget)?;
                let info = describe_value(&value, input_name(path));
                store.set(&key, value, copy_options(keys, path))?;
                info
            }
            Plan::Copy { .. } => copy_text_file(store, path, &key, keys, budget)?,
        };
        written.push(key.clone());
        paths.push(store.persist_for_sub_agent(&key)?);
        infos.push(info);
    }
    let info = if single {
        infos
            .pop()
            .unwrap_or_else(|| describe_value(&Value::Null, String::new()))
    } else {
        combine_list(infos)
    };
    let shape = if single {
        ContextShape::Single
    } else {
        ContextShape::List
    };
    let mut source = source(shape, paths, &info, written);
    source.referenced = referenced;
    Ok(LoadedContext {
        source,
        info,
        keys: written.clone(),
    })
}

/// What the model is told about a referenced file.
fn referenced_info(sampled: sample::Sampled, size: u64, lazy: bool, origin: String) -> ContextInfo {
    ContextInfo {
        kind: "str".into(),
        total_chars: sampled.chars,
        total_bytes: size,
        items: None,
        preview: sampled.preview,
        origin,
        text: None,
        lines: Some(sampled.lines),
        estimated: !sampled.exact,
        lazy,
        referenced: true,
    }
}

/// Streams a text input into the store (stdin, a pipe, a device, `--copy-context`).
fn copy_text_file(
    store: &Store,
    path: &Path,
    key: &str,
    keys: &ContextKeys,
    budget: &mut Budget,
) -> Result<ContextInfo, ContextError> {
    let mut reader = StatsReader::new(open_input(path, budget)?);
    let name = input_name(path);
    let stored = store.set_text_from_reader(key, &mut reader, &name, copy_options(keys, path));
    let reference = stored.map_err(|e| {
        if let Some(stop) = stopped(path, reader.inner.budget()) {
            return stop;
        }
        match e {
            StoreError::InvalidUtf8 { offset, .. } => ContextError::InvalidUtf8 {
                path: path.to_owned(),
                offset,
            },
            StoreError::Io {
                action: "read",
                source,
                ..
            } => ContextError::Unreadable {
                path: path.to_owned(),
                source,
            },
            other => ContextError::Store(other),
        }
    })?;
    let stats = reader.stats();
    Ok(ContextInfo {
        kind: "str".into(),
        total_chars: stats.chars,
        total_bytes: reference.size_bytes,
        items: None,
        preview: reader.preview(),
        origin: name,
        text: Some(stats),
        ..ContextInfo::default()
    })
}

fn source(
    shape: ContextShape,
    files: Vec<PathBuf>,
    info: &ContextInfo,
    keys: &[String],
) -> ContextSource {
    ContextSource {
        shape,
        files,
        keys: keys.to_vec(),
        chunk_chars: CHUNK_CHARS,
        chars: info.text.map(|t| t.chars),
        max_char: info.text.map(|t| t.max_char),
        referenced: Vec::new(),
    }
}

fn combine_list(infos: Vec<ContextInfo>) -> ContextInfo {
    let items = infos.len() as u64;
    let total_chars = infos.iter().map(|i| i.total_chars).sum();
    let total_bytes = infos.iter().map(|i| i.total_bytes).sum();
    let origin = infos
        .iter()
        .map(|i| i.origin.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    let preview = infos.first().map(|i| i.preview.clone()).unwrap_or_default();
    ContextInfo {
        kind: "list".into(),
        total_chars,
        total_bytes,
        items: Some(items),
        preview,
        origin,
        text: None,
        lines: None,
        estimated: infos.iter().any(|i| i.estimated),
        lazy: infos.iter().any(|i| i.lazy),
        referenced: infos.iter().any(|i| i.referenced),
    }
}

fn read_json_file(path: &Path, budget: &mut Budget) -> Result<Value, ContextError> {
    let mut input = open_input(path, budget)?;
    // serde_json reads a byte at a time: buffer in front of the counting reader.
    let parsed = serde_json::from_reader(io::BufReader::with_capacity(1 << 16, &mut input));
    parsed.map_err(|e| {
        if let Some(stop) = stopped(path, input.budget()) {
            stop
        } else if e.is_io() {
            ContextError::Unreadable {
                path: path.to_owned(),
                source: io::Error::other(e.to_string()),
            }
        } else {
            ContextError::InvalidJson {
                path: path.to_owned(),
                message: e.to_string(),
            }
        }
    })
}

/// Every regular file under `dir` (hidden entries skipped), sorted by relative path.
fn collect_dir(dir: &Path, max_bytes: u64) -> Result<Vec<(String, PathBuf)>, ContextError> {
    let meta = fs::metadata(dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => ContextError::NotFound(dir.to_owned()),
        _ => ContextError::Unreadable {
            path: dir.to_owned(),
            source: e,
        },
    })?;
    if !meta.is_dir() {
        return Err(ContextError::NotDirectory(dir.to_owned()));
    }
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    let mut total = 0u64;
    while let Some(current) = pending.pop() {
        let entries = fs::read_dir(&current).map_err(|e| ContextError::Unreadable {
            path: current.clone(),
            source: e,
        })?;
        for entry in entries {
            let entry = entry.map_err(|e| ContextError::Unreadable {
                path: current.clone(),
                source: e,
            })?;
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            let meta = fs::metadata(&path).map_err(|e| ContextError::Unreadable {
                path: path.clone(),
                source: e,
            })?;
            if meta.is_dir() {
                pending.push(path);
            } else if !meta.is_file() {
                // A FIFO could block the load and a device never ends; neither is a
                // document of the directory.
                return Err(ContextError::NotRegular {
                    kind: special_kind(&meta),
                    path,
                });
            } else {
                total += meta.len();
                if total > max_bytes {
                    return Err(ContextError::TooLarge {
                        path: dir.to_owned(),
                        size: total,
                        max: max_bytes,
                        hint: "--context-dir copies every file: pass the large ones with --context (referenced, and read lazily when large), or raise --max-context-bytes",
                    });
                }
                let relative = path
                    .strip_prefix(dir)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned();
                files.push((relative, path));
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Reads a whole text file of a directory, counted against `budget`.
fn read_text_file(path: &Path, budget: &mut Budget) -> Result<String, ContextError> {
    let mut input = open_input(path, budget)?;
    let mut bytes = Vec::new();
    if let Err(e) = input.read_to_end(&mut bytes) {
        return Err(
            stopped(path, input.budget()).unwrap_or(ContextError::Unreadable {
                path: path.to_owned(),
                source: e,
            }),
        );
    }
    String::from_utf8(bytes).map_err(|e| ContextError::InvalidUtf8 {
        path: path.to_owned(),
        offset: e.utf8_error().valid_up_to() as u64,
    })
}

fn load_dir(
    store: &Store,
    dir: &Path,
    files: &[(String, PathBuf)],
    dir_as: DirAs,
    keys: &ContextKeys,
    budget: &mut Budget,
    written: &mut Vec<String>,
) -> Result<LoadedContext, ContextError> {
    let key = keys.prefix.as_str();
    let value = match dir_as {
        DirAs::List => {
            let mut items = Vec::with_capacity(files.len());
            for (_, path) in files {
                items.push(Value::String(read_text_file(path, budget)?));
            }
            Value::Array(items)
        }
        DirAs::Dict => {
            let mut map = Map::new();
            for (relative, path) in files {
                map.insert(
                    relative.clone(),
                    Value::String(read_text_file(path, budget)?),
                );
            }
            Value::Object(map)
        }
        DirAs::Concat => {
            let mut text = String::new();
            for (relative, path) in files {
                text.push_str(&format!("=== {relative} ===\n"));
                text.push_str(&read_text_file(path, budget)?);
                if !text.ends_with('\n') {
                    text.push('\n');
                }
            }
            Value::String(text)
        }
    };
    let mut info = describe_value(&value, format!("{} ({} files)", dir.display(), files.len()));
    let reference = store.set(key, value, copy_options(keys, dir))?;
    written.push(key.to_owned());
    info.total_bytes = reference.size_bytes;
    let path = store.persist_for_sub_agent(key)?;
    Ok(LoadedContext {
        source: source(ContextShape::Single, vec![path], &info, written),
        info,
        keys: written.clone(),
    })
}

/// Describes an existing variable used as the context (`--context-var`). Text is
/// measured by streaming it, never by loading it whole.
fn describe_variable(
    store: &Store,
    key: &str,
    lazy: LazyPolicy,
) -> Result<LoadedContext, ContextError> {
    let reference = store.reference(key).map_err(|e| match e {
        StoreError::NotFound { .. } => ContextError::MissingVariable(key.to_owned()),
        other => ContextError::Store(other),
    })?;
    let path = store.persist_for_sub_agent(key)?;
    let origin = format!("variable {key:?}");
    if let Some(file) = store.unchanged_file_reference(key)? {
        let sampled = sample::sample(&file.path, file.size)?;
        let origin = format!("{origin}, the file {}", file.path.display());
        let info = referenced_info(sampled, file.size, lazy.is_lazy(file.size), origin);
        let mut source = source(ContextShape::Single, vec![path], &info, &[key.to_owned()]);
        source.referenced = vec![file.path];
        return Ok(LoadedContext {
            source,
            info,
            keys: vec![key.to_owned()],
        });
    }
    let info =
        if reference.var_type == VariableType::Text || reference.var_type == VariableType::Stream {
            let mut counter = StatsWriter::default();
            store.write_value_to(key, &mut counter, false)?;
            match store.get(key).ok().as_deref() {
                Some(Value::String(_)) | None => ContextInfo {
                    kind: "str".into(),
                    total_chars: counter.stats.chars,
                    total_bytes: reference.size_bytes,
                    items: None,
                    preview: counter.preview(),
                    origin,
                    text: Some(counter.stats),
                    ..ContextInfo::default()
                },
                Some(other) => describe_value(other, origin),
            }
        } else {
            let value = store.get(key)?;
            let mut info = describe_value(&value, origin);
            info.total_bytes = reference.size_bytes;
            info
        };
    Ok(LoadedContext {
        source: source(ContextShape::Single, vec![path], &info, &[key.to_owned()]),
        info,
        keys: vec![key.to_owned()],
    })
}

/// Describes an in-memory value.
pub fn describe_value(value: &Value, origin: String) -> ContextInfo {
    let (kind, items) = match value {
        Value::String(_) => ("str", None),
        Value::Array(a) => ("list", Some(a.len() as u64)),
        Value::Object(o) => ("dict", Some(o.len() as u64)),
        Value::Number(_) => ("number", None),
        Value::Bool(_) => ("bool", None),
        Value::Null => ("none", None),
    };
    let (total_chars, preview, text) = match value {
        Value::String(s) => {
            let chars = s.chars().count() as u64;
            (
                chars,
                s.chars().take(PREVIEW_CHARS).collect(),
                Some(TextStats {
                    chars,
                    max_char: max_char_class(s),
                }),
            )
        }
        other => {
            let compact = other.to_string();
            (
                compact.chars().count() as u64,
                compact.chars().take(PREVIEW_CHARS).collect(),
                None,
            )
        }
    };
    let total_bytes = serde_json::to_vec(value)
        .map(|v| v.len() as u64)
        .unwrap_or(0);
    ContextInfo {
        kind: kind.into(),
        total_chars,
        total_bytes,
        items,
        preview,
        origin,
        text,
        ..ContextInfo::default()
    }
}

fn max_char_class(s: &str) -> u32 {
    match s.chars().map(u32::from).max().unwrap_or(0) {
        0..=0x7f => 0x7f,
        0x80..=0xff => 0xff,
        0x100..=0xffff => 0xffff,
        _ => 0x10ffff,
    }
}

/// Tracks character count, code point class and a preview of UTF-8 bytes passing by.
#[derive(Debug, Default)]
struct Stats {
    stats: TextStats,
    head: Vec<u8>,
}

impl Stats {
    fn observe(&mut self, bytes: &[u8]) {
        if self.head.len() < PREVIEW_CHARS * 4 {
            let take = (PREVIEW_CHARS * 4 - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..take]);
        }
        let mut class = self.stats.max_char;
        for &b in bytes {
            if b & 0xc0 != 0x80 {
                self.stats.chars += 1;
            }
            // The lead byte of a sequence bounds its code point.
            class = class.max(match b {
                0x00..=0xbf => 0x7f, // ASCII or a continuation byte
                0xc0..=0xc3 => 0xff,
                0xc4..=0xef => 0xffff,
                _ => 0x10ffff,
            });
        }
        self.stats.max_char = class;
    }

    fn preview(&self) -> String {
        let text = String::from_utf8_lossy(&self.head);
        text.trim_end_matches('\u{fffd}')
            .chars()
            .take(PREVIEW_CHARS)
            .collect()
    }
}

/// A reader that gathers [`Stats`] of what it reads.
struct StatsReader<R> {
    inner: R,
    stats: Stats,
}

impl<R: Read> StatsReader<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            stats: Stats::default(),
        }
    }
    fn stats(&self) -> TextStats {
        let mut stats = self.stats.stats;
        stats.max_char = stats.max_char.max(0x7f);
        stats
    }
    fn preview(&self) -> String {
        self.stats.preview()
    }
}

impl<R: Read> Read for StatsReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.stats.observe(&buf[..n]);
        Ok(n)
    }
}

/// A writer that only gathers [`Stats`].
#[derive(Default)]
struct StatsWriter {
    stats: TextStats,
    inner: Stats,
}

impl StatsWriter {
    fn preview(&self) -> String {
        self.inner.preview()
    }
}

impl Write for StatsWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.inner.observe(buf);
        self.stats = self.inner.stats;
        self.stats.max_char = self.stats.max_char.max(0x7f);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("data")).unwrap();
        (dir, store)
    }

    fn test_keys(prefix: &str) -> ContextKeys {
        ContextKeys {
            prefix: prefix.into(),
            scope: "session:test".into(),
        }
    }

    fn spec(files: Vec<PathBuf>) -> ContextSpec {
        ContextSpec {
            files,
            max_bytes: DEFAULT_MAX_CONTEXT_BYTES,
            ..ContextSpec::default()
        }
    }

    #[test]
    fn a_text_file_is_referenced_and_described_from_samples() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, format!("héllo\n{}", "x".repeat(1000))).unwrap();
        let loaded = load_context(
            &store,
            &spec(vec![path.clone()]),
            &test_keys("run-1-context"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "str");
        assert_eq!(
            (loaded.info.total_chars, loaded.info.lines),
            (1006, Some(2))
        );
        assert!(!loaded.info.estimated && !loaded.info.lazy);
        assert_eq!(loaded.info.total_bytes, 1007);
        assert!(loaded.info.preview.starts_with("héllo\n"));
        assert_eq!(loaded.info.text, None);
        let reference = store.reference("run-1-context").unwrap();
        assert_eq!(reference.var_type, VariableType::File);
        assert!(reference.size_bytes < 500, "a reference, not a copy");
        let canonical = fs::canonicalize(&path).unwrap();
        assert_eq!(loaded.source.referenced, vec![canonical.clone()]);
        assert_eq!(
            store.file_reference("run-1-context").unwrap().unwrap().path,
            canonical
        );

        // Above --lazy-above it is lazy; --lazy-context never loads it whole, within
        // --max-context-bytes, whose error then names the lazy way out.
        let mut lazy = spec(vec![path.clone()]);
        lazy.lazy.above_bytes = 100;
        let loaded =
            load_context(&store, &lazy, &test_keys("lazy"), &CancellationToken::new()).unwrap();
        assert!(loaded.info.lazy);
        let mut never = spec(vec![path]);
        never.lazy.mode = LazyMode::Never;
        never.max_bytes = 100;
        let err = load_context(
            &store,
            &never,
            &test_keys("never"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("read it lazily instead"), "{err}");
        assert!(!store.has("never"));
    }

    #[test]
    fn a_copied_text_file_is_streamed_and_described() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, format!("héllo\n{}", "x".repeat(1000))).unwrap();
        let mut copy = spec(vec![path]);
        copy.copy = true;
        let loaded = load_context(
            &store,
            &copy,
            &test_keys("run-1-context"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "str");
        assert_eq!(loaded.info.total_chars, 1006);
        assert_eq!(loaded.info.preview.chars().count(), PREVIEW_CHARS);
        assert!(loaded.info.preview.starts_with("héllo\n"));
        assert_eq!(
            loaded.info.text,
            Some(TextStats {
                chars: 1006,
                max_char: 0xff
            })
        );
        assert_eq!(loaded.source.shape, ContextShape::Single);
        assert_eq!(
            store.get("run-1-context").unwrap().as_str().map(str::len),
            Some(1007)
        );
    }

    #[test]
    fn several_files_make_a_list() {
        let (dir, store) = store();
        let a = dir.path().join("a.md");
        let b = dir.path().join("b.json");
        fs::write(&a, "alpha").unwrap();
        fs::write(&b, r#"{"k": [1, 2]}"#).unwrap();
        let loaded = load_context(
            &store,
            &spec(vec![a, b]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.kind, "list");
        assert_eq!(loaded.info.items, Some(2));
        assert_eq!(loaded.source.files.len(), 2);
        assert_eq!(loaded.keys, vec!["ctx-0", "ctx-1"]);
        assert_eq!(
            *store.get("ctx-1").unwrap(),
            serde_json::json!({"k": [1, 2]})
        );
    }

    #[test]
    fn bad_inputs_are_named_and_leave_nothing_behind() {
        let (dir, store) = store();
        store
            .set("keep", serde_json::json!("me"), SetOptions::default())
            .unwrap();
        let good = dir.path().join("good.txt");
        fs::write(&good, "fine").unwrap();
        let bad = dir.path().join("bad.txt");
        let mut bytes = b"abc".to_vec();
        bytes.push(0xff);
        fs::write(&bad, bytes).unwrap();
        let err = load_context(
            &store,
            &spec(vec![good.clone(), bad]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(
            matches!(err, ContextError::InvalidUtf8 { offset: 3, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("bad.txt"));
        assert!(!store.has("ctx-0"), "partial load was not cleaned up");
        assert!(store.has("keep"));

        let err = load_context(
            &store,
            &spec(vec![dir.path().join("nope.txt")]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::NotFound(_)));
        let err = load_context(
            &store,
            &spec(vec![dir.path().to_owned()]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::IsDirectory(_)));
        let json = dir.path().join("bad.json");
        fs::write(&json, "{\"a\": ").unwrap();
        let err = load_context(
            &store,
            &spec(vec![json]),
            &test_keys("ctx"),
            &CancellationToken::new(),
        )
        .unwrap_err();
        assert!(matches!(err, ContextError::InvalidJson { .. }), "{err}");
        let mut small = spec(vec![good]);
        small.max_bytes = 2;
        assert!(matches!(
            load_context(&store, &small, &test_keys("ctx"), &CancellationToken::new()).unwrap_err(),
            ContextError::TooLarge { .. }
        ));
        assert_eq!(store.list(&Default::default()).len(), 1);
    }

    #[test]
    fn a_cancelled_load_stores_nothing_and_says_so() {
        let (dir, store) = store();
        let path = dir.path().join("log.txt");
        fs::write(&path, "some text").unwrap();
        let cancel = CancellationToken::new();
        cancel.cancel();
        let err = load_context(&store, &spec(vec![path]), &test_keys("ctx"), &cancel).unwrap_err();
        assert!(matches!(err, ContextError::Cancelled { .. }), "{err}");
        assert!(store.list(&Default::default()).is_empty());
    }

    #[test]
    fn devices_are_counted_against_the_limit_whatever_their_shape() {
        let (dir, store) = store();
        let mut over = spec(vec![PathBuf::from("/dev/zero")]);
        over.max_bytes = 1 << 20;
        let err =
            load_context(&store, &over, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(
            matches!(err, ContextError::OverLimit { max, .. } if max == 1 << 20),
            "{err}"
        );
        assert!(err.to_string().contains("--max-context-bytes"));
        // A `.json` pipe goes through the same count (its parse would never end).
        let json = dir.path().join("endless.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&json)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = {
            let json = json.clone();
            std::thread::spawn(move || {
                let mut fifo = fs::OpenOptions::new().write(true).open(json).unwrap();
                let _ = fifo.write_all(b"[");
                while fifo.write_all(&b"1,".repeat(4096)).is_ok() {}
            })
        };
        let mut over = spec(vec![json]);
        over.max_bytes = 1 << 20;
        let err =
            load_context(&store, &over, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(matches!(err, ContextError::OverLimit { .. }), "{err}");
        writer.join().unwrap();
        // Two inputs share one budget: each fits, together they do not.
        let a = dir.path().join("a.txt");
        let b = dir.path().join("b.txt");
        fs::write(&a, "x".repeat(600)).unwrap();
        fs::write(&b, "y".repeat(600)).unwrap();
        let mut both = spec(vec![a, b]);
        both.max_bytes = 1000;
        let err =
            load_context(&store, &both, &test_keys("ctx"), &CancellationToken::new()).unwrap_err();
        assert!(matches!(err, ContextError::TooLarge { .. }), "{err}");
        assert!(
            store.list(&Default::default()).is_empty(),
            "a failed load left variables"
        );
        let leftovers: Vec<_> = fs::read_dir(dir.path().join("data/variables"))
            .unwrap()
            .collect();
        assert!(
            leftovers.is_empty(),
            "a failed load left files: {leftovers:?}"
        );
    }

    #[test]
    fn directories_load_in_lexical_order_in_every_shape() {
        let (dir, store) = store();
        let root = dir.path().join("repo");
        fs::create_dir_all(root.join("src")).unwrap();
        fs::create_dir_all(root.join(".git")).unwrap();
        fs::write(root.join("b.txt"), "B").unwrap();
        fs::write(root.join("src/a.rs"), "A").unwrap();
        fs::write(root.join(".git/HEAD"), "ignored").unwrap();
        let mut spec = ContextSpec {
            dir: Some(root),
            max_bytes: 1 << 20,
            ..ContextSpec::default()
        };
        load_context(&store, &spec, &test_keys("list"), &CancellationToken::new()).unwrap();
        assert_eq!(*store.get("list").unwrap(), serde_json::json!(["B", "A"]));
        spec.dir_as = DirAs::Dict;
        let loaded =
            load_context(&store, &spec, &test_keys("dict"), &CancellationToken::new()).unwrap();
        assert_eq!(
            *store.get("dict").unwrap(),
            serde_json::json!({"b.txt": "B", "src/a.rs": "A"})
        );
        assert_eq!(loaded.info.items, Some(2));
        spec.dir_as = DirAs::Concat;
        load_context(
            &store,
            &spec,
            &test_keys("concat"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(
            *store.get("concat").unwrap(),
            serde_json::json!("=== b.txt ===\nB\n=== src/a.rs ===\nA\n")
        );
    }

    #[test]
    fn an_existing_variable_is_described_by_streaming() {
        let (_dir, store) = store();
        store
            .set(
                "big",
                serde_json::json!("z".repeat(5000)),
                SetOptions::default(),
            )
            .unwrap();
        let spec = ContextSpec {
            var: Some("big".into()),
            max_bytes: 1,
            ..ContextSpec::default()
        };
        let loaded = load_context(
            &store,
            &spec,
            &test_keys("unused"),
            &CancellationToken::new(),
        )
        .unwrap();
        assert_eq!(loaded.info.total_chars, 5000);
        assert_eq!(loaded.keys, vec!["big"]);
        let missing = ContextSpec {
            var: Some("nope".into()),
            ..ContextSpec::default()
        };
        assert!(matches!(
            load_context(&store, &missing, &test_keys("x"), &CancellationToken::new()).unwrap_err(),
            ContextError::MissingVariable(_)
        ));
    }
}
