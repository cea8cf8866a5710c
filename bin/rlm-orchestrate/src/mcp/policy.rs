//! What an MCP client may point a run at (issue 49, item 2). A tool call can come from
//! a model, so its arguments are not the operator's: a `base_url` of its choosing would
//! get the server's API key sent to that host, and a `context_paths` entry would hand
//! the run (and so the client) any file the server can read.
//!
//! A call's `base_url` must be one the server was started with (its `--base-url`,
//! `--sub-base-url`, or the provider's public API when it has none) or lie under an
//! `--mcp-allow-base-url`. URLs are compared as parsed by the `url` crate, which
//! reqwest also uses, so what is checked is where requests go: scheme, host (lowercase,
//! IP forms normalised), port and path segments, never as string prefixes
//! (`http://allowed.example@evil` has the host `evil`). The URL the run gets is the
//! parsed one.
//!
//! A context path must resolve, symbolic links followed, to a file under an
//! `--mcp-root` (default: the working directory); the run gets the resolved path, so a
//! link inside a root that points out of it is refused, and `-` (stdin, which carries
//! the protocol) is a file name like any other.

use std::path::{Path, PathBuf};

use url::Url;

use crate::cli::values::AllowedBaseUrl;

/// Why a call's argument is refused: each says which flag would allow it.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// `base_url` is not a URL requests could go to.
    #[error("base_url {url:?} is refused: {reason}")]
    NotAUrl {
        /// The URL as the call gave it (credentials redacted).
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// `base_url` is neither the server's own nor under an allowed one.
    #[error(
        "base_url {url} is refused: requests carry the server's API key, and this server sends them only to {allowed}; start the server with --mcp-allow-base-url {url} to allow it"
    )]
    BaseUrl {
        /// The URL as parsed (credentials redacted).
        url: String,
        /// The URLs the server allows, for the message.
        allowed: String,
    },
    /// A context path that does not resolve.
    #[error("context path {path:?} {what}")]
    Unresolved {
        /// The path as the call gave it.
        path: String,
        /// "does not exist" or why it cannot be resolved.
        what: String,
    },
    /// A context path outside every root.
    #[error(
        "context path {path:?}{resolved} is refused: it is outside the directories this server reads ({roots}); start the server with --mcp-root DIR to allow a directory"
    )]
    OutsideRoots {
        /// The path as the call gave it.
        path: String,
        /// ` (which resolves to …)` when links or `..` changed it, else empty.
        resolved: String,
        /// The roots, for the message.
        roots: String,
    },
}

/// A `--mcp-root` that cannot serve as one.
#[derive(Debug, thiserror::Error)]
#[error("--mcp-root {path}: {what}; give an existing directory")]
pub struct BadRoot {
    path: String,
    what: String,
}

/// The rules every `rlm_run` is checked against.
#[derive(Debug)]
pub struct Policy {
    /// Directories context paths may lie under, resolved.
    roots: Vec<PathBuf>,
    /// What relative paths are relative to.
    cwd: PathBuf,
    /// The server's own base URLs: a call may give exactly these.
    own: Vec<Url>,
    /// `--mcp-allow-base-url`: a call may give these or a path below them.
    allowed: Vec<Url>,
}

impl Policy {
    /// The policy of a server started in `cwd` with `roots` (none: `cwd`), its own base
    /// URLs `own` (those that do not parse are left out: no call can match them) and
    /// `allowed` prefixes.
    pub fn new(
        cwd: PathBuf,
        roots: &[PathBuf],
        own: impl IntoIterator<Item = String>,
        allowed: &[AllowedBaseUrl],
    ) -> Result<Self, BadRoot> {
        let asked: Vec<PathBuf> = if roots.is_empty() {
            vec![cwd.clone()]
        } else {
            roots.iter().map(|root| cwd.join(root)).collect()
        };
        let roots = asked
            .iter()
            .map(|root| {
                let bad = |what: String| BadRoot {
                    path: root.display().to_string(),
                    what,
                };
                let resolved = std::fs::canonicalize(root).map_err(|e| bad(e.to_string()))?;
                if !resolved.is_dir() {
                    return Err(bad("not a directory".to_owned()));
                }
                Ok(resolved)
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            roots,
            cwd,
            own: own
                .into_iter()
                .filter_map(|u| Url::parse(&u).ok())
                .collect(),
            allowed: allowed.iter().map(|a| a.0.clone()).collect(),
        })
    }

