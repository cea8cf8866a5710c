//! Landlock and seccomp on Linux: finding out what the kernel supports, and confining
//! the calling process.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, ABI,
};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use crate::{Applied, Mode, Policy, SandboxError, Support};

/// The Landlock ABI whose rights are asked for: the newest one tested here. On older
/// kernels the crate's best-effort mode keeps what they support.
const ABI_USED: ABI = ABI::V6;

/// System calls no confined child needs, refused with `EPERM`: reaching into other
/// processes, new namespaces and mounts, kernel keyrings, BPF, perf, and `io_uring`
/// (whose operations would bypass the socket filter).
const DENIED_SYSCALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_kcmp,
    libc::SYS_pidfd_getfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_kexec_load,
    libc::SYS_add_key,
    libc::SYS_keyctl,
    libc::SYS_request_key,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_unshare,
    libc::SYS_setns,
];

/// What the running kernel supports, found by asking Landlock for each ABI's rights
/// at the hard-requirement level (a refused ruleset restricts nothing).
pub(crate) fn probe() -> Support {
    let accepts = |ruleset: Result<Ruleset, landlock::RulesetError>| {
        ruleset.and_then(Ruleset::create).is_ok()
    };
    let hard = || Ruleset::default().set_compatibility(CompatLevel::HardRequirement);
    let mut abi = 0;
    if accepts(hard().handle_access(AccessFs::from_all(ABI::V1))) {
        abi = 1;
        if accepts(hard().handle_access(AccessFs::from_all(ABI::V2))) {
            abi = 2;
        }
        if abi == 2 && accepts(hard().handle_access(AccessFs::from_all(ABI::V3))) {
            abi = 3;
        }
        if abi == 3 && accepts(hard().handle_access(AccessNet::from_all(ABI::V4))) {
            abi = 4;
        }
        if abi == 4 && accepts(hard().handle_access(AccessFs::from_all(ABI::V5))) {
            abi = 5;
        }
        if abi == 5 && accepts(hard().scope(Scope::from_all(ABI::V6))) {
            abi = 6;
        }
    }
    Support {
        landlock_abi: abi,
        seccomp: seccomp_available(),
    }
}

/// The kernel was built with seccomp (`/proc/self/status` has a `Seccomp:` line).
fn seccomp_available() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|status| status.lines().any(|line| line.starts_with("Seccomp:")))
        .unwrap_or(false)
}

/// Sets `no_new_privs`, then applies Landlock and the seccomp filter to the calling
/// process (see [`crate::confine`]).
pub(crate) fn confine(policy: &Policy) -> Result<Applied, SandboxError> {
    // First, while mounting is still allowed (the filter below forbids it).
    let tmp_gap = policy.private_tmp.as_ref().and_then(|tmp| {
        mount_private_tmp(tmp).err().map(|error| {
            format!(
                "the temporary directory {} is not bounded in total ({error})",
                tmp.path.display()
            )
        })
    });
    nix::sys::prctl::set_no_new_privs()
        .map_err(|errno| SandboxError::Landlock(format!("could not set no_new_privs: {errno}")))?;
    let support = probe();
    let mut gaps = support.gaps(policy);
    gaps.extend(tmp_gap);
    // Strict needs Landlock's file rules and seccomp (which also blocks the network:
    // Landlock's network rules cover TCP only).
    // Allowed ports need Landlock's TCP rules: seccomp lets TCP sockets through for them.
    let missing_essentials = !support.filesystem()
        || !support.seccomp
        || (!policy.network && !policy.connect_ports.is_empty() && !support.landlock_network());
    if policy.mode == Mode::Strict && missing_essentials {
        return Err(SandboxError::Unsupported(gaps.join("; ")));
    }
    let landlock = if support.filesystem() {
        restrict_files(policy)?
    } else {
        false
    };
    let seccomp = if support.seccomp {
        install_filter(policy)?;
        true
    } else {
        false
    };
    Ok(Applied {
        landlock,
        seccomp,
        gaps,
    })
}

/// A step of mounting the private temporary directory that failed, and why.
#[derive(Debug, thiserror::Error)]
#[error("{step}: {error}")]
struct TmpMountError {
    /// What was being done (`mounting a tmpfs on /tmp/…`).
    step: String,
    /// Why it failed (in the message, which becomes a gap's text, so not a source).
    error: std::io::Error,
}

