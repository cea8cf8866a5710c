//! `--sandbox`: what the Python kernel may read, write and reach, and how it is started
//! confined (through the `rlm-orchestrate sandbox-exec` launcher).
//!
//! The kernel reads the system and interpreter directories and the store's variable
//! files (where `context` comes from), writes only a private temporary directory that
//! is its `TMPDIR` and working directory, opens no network socket and runs under
//! rlimits; that directory is a tmpfs of its own, in a private mount namespace where the
//! system allows one, so all its files together are bounded (the rlimit bounds one file),
//! and the run's watchdog removes it if the orchestrator is killed. Files that `file` variables refer to are read where they are, so they are
//! readable too, and a lazily read one is mapped: its size is added to the address
//! space the kernel may use. Everything else it needs (`store.*`, sub-calls, agents) goes through host
//! calls on its pipes, which stay open.

use super::error::KernelError;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rlm_sandbox::{Limits, Mode, Policy, PrivateTmp, Support};
use serde::{Deserialize, Serialize};

use rlm_env::{ContextSource, EnvConfig};

/// Default floor of `--kernel-memory-mb`: 4 GiB.
const MEMORY_FLOOR_BYTES: u64 = 4 << 30;
/// Default memory: this many times the context, when that is more than the floor.
const MEMORY_CONTEXT_FACTOR: u64 = 3;
/// Floor of the largest file the kernel may write: 1 GiB (or twice the context).
const FILE_SIZE_FLOOR_BYTES: u64 = 1 << 30;
/// Open files of a confined kernel.
const OPEN_FILES: u64 = 4096;
/// Processes of a confined kernel's user, where that binds (not for root).
const PROCESSES: u64 = 512;

/// How the kernel is confined: `--sandbox`, `--kernel-memory-mb` and the launcher.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelSandbox {
    /// `--sandbox`.
    pub mode: Mode,
    /// The `rlm-orchestrate` executable whose `sandbox-exec` confines the kernel;
    /// `None` (a library user without one) runs it unconfined.
    pub launcher: Option<PathBuf>,
    /// `--kernel-memory-mb`, in bytes; `None`: 4 GiB or 3× the context, whichever is
    /// larger.
    pub memory_bytes: Option<u64>,
}

impl KernelSandbox {
    /// No confinement (the library's default; the command line's is `auto`).
    pub fn off() -> Self {
        Self {
            mode: Mode::Off,
            launcher: None,
            memory_bytes: None,
        }
    }
}

/// How one kernel start is confined.
pub(super) struct Confined {
    /// The program to start instead of the interpreter, and its arguments before the
    /// interpreter's own.
    pub program: OsString,
    /// Arguments: the launcher's, then the interpreter and its arguments.
    pub args: Vec<OsString>,
    /// The private temporary directory (removed when dropped, after the kernel).
    pub tmp: tempfile::TempDir,
}

/// The kernel's confinement for this start: `Ok(None)` when it runs unconfined (mode
/// `off`, or `auto` without a launcher), with `notice` saying why when it matters.
pub(super) fn confine(
    sandbox: &KernelSandbox,
    config: &EnvConfig,
    python: &Path,
    python_args: &[OsString],
    more_contexts: &[ContextSource],
) -> Result<Option<Confined>, KernelError> {
    if sandbox.mode == Mode::Off {
        return Ok(None);
    }
    let Some(launcher) = &sandbox.launcher else {
        return match sandbox.mode {
            Mode::Strict => Err(KernelError::NoLauncher),
            _ => Ok(None),
        };
    };
    let tmp = tempfile::Builder::new()
        .prefix("rlm-kernel-")
        .tempdir()
        .map_err(|source| KernelError::TempDir { source })?;
    // Removed by the run's watchdog if the orchestrator is killed before it can (and
    // by a later run if the watchdog is killed too).
    #[cfg(target_os = "linux")]
    rlm_process::remove_at_exit(tmp.path());
    let policy = kernel_policy(sandbox, config, python, tmp.path(), more_contexts);
    let (program, args) =
        rlm_sandbox::wrap_command(launcher, &policy, python.as_os_str(), python_args);
    Ok(Some(Confined { program, args, tmp }))
}