    /// The base URL a call may use for `asked`, as parsed, or why not.
    pub fn base_url(&self, asked: &str) -> Result<String, Refused> {
        let url = Url::parse(asked).map_err(|e| Refused::NotAUrl {
            url: redact(asked),
            reason: format!("it is not a URL ({e})"),
        })?;
        if self.own.iter().any(|own| same_url(own, &url)) {
            return Ok(shown(&url));
        }
        let reason = if !matches!(url.scheme(), "http" | "https") {
            Some("its scheme is not http or https")
        } else if !url.username().is_empty() || url.password().is_some() {
            Some("it carries credentials (user@ or user:password@)")
        } else if url.query().is_some() || url.fragment().is_some() {
            Some("it has a query or a fragment")
        } else {
            None
        };
        if let Some(reason) = reason {
            return Err(Refused::NotAUrl {
                url: redact(asked),
                reason: format!("{reason}, which no base URL of a call may have"),
            });
        }
        if self.allowed.iter().any(|prefix| under(prefix, &url)) {
            return Ok(shown(&url));
        }
        let allowed: Vec<String> = self
            .own
            .iter()
            .chain(&self.allowed)
            .map(|u| redact(&shown(u)))
            .collect();
        Err(Refused::BaseUrl {
            url: shown(&url),
            allowed: if allowed.is_empty() {
                "no URL a call can name".to_owned()
            } else {
                allowed.join(", ")
            },
        })
    }