/// The error of `step`, for `map_err`.
fn failed<E: Into<std::io::Error>>(step: impl Into<String>) -> impl FnOnce(E) -> TmpMountError {
    let step = step.into();
    move |error| TmpMountError {
        step,
        error: error.into(),
    }
}

/// Mounts a tmpfs of `tmp.size_bytes` over `tmp.path` in a new, private mount
/// namespace of the calling process (and what it starts): as root directly, otherwise
/// inside a new user namespace that maps the caller's own ids. Nothing outside sees the
/// mount; it and its files vanish with the last process in the namespace.
fn mount_private_tmp(tmp: &crate::PrivateTmp) -> Result<(), TmpMountError> {
    use nix::mount::{mount, MsFlags};
    use nix::sched::{unshare, CloneFlags};
    if nix::unistd::geteuid().is_root() {
        unshare(CloneFlags::CLONE_NEWNS).map_err(failed("unshare of a mount namespace"))?;
    } else {
        let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
        unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNS)
            .map_err(failed("unshare of a user and mount namespace"))?;
        for (file, text) in [
            ("/proc/self/setgroups", "deny".to_owned()),
            ("/proc/self/uid_map", format!("{uid} {uid} 1")),
            ("/proc/self/gid_map", format!("{gid} {gid} 1")),
        ] {
            std::fs::write(file, text).map_err(failed(format!("writing {file}")))?;
        }
    }
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(failed("making the mounts private"))?;
    // A working directory in it still names the directory under the mount: move onto it.
    let inside = std::env::current_dir().is_ok_and(|cwd| cwd == tmp.path);
    let options = format!("size={},mode=0700", tmp.size_bytes.max(4096));
    mount(
        Some("tmpfs"),
        &tmp.path,
        Some("tmpfs"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
        Some(options.as_str()),
    )
    .map_err(failed(format!(
        "mounting a tmpfs on {}",
        tmp.path.display()
    )))?;
    if inside {
        std::env::set_current_dir(&tmp.path)
            .map_err(failed(format!("entering {}", tmp.path.display())))?;
    }
    Ok(())
}

/// Landlock: read-only and read-write hierarchies, no TCP unless allowed (or only to
/// the allowed ports), signals and abstract sockets scoped to the domain. Returns
/// whether it is fully enforced.
fn restrict_files(policy: &Policy) -> Result<bool, SandboxError> {
    let landlock_error = |error: landlock::RulesetError| SandboxError::Landlock(error.to_string());
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(ABI_USED))
        .map_err(landlock_error)?;
    if !policy.network {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(ABI_USED))
            .map_err(landlock_error)?;
    }
    ruleset = ruleset
        .scope(Scope::from_all(ABI_USED))
        .map_err(landlock_error)?;
    let mut created = ruleset.create().map_err(landlock_error)?;
    if !policy.network {
        for &port in &policy.connect_ports {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(landlock_error)?;
        }
    }
    let read = AccessFs::from_read(ABI_USED);
    let all = AccessFs::from_all(ABI_USED);
    let own_proc = policy
        .read_own_proc
        .then(|| PathBuf::from(format!("/proc/{}", std::process::id())));
    let rules = policy
        .read
        .iter()
        .chain(own_proc.as_ref())
        .map(|path| (path, read))
        .chain(policy.write.iter().map(|path| (path, all)));
    for (path, access) in rules {
        let Some(fd) = open_for_rule(path)? else {
            continue;
        };
        let access = if path.is_dir() {
            access
        } else {
            access & AccessFs::from_file(ABI_USED)
        };
        created = created
            .add_rule(PathBeneath::new(fd, access))
            .map_err(landlock_error)?;
    }
    let status = created.restrict_self().map_err(landlock_error)?;
    Ok(status.ruleset == RulesetStatus::FullyEnforced)
}

/// Opens `path` for a rule; `None` if it does not exist.
fn open_for_rule(path: &Path) -> Result<Option<PathFd>, SandboxError> {
    if std::fs::symlink_metadata(path).is_err() {
        return Ok(None);
    }
    PathFd::new(path)
        .map(Some)
        .map_err(|error| SandboxError::Path {
            path: path.to_owned(),
            message: error.to_string(),
        })
}