/// What a confined kernel may do.
fn kernel_policy(
    sandbox: &KernelSandbox,
    config: &EnvConfig,
    python: &Path,
    tmp: &Path,
    more_contexts: &[ContextSource],
) -> Policy {
    let memory = KernelMemory::of(sandbox, config, more_contexts);
    let context_bytes = memory.whole_bytes;
    let mut read = Policy::system_read_paths();
    read.extend(interpreter_dirs(python));
    read.push(config.data_dir.join(rlm_context_store::VARIABLES_DIR));
    read.extend(
        sources(config, more_contexts)
            .flat_map(|source| source.referenced.iter())
            .cloned(),
    );
    let file_size_bytes = FILE_SIZE_FLOOR_BYTES.max(context_bytes.saturating_mul(2));
    Policy {
        mode: sandbox.mode,
        read,
        write: vec![tmp.to_owned(), PathBuf::from("/dev/null")],
        network: false,
        connect_ports: Vec::new(),
        kill_on_network: false,
        read_own_proc: true,
        // All its files together hold no more than its largest file may.
        private_tmp: Some(PrivateTmp {
            path: tmp.to_owned(),
            size_bytes: file_size_bytes,
        }),
        limits: Limits {
            address_space_bytes: Some(memory.address_space_bytes()),
            file_size_bytes: Some(file_size_bytes),
            open_files: Some(OPEN_FILES),
            processes: (!rlm_sandbox::running_as_root()).then_some(PROCESSES),
        },
    }
}

/// Every context source a kernel loads.
fn sources<'a>(
    config: &'a EnvConfig,
    more_contexts: &'a [ContextSource],
) -> impl Iterator<Item = &'a ContextSource> {
    config.context.iter().chain(more_contexts)
}

/// The memory a kernel is given for its contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct KernelMemory {
    /// Bytes of context loaded whole: the variable files, and referenced files read
    /// eagerly.
    pub whole_bytes: u64,
    /// Bytes of referenced files read lazily (memory-mapped, not loaded).
    pub mapped_bytes: u64,
    /// `--kernel-memory-mb`, or 4 GiB or 3× `whole_bytes`, whichever is larger: what
    /// the model's code may allocate (`str(context)` of a lazy context must fit in it).
    pub budget_bytes: u64,
}

impl KernelMemory {
    /// The memory of a kernel loading `config`'s context and `more_contexts`.
    pub fn of(
        sandbox: &KernelSandbox,
        config: &EnvConfig,
        more_contexts: &[ContextSource],
    ) -> Self {
        let size = |file: &PathBuf| std::fs::metadata(file).map_or(0, |meta| meta.len());
        let (mut whole_bytes, mut mapped_bytes) = (0u64, 0u64);
        for source in sources(config, more_contexts) {
            whole_bytes += source.files.iter().map(size).sum::<u64>();
            for file in &source.referenced {
                let bytes = size(file);
                if config.lazy_above.is_some_and(|above| bytes > above) {
                    mapped_bytes += bytes;
                } else {
                    whole_bytes += bytes;
                }
            }
        }
        let budget_bytes = sandbox.memory_bytes.unwrap_or_else(|| {
            MEMORY_FLOOR_BYTES.max(whole_bytes.saturating_mul(MEMORY_CONTEXT_FACTOR))
        });
        Self {
            whole_bytes,
            mapped_bytes,
            budget_bytes,
        }
    }

    /// `RLIMIT_AS`: the budget plus the address space the lazy maps take.
    pub fn address_space_bytes(&self) -> u64 {
        self.budget_bytes.saturating_add(self.mapped_bytes)
    }
}