    /// The resolved path a call may give the run for `asked`, or why not.
    pub fn context_path(&self, asked: &str) -> Result<PathBuf, Refused> {
        let joined = self.cwd.join(asked);
        let resolved = std::fs::canonicalize(&joined).map_err(|e| Refused::Unresolved {
            path: asked.to_owned(),
            what: if e.kind() == std::io::ErrorKind::NotFound {
                "does not exist".to_owned()
            } else {
                format!("cannot be resolved ({e})")
            },
        })?;
        if self.roots.iter().any(|root| resolved.starts_with(root)) {
            return Ok(resolved);
        }
        Err(Refused::OutsideRoots {
            path: asked.to_owned(),
            resolved: if resolved == Path::new(asked) {
                String::new()
            } else {
                format!(" (which resolves to {})", resolved.display())
            },
            roots: self
                .roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
    }
}

/// Where requests go and what they carry: equal for two spellings of one base URL.
fn same_url(a: &Url, b: &Url) -> bool {
    under(a, b)
        && segments(a).len() == segments(b).len()
        && a.username() == b.username()
        && a.password() == b.password()
        && a.query() == b.query()
}

/// Whether `url` is `prefix` or below it: same scheme, host and port, and `prefix`'s
/// path segments first in `url`'s (so `/v1` covers `/v1/x`, not `/v10`).
fn under(prefix: &Url, url: &Url) -> bool {
    let (p, u) = (segments(prefix), segments(url));
    prefix.scheme() == url.scheme()
        && prefix.host_str() == url.host_str()
        && prefix.port_or_known_default() == url.port_or_known_default()
        && u.len() >= p.len()
        && p.iter().zip(&u).all(|(a, b)| a == b)
}

/// The non-empty segments of a URL's path (`/v1/` and `/v1` are one base URL).
fn segments(url: &Url) -> Vec<&str> {
    url.path_segments()
        .map(|s| s.filter(|s| !s.is_empty()).collect())
        .unwrap_or_default()
}

/// A parsed URL as a base URL: without the slash the url crate ends a bare path with.
fn shown(url: &Url) -> String {
    let text = url.as_str();
    if url.query().is_none() && url.fragment().is_none() {
        text.trim_end_matches('/').to_owned()
    } else {
        text.to_owned()
    }
}

/// `url` with credentials hidden, for messages.
fn redact(url: &str) -> String {
    rlm_orchestrator::provider::redact_url(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(own: &[&str], allowed: &[&str]) -> Policy {
        let dir = std::env::temp_dir();
        let allowed: Vec<AllowedBaseUrl> = allowed
            .iter()
            .map(|a| AllowedBaseUrl(Url::parse(a).unwrap()))
            .collect();
        Policy::new(dir, &[], own.iter().map(|s| (*s).to_owned()), &allowed).unwrap()
    }

    #[test]
    fn the_servers_own_url_in_any_spelling_is_allowed() {
        let p = policy(&["http://127.0.0.1:8080/v1"], &[]);
        for same in [
            "http://127.0.0.1:8080/v1",
            "http://127.0.0.1:8080/v1/",
            "HTTP://127.0.0.1:8080/v1",
            "http://2130706433:8080/v1",
            "http://127.0.0.1:8080/x/../v1",
        ] {
            assert_eq!(
                p.base_url(same).unwrap(),
                "http://127.0.0.1:8080/v1",
                "{same}"
            );
        }
    }

    #[test]
    fn other_hosts_ports_paths_and_tricks_are_refused() {
        let p = policy(
            &["http://127.0.0.1:8080/v1"],
            &["https://allowed.example/v1"],
        );
        for other in [
            "http://127.0.0.1:8081/v1",
            "http://127.0.0.1:8080/v2",
            "http://127.0.0.1:8080/v1/chat",
            "http://127.0.0.1:8080",
            "https://allowed.example@evil.example/v1",
            "https://allowed.example.evil.example/v1",
            "https://allowed.example/v10",
            "https://allowed.example/v1/%2e%2e/admin",
            "http://allowed.example/v1",
            "https://allowed.example:444/v1",
            "https://user:pw@allowed.example/v1",
            "https://allowed.example/v1?x=1",
            "file:///etc/passwd",
            "not a url",
        ] {
            assert!(p.base_url(other).is_err(), "{other} was allowed");
        }
        let message = p
            .base_url("http://evil.example/v1")
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("--mcp-allow-base-url http://evil.example/v1"),
            "{message}"
        );
    }

    #[test]
    fn below_an_allowed_url_is_allowed() {
        let p = policy(&[], &["https://allowed.example/v1"]);
        for ok in [
            "https://allowed.example/v1",
            "https://ALLOWED.example:443/v1/",
            "https://allowed.example/v1/deployments/x",
        ] {
            assert!(p.base_url(ok).is_ok(), "{ok} was refused");
        }
    }

    #[test]
    fn context_paths_resolve_before_the_check() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("in.txt"), "x").unwrap();
        std::fs::write(outside.path().join("secret.txt"), "x").unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            root.path().join("link.txt"),
        )
        .unwrap();
        let p = Policy::new(root.path().to_owned(), &[], Vec::new(), &[]).unwrap();
        assert!(p.context_path("in.txt").unwrap().ends_with("in.txt"));
        for refused in [
            "link.txt",
            "../",
            outside.path().join("secret.txt").to_str().unwrap(),
        ] {
            let error = p.context_path(refused).unwrap_err();
            assert!(
                matches!(error, Refused::OutsideRoots { .. }),
                "{refused}: {error}"
            );
            assert!(error.to_string().contains("--mcp-root"), "{error}");
        }
        assert!(matches!(
            p.context_path("-"),
            Err(Refused::Unresolved { .. })
        ));
    }
}