/// seccomp: [`DENIED_SYSCALLS`] refused with `EPERM`; and without the network,
/// sockets other than Unix ones (and, with allowed ports, TCP ones) refused with
/// `EPERM`, or ending the process with `SIGSYS` ([`Policy::kill_on_network`]).
fn install_filter(policy: &Policy) -> Result<(), SandboxError> {
    let denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED_SYSCALLS
        .iter()
        .map(|&syscall| (syscall, Vec::new()))
        .collect();
    let mut sockets = BTreeMap::new();
    if !policy.network {
        sockets.insert(
            libc::SYS_socket,
            socket_rules(!policy.connect_ports.is_empty())?,
        );
    }
    let refused = SeccompAction::Errno(libc::EPERM as u32);
    // With allowed ports a refused socket is a probe (a resolver trying a UDP socket
    // to learn which address families are configured), not a connection: refused.
    if policy.kill_on_network && policy.connect_ports.is_empty() {
        apply_filter(denied, refused)?;
        if !sockets.is_empty() {
            apply_filter(sockets, SeccompAction::KillProcess)?;
        }
        Ok(())
    } else {
        let mut rules = denied;
        rules.extend(sockets);
        apply_filter(rules, refused)
    }
}

/// The `socket()` calls to refuse: every family but Unix; with `tcp`, IPv4 and IPv6
/// sockets that are not stream (TCP) sockets are refused and TCP ones let through
/// (Landlock then limits their ports). Rules are alternatives; conditions in one rule
/// all hold.
fn socket_rules(tcp: bool) -> Result<Vec<SeccompRule>, SandboxError> {
    let backend_error = |error: seccompiler::BackendError| SandboxError::Seccomp(error.to_string());
    let family = |op, value: i32| {
        SeccompCondition::new(0, SeccompCmpArgLen::Dword, op, value as u64).map_err(backend_error)
    };
    if !tcp {
        return Ok(vec![SeccompRule::new(vec![family(
            SeccompCmpOp::Ne,
            libc::AF_UNIX,
        )?])
        .map_err(backend_error)?]);
    }
    let mut rules = vec![SeccompRule::new(vec![
        family(SeccompCmpOp::Ne, libc::AF_UNIX)?,
        family(SeccompCmpOp::Ne, libc::AF_INET)?,
        family(SeccompCmpOp::Ne, libc::AF_INET6)?,
    ])
    .map_err(backend_error)?];
    // The socket type sits in the low bits of the second argument (the rest are
    // SOCK_NONBLOCK and SOCK_CLOEXEC); every type but SOCK_STREAM is refused.
    const TYPE_MASK: u64 = 0xf;
    let not_stream = [
        libc::SOCK_DGRAM,
        libc::SOCK_RAW,
        libc::SOCK_RDM,
        libc::SOCK_SEQPACKET,
        libc::SOCK_DCCP,
    ];
    for inet in [libc::AF_INET, libc::AF_INET6] {
        for kind in not_stream {
            let kind = SeccompCondition::new(
                1,
                SeccompCmpArgLen::Dword,
                SeccompCmpOp::MaskedEq(TYPE_MASK),
                kind as u64,
            )
            .map_err(backend_error)?;
            rules.push(
                SeccompRule::new(vec![family(SeccompCmpOp::Eq, inet)?, kind])
                    .map_err(backend_error)?,
            );
        }
    }
    Ok(rules)
}

/// Installs one filter: `rules` get `on_match`, everything else is allowed.
fn apply_filter(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    on_match: SeccompAction,
) -> Result<(), SandboxError> {
    let seccomp_error = |error: seccompiler::Error| SandboxError::Seccomp(error.to_string());
    let backend_error = |error: seccompiler::BackendError| SandboxError::Seccomp(error.to_string());
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(backend_error)?;
    let filter =
        SeccompFilter::new(rules, SeccompAction::Allow, on_match, arch).map_err(backend_error)?;
    let program: BpfProgram = filter.try_into().map_err(backend_error)?;
    seccompiler::apply_filter(&program).map_err(seccomp_error)
}
