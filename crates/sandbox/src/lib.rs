//! Confining rlm's children with nothing but the Linux kernel: Landlock, seccomp and
//! resource limits.
//!
//! A confined child is started through a launcher, `rlm-orchestrate sandbox-exec
//! POLICY -- PROGRAM ARGS…`: the orchestrator re-executes itself, the launcher (one
//! thread, nothing else running) applies the [`Policy`] to itself with [`confine`] and
//! then `exec`s the program, which inherits every restriction, as does anything it
//! starts. Restrictions cannot be lifted afterwards: Landlock domains and seccomp
//! filters only ever grow, `no_new_privs` stays set across `exec`, and the rlimits'
//! hard values are lowered too.
//!
//! - [`Policy`]: what the child may read, write and reach, and its resource limits;
//!   it travels to the launcher as one JSON argument ([`Policy::to_arg`]).
//! - [`probe`]: what the running kernel can enforce, without restricting anything,
//!   so the orchestrator can say once, before the first start, what is missing.
//! - [`launcher_main`]: the launcher's whole job, called by the binary when its first
//!   argument is [`LAUNCHER_SUBCOMMAND`].
//!
//! Elsewhere than Linux nothing can be enforced: [`probe`] says so and [`confine`]
//! returns what was (not) applied.

mod error;
mod launcher;
mod policy;
#[cfg(target_os = "linux")]
mod rules;

pub use error::SandboxError;
pub use launcher::{launcher_main, wrap_command, LAUNCHER_SUBCOMMAND};
pub use policy::{Limits, Mode, Policy, PrivateTmp};

/// What the running kernel can enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// Landlock's ABI version (0: none).
    pub landlock_abi: u8,
    /// seccomp filters can be installed.
    pub seccomp: bool,
}

impl Support {
    /// Landlock filesystem rules are available.
    pub fn filesystem(&self) -> bool {
        self.landlock_abi >= 1
    }

    /// Landlock TCP rules are available (ABI 4, Linux 6.7).
    pub fn landlock_network(&self) -> bool {
        self.landlock_abi >= 4
    }

    /// Landlock can keep the child from signalling processes outside its domain and
    /// from reaching abstract Unix sockets (ABI 6, Linux 6.12).
    pub fn scopes(&self) -> bool {
        self.landlock_abi >= 6
    }

    /// What `policy` asks for that this kernel cannot enforce, one phrase each
    /// (empty: everything is enforced).
    pub fn gaps(&self, policy: &Policy) -> Vec<String> {
        let mut gaps = Vec::new();
        if !self.filesystem() {
            gaps.push("file access is not restricted (the kernel has no Landlock)".to_owned());
        }
        if !policy.network && !self.seccomp && !self.landlock_network() {
            gaps.push(
                "the network is not blocked (no seccomp, no Landlock network rules)".to_owned(),
            );
        }
        if !self.seccomp {
            gaps.push("system calls are not filtered (no seccomp)".to_owned());
        }
        if !self.scopes() {
            gaps.push(
                "signals to outside processes and abstract Unix sockets are not scoped (Landlock ABI < 6)"
                    .to_owned(),
            );
        }
        gaps
    }
}

/// What the running kernel can enforce; restricts nothing.
pub fn probe() -> Support {
    #[cfg(target_os = "linux")]
    {
        rules::probe()
    }
    #[cfg(not(target_os = "linux"))]
    {
        Support {
            landlock_abi: 0,
            seccomp: false,
        }
    }
}

/// The process runs as root (for whom `RLIMIT_NPROC` does not bind).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// What [`confine`] applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Applied {
    /// Landlock rules are fully enforced.
    pub landlock: bool,
    /// The seccomp filter is installed.
    pub seccomp: bool,
    /// What could not be enforced.
    pub gaps: Vec<String>,
}

/// Applies `policy` to the calling process: rlimits, `no_new_privs`, Landlock, seccomp.
///
/// Must run single-threaded (the launcher does, before `exec`): Landlock and seccomp
/// restrict the calling thread and what it starts. Under [`Mode::Strict`] anything
/// that cannot be enforced is an error; under [`Mode::Auto`] it is listed in
/// [`Applied::gaps`].
pub fn confine(policy: &Policy) -> Result<Applied, SandboxError> {
    policy::apply_limits(&policy.limits)?;
    #[cfg(target_os = "linux")]
    {
        rules::confine(policy)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let gaps = probe().gaps(policy);
        if policy.mode == Mode::Strict {
            return Err(SandboxError::Unsupported(gaps.join("; ")));
        }
        Ok(Applied {
            landlock: false,
            seccomp: false,
            gaps,
        })
    }
}
