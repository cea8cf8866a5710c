//! Which of our environment variables a child process inherits.
//!
//! Every child starts from a cleared environment: it gets the variables a program
//! needs to run at all (`PATH`, `HOME`, locale, …) from an [`AllowList`], then what its
//! starter adds (lineage, names the user allowed). Secrets — API keys above all — are
//! never on a list, so they reach a child only when a user names them.

use std::ffi::OsString;

/// The names (exact) and prefixes of variables a child inherits.
#[derive(Debug, Clone, Copy)]
pub struct AllowList {
    /// Variables copied by exact name.
    pub names: &'static [&'static str],
    /// Variables copied when their name starts with one of these.
    pub prefixes: &'static [&'static str],
}

impl AllowList {
    /// What every child needs: `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`,
    /// `LANGUAGE`, `TZ`, `TERM`, `TMPDIR`, `LC_*`, `XDG_*`. External agents and nested
    /// runs get this.
    pub const BASE: AllowList = AllowList {
        names: &[
            "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TERM", "TMPDIR",
        ],
        prefixes: &["LC_", "XDG_"],
    };

    /// [`AllowList::BASE`] plus what a Python interpreter and its packages look for:
    /// `PYTHON*` settings, virtual and conda environments, pyenv's shims, the dynamic
    /// loader's path and TLS certificate locations. The REPL kernel gets this.
    pub const PYTHON: AllowList = AllowList {
        names: &[
            "PATH",
            "HOME",
            "USER",
            "LOGNAME",
            "SHELL",
            "LANG",
            "LANGUAGE",
            "TZ",
            "TERM",
            "TMPDIR",
            "LD_LIBRARY_PATH",
            "PYTHONPATH",
            "PYTHONHOME",
            "PYTHONUTF8",
            "PYTHONIOENCODING",
            "PYTHONDONTWRITEBYTECODE",
            "PYTHONUSERBASE",
            "VIRTUAL_ENV",
            "CONDA_PREFIX",
            "CONDA_DEFAULT_ENV",
            "SSL_CERT_FILE",
            "SSL_CERT_DIR",
        ],
        prefixes: &["LC_", "XDG_", "PYENV_"],
    };

    /// Whether `name` is on the list.
    pub fn allows(&self, name: &str) -> bool {
        self.names.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// The variables of this process that `list` allows, plus those named in `extra`
/// (the user's `--agent-env` and the like), in the order this process has them.
///
/// A name in `extra` may be a secret [`hide_secrets`](crate::hide_secrets) took out of
/// the environment: its kept value is given.
pub fn inherited_environment(list: &AllowList, extra: &[String]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(name, _)| {
            name.to_str()
                .is_some_and(|name| list.allows(name) || extra.iter().any(|e| e == name))
        })
        .collect();
    for name in extra {
        if env.iter().any(|(n, _)| n == name.as_str()) {
            continue;
        }
        if let Some(value) = crate::secret_var(name) {
            env.push((name.into(), value));
        }
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_on_no_list() {
        for list in [AllowList::BASE, AllowList::PYTHON] {
            for secret in [
                "OPENAI_API_KEY",
                "ANTHROPIC_API_KEY",
                "AWS_SECRET_ACCESS_KEY",
            ] {
                assert!(!list.allows(secret), "{secret}");
            }
            assert!(list.allows("PATH") && list.allows("LC_ALL") && list.allows("XDG_RUNTIME_DIR"));
        }
        assert!(AllowList::PYTHON.allows("PYENV_VERSION"));
        assert!(!AllowList::BASE.allows("PYTHONPATH"));
    }

    #[test]
    fn extra_names_are_added_and_nothing_else() {
        let names: Vec<String> = inherited_environment(&AllowList::BASE, &["CARGO".into()])
            .into_iter()
            .filter_map(|(k, _)| k.into_string().ok())
            .collect();
        assert!(
            names
                .iter()
                .all(|n| AllowList::BASE.allows(n) || n == "CARGO"),
            "{names:?}"
        );
    }
}
