//! Logging: `tracing` events to stderr, so stdout carries only results.
//!
//! The level comes from `-v` / `-q`, unless `RUST_LOG` is set, which wins. Problems
//! the store finds while scanning its directory are reported by the commands that
//! care (`vars list` prints them as warnings), so the store's own log line about
//! them is only shown from `-v` on.

use tracing_subscriber::EnvFilter;

use crate::cli::{env, GlobalArgs};

/// Installs the stderr subscriber for the whole process.
pub fn init(global: &GlobalArgs) {
    let filter = match std::env::var(env::RUST_LOG) {
        Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
        _ => EnvFilter::new(default_directives(global.verbose, global.quiet)),
    };
    // A second initialisation (impossible in this binary) would be the only error.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| crate::live::Stderr)
        .with_target(global.verbose > 1)
        .try_init();
}

/// The filter for `-v` repeated `verbose` times, or `-q`.
fn default_directives(verbose: u8, quiet: bool) -> &'static str {
    match (quiet, verbose) {
        (true, _) => "error",
        (false, 0) => "warn,rlm_context_store::store=error",
        (false, 1) => "info",
        (false, 2) => "debug",
        (false, _) => "trace",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_level_is_a_valid_filter() {
        for (verbose, quiet) in [(0, false), (1, false), (2, false), (9, false), (0, true)] {
            let spec = default_directives(verbose, quiet);
            assert!(EnvFilter::try_new(spec).is_ok(), "{spec}");
        }
    }
}
