//! Deciding, before anything is read or written, how each `--context` file is loaded:
//! referenced where it is (read whole or lazily by the REPL) or copied into the store,
//! and checking that what will be copied or loaded whole fits `--max-context-bytes`.

use std::fs;
use std::io;
use std::path::Path;

use super::budget::check_known_size;
use super::error::ContextError;
use super::input::STDIN_PATH;
use super::spec::ContextSpec;

/// How one `--context` file becomes a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Plan {
    /// A `file` variable referring to it, read whole or lazily by the REPL.
    Reference { size: u64, lazy: bool },
    /// Copied into the store (counted while read: pipes and stdin have no size).
    Copy { size: u64, why: CopyReason },
}

/// Why a file is copied rather than referenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CopyReason {
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

/// Plans every `--context` file of `spec`, one [`Plan`] per file in order, failing
/// before anything is read when what is copied or loaded whole is over
/// `--max-context-bytes` (what is read lazily does not count).
pub(super) fn plan_files(spec: &ContextSpec) -> Result<Vec<Plan>, ContextError> {
    let mut plans = Vec::with_capacity(spec.files.len());
    let mut whole = 0u64;
    for path in &spec.files {
        let plan = plan_file(path, spec)?;
        if !plan.is_lazy() {
            whole += plan.size();
            check_known_size(path, whole, spec.max_bytes, plan.over_limit_hint())?;
        }
        plans.push(plan);
    }
    Ok(plans)
}

/// Decides how `path` is loaded (checking it exists and is not a directory).
fn plan_file(path: &Path, spec: &ContextSpec) -> Result<Plan, ContextError> {
    let (size, regular) = stat_input(path)?;
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

/// The size `path` says it has (0 for stdin, pipes and devices: those are counted
/// while they are read), and whether it is a regular file.
fn stat_input(path: &Path) -> Result<(u64, bool), ContextError> {
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

/// True for a `.json` file (any case), which is parsed rather than referenced.
fn is_json_file(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_referenced_and_json_pipes_and_asked_copies_are_copied() {
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("a.txt");
        let json = dir.path().join("b.JSON");
        fs::write(&text, "0123456789").unwrap();
        fs::write(&json, "[1]").unwrap();
        let spec = ContextSpec::default();
        assert_eq!(
            plan_file(&text, &spec).unwrap(),
            Plan::Reference {
                size: 10,
                lazy: false
            }
        );
        assert_eq!(
            plan_file(&json, &spec).unwrap(),
            Plan::Copy {
                size: 3,
                why: CopyReason::Json
            }
        );
        assert_eq!(
            plan_file(Path::new(STDIN_PATH), &spec).unwrap(),
            Plan::Copy {
                size: 0,
                why: CopyReason::NotAFile
            }
        );
        let copy = ContextSpec {
            copy: true,
            ..ContextSpec::default()
        };
        assert_eq!(
            plan_file(&text, &copy).unwrap(),
            Plan::Copy {
                size: 10,
                why: CopyReason::Asked
            }
        );
    }
}
