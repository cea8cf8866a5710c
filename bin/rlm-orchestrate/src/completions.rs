//! `rlm-orchestrate completions <shell>`: a completion script for the shell, generated
//! from the same grammar as `--help` (so it never falls out of date).

use std::io::{self, Write};

use anyhow::Context as _;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};

/// Prints the completion script of `args.shell` on stdout.
pub fn run(args: &CompletionsArgs) -> anyhow::Result<()> {
    let mut command = Cli::command();
    let name = command.get_name().to_owned();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command, name, &mut script);
    let mut out = io::stdout().lock();
    match out.write_all(&script).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(e).context("failed to write the completion script")
        }
        _ => Ok(()),
    }
}