/// The interpreter's installation: the directory above its `bin/` (a virtual
/// environment or a prefix such as `/opt/python3.12`), for the name given and for the
/// file it resolves to.
fn interpreter_dirs(python: &Path) -> Vec<PathBuf> {
    let found = if python.components().count() > 1 {
        Some(python.to_owned())
    } else {
        find_in_path(python)
    };
    let Some(found) = found else {
        return Vec::new();
    };
    let mut dirs = Vec::new();
    let resolved = std::fs::canonicalize(&found).ok();
    for path in std::iter::once(found).chain(resolved) {
        if let Some(prefix) = path.parent().and_then(Path::parent) {
            if prefix != Path::new("/") && !dirs.iter().any(|d: &PathBuf| d == prefix) {
                dirs.push(prefix.to_owned());
            }
        }
    }
    dirs
}

/// `name` looked up in `PATH`, as a shell would.
fn find_in_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The one line that says what `auto` could not enforce on this system, once per
/// process, or `None` when everything is enforced (or the mode is not `auto`).
pub(super) fn auto_gaps_notice(sandbox: &KernelSandbox) -> Option<String> {
    static SUPPORT: std::sync::OnceLock<Support> = std::sync::OnceLock::new();
    match sandbox.mode {
        Mode::Off | Mode::Strict => None,
        Mode::Auto if sandbox.launcher.is_none() => Some(
            "--sandbox auto: the Python kernel runs unconfined (no rlm-orchestrate launcher to confine it)"
                .to_owned(),
        ),
        Mode::Auto => {
            let support = SUPPORT.get_or_init(rlm_sandbox::probe);
            let gaps = support.gaps(&Policy::default());
            (!gaps.is_empty()).then(|| {
                format!(
                    "--sandbox auto: the Python kernel is only partly confined on this system: {}",
                    gaps.join("; ")
                )
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EnvConfig {
        EnvConfig {
            data_dir: PathBuf::from("/data"),
            context: None,
            query: String::new(),
            history: Vec::new(),
            exec_timeout: std::time::Duration::from_secs(1),
            depth: 0,
            max_depth: 1,
            sub_context_chars: 1000,
            lazy_above: None,
        }
    }

    #[test]
    fn a_venv_interpreter_adds_its_environment_and_the_real_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let venv_bin = dir.path().join("venv").join("bin");
        std::fs::create_dir_all(&venv_bin).unwrap();
        let real = std::fs::canonicalize(find_in_path(Path::new("python3")).unwrap()).unwrap();
        std::os::unix::fs::symlink(&real, venv_bin.join("python3")).unwrap();
        let dirs = interpreter_dirs(&venv_bin.join("python3"));
        assert_eq!(dirs[0], dir.path().join("venv"));
        assert_eq!(dirs[1], real.parent().unwrap().parent().unwrap());
    }

    #[test]
    fn off_and_no_launcher_run_unconfined_but_strict_refuses() {
        let config = config();
        let python = Path::new("python3");
        assert!(confine(&KernelSandbox::off(), &config, python, &[], &[])
            .unwrap()
            .is_none());
        let auto = KernelSandbox::default();
        assert!(confine(&auto, &config, python, &[], &[]).unwrap().is_none());
        assert!(auto_gaps_notice(&auto).unwrap().contains("unconfined"));
        let strict = KernelSandbox {
            mode: Mode::Strict,
            ..KernelSandbox::default()
        };
        let error = confine(&strict, &config, python, &[], &[]).err().unwrap();
        assert!(error.to_string().contains("--sandbox strict"), "{error}");
    }

    #[test]
    fn the_policy_reads_variables_writes_only_its_temp_dir_and_limits_memory() {
        let config = config();
        let sandbox = KernelSandbox {
            mode: Mode::Auto,
            launcher: Some("/bin/rlm-orchestrate".into()),
            memory_bytes: None,
        };
        let policy = kernel_policy(
            &sandbox,
            &config,
            Path::new("python3"),
            Path::new("/tmp/k"),
            &[],
        );
        assert!(policy.read.contains(&PathBuf::from("/data/variables")));
        assert_eq!(
            policy.write,
            vec![PathBuf::from("/tmp/k"), PathBuf::from("/dev/null")]
        );
        assert!(!policy.network);
        assert_eq!(policy.limits.address_space_bytes, Some(4 << 30));
    }
}
