//! What a confined child may do: files it reads and writes, the network, its limits.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// `--sandbox`: how hard to insist on confinement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Confine with what the kernel supports; say once what it cannot enforce.
    #[default]
    Auto,
    /// Refuse to start a child that cannot be fully confined.
    Strict,
    /// No confinement.
    Off,
}

impl Mode {
    /// The flag value: `auto`, `strict` or `off`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Mode::Auto => "auto",
            Mode::Strict => "strict",
            Mode::Off => "off",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        match value {
            "auto" => Ok(Mode::Auto),
            "strict" => Ok(Mode::Strict),
            "off" => Ok(Mode::Off),
            other => Err(format!(
                "unknown sandbox mode {other:?}: use auto, strict or off"
            )),
        }
    }
}

/// Resource limits (soft and hard) of a confined child; `None` leaves one as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// `RLIMIT_AS`: address space, in bytes (a larger allocation fails: `MemoryError`).
    pub address_space_bytes: Option<u64>,
    /// `RLIMIT_FSIZE`: the largest file it may write, in bytes.
    pub file_size_bytes: Option<u64>,
    /// `RLIMIT_NOFILE`: open files.
    pub open_files: Option<u64>,
    /// `RLIMIT_NPROC`: processes of the user (not binding for root).
    pub processes: Option<u64>,
}

/// Everything a confined child may do. Paths that do not exist are skipped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// How hard to insist.
    pub mode: Mode,
    /// Files and directories (with everything beneath) it may read and execute.
    pub read: Vec<PathBuf>,
    /// Files and directories (with everything beneath) it may read, write, create and
    /// remove.
    pub write: Vec<PathBuf>,
    /// It may open network sockets.
    pub network: bool,
    /// Without `network`: TCP ports it may still connect to, on any host (Landlock
    /// limits TCP by port, not by address): a model endpoint. Only TCP sockets are
    /// then allowed besides Unix ones, so a host name needs `/etc/hosts` (no DNS).
    #[serde(default)]
    pub connect_ports: Vec<u16>,
    /// Without `network` or `connect_ports`: a socket it may not open ends it with
    /// `SIGSYS` at once, rather than failing with `EPERM` (which programs that retry
    /// take for a flaky network until their timeout). With `connect_ports`, other
    /// sockets are refused with `EPERM` (resolvers probe with UDP sockets).
    #[serde(default)]
    pub kill_on_network: bool,
    /// It may read its own `/proc/<pid>` (the launcher's pid, which the program keeps
    /// across `exec`), not other processes'.
    #[serde(default)]
    pub read_own_proc: bool,
    /// Its resource limits.
    pub limits: Limits,
    /// A directory replaced, for the child only, by a size-limited tmpfs in a private
    /// mount namespace, so everything it writes there is bounded in total.
    #[serde(default)]
    pub private_tmp: Option<PrivateTmp>,
}

/// A private, size-limited temporary directory (see [`Policy::private_tmp`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrivateTmp {
    /// The directory (it must exist); the child sees an empty tmpfs there.
    pub path: PathBuf,
    /// The most bytes all files in it may hold together.
    pub size_bytes: u64,
}

impl Policy {
    /// The directories of the system every program needs to run: libraries, the
    /// dynamic loader's cache, time zones, `/dev/null` and the random devices. Not
    /// `/etc` as a whole, not `/home`, `/root`, `/tmp` or `/proc`.
    pub fn system_read_paths() -> Vec<PathBuf> {
        let mut paths: Vec<PathBuf> = [
            "/usr",
            "/lib",
            "/lib64",
            "/lib32",
            "/libx32",
            "/bin",
            "/sbin",
            "/etc/ld.so.cache",
            "/etc/ld.so.conf",
            "/etc/ld.so.conf.d",
            "/etc/localtime",
            "/etc/timezone",
            "/etc/alternatives",
            "/etc/mime.types",
            // Node and other OpenSSL programs read it at start, network or not.
            "/etc/ssl/openssl.cnf",
            "/dev/urandom",
            "/dev/random",
            "/dev/zero",
            "/sys/devices/system/cpu",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        // Debian's Python reads /etc/python3.X (sitecustomize.py, via a symlink in /usr).
        if let Ok(entries) = std::fs::read_dir("/etc") {
            let mut python: Vec<PathBuf> = entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| {
                    path.file_name()
                        .and_then(|name| name.to_str())
                        .is_some_and(|name| name.starts_with("python"))
                })
                .collect();
            python.sort();
            paths.extend(python);
        }
        paths
    }

    /// The policy as the launcher's argument.
    pub fn to_arg(&self) -> String {
        // A struct of strings, numbers and booleans always serialises.
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads the launcher's argument.
    pub fn from_arg(arg: &str) -> Result<Self, SandboxError> {
        serde_json::from_str(arg).map_err(SandboxError::BadPolicy)
    }
}

/// Sets each limit of `limits` (soft and hard) on the calling process.
pub(crate) fn apply_limits(limits: &Limits) -> Result<(), SandboxError> {
    use nix::sys::resource::{setrlimit, Resource};
    let wanted = [
        ("RLIMIT_AS", Resource::RLIMIT_AS, limits.address_space_bytes),
        (
            "RLIMIT_FSIZE",
            Resource::RLIMIT_FSIZE,
            limits.file_size_bytes,
        ),
        ("RLIMIT_NOFILE", Resource::RLIMIT_NOFILE, limits.open_files),
        ("RLIMIT_NPROC", Resource::RLIMIT_NPROC, limits.processes),
        ("RLIMIT_CORE", Resource::RLIMIT_CORE, Some(0)),
    ];
    for (limit, resource, value) in wanted {
        let Some(value) = value else { continue };
        setrlimit(resource, value, value).map_err(|errno| SandboxError::Limit {
            limit,
            value,
            source: errno.into(),
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_round_trips_through_its_argument() {
        let policy = Policy {
            mode: Mode::Strict,
            read: vec!["/usr".into(), "/data/variables".into()],
            write: vec!["/tmp/rlm-kernel-x".into()],
            network: false,
            connect_ports: vec![8080],
            kill_on_network: true,
            read_own_proc: true,
            limits: Limits {
                address_space_bytes: Some(4 << 30),
                ..Limits::default()
            },
            private_tmp: Some(PrivateTmp {
                path: "/tmp/rlm-kernel-x".into(),
                size_bytes: 1 << 30,
            }),
        };
        assert_eq!(Policy::from_arg(&policy.to_arg()).unwrap(), policy);
        assert!(Policy::from_arg("{").is_err());
    }

    #[test]
    fn modes_parse_and_print() {
        for mode in [Mode::Auto, Mode::Strict, Mode::Off] {
            assert_eq!(mode.as_str().parse::<Mode>().unwrap(), mode);
        }
        assert!("on"
            .parse::<Mode>()
            .unwrap_err()
            .contains("auto, strict or off"));
    }

    #[test]
    fn the_system_paths_leave_out_homes_temp_and_proc() {
        let paths = Policy::system_read_paths();
        for private in ["/etc", "/root", "/home", "/tmp", "/proc", "/"] {
            assert!(!paths.contains(&PathBuf::from(private)), "{private}");
        }
    }
}
