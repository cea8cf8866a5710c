//! `rlm-orchestrate`: the command-line interface of rlm.
//!
//! The binary only parses arguments, sets up logging and calls the libraries; every
//! sub-command lives in its own module, and [`exit`] turns the outcome into an exit
//! code and a message. New sub-commands (`run`, `repl`, `runs`) are a variant in
//! [`cli::Command`] with their arguments in a file of `cli/`, a module, and one arm in
//! [`dispatch`]. The tokio runtime and our Ctrl-C / SIGTERM handling are built by
//! [`runtime`].

mod cli;
mod completions;
mod config_cmd;
mod config_file;
mod eval;
mod exit;
mod live;
mod logging;
mod markdown_help;
mod mcp;
mod output;
mod repl;
mod run;
mod runs;
mod runtime;
mod settings;
mod vars;

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // The sandbox launcher confines itself and becomes the kernel (or agent) it starts:
    // before anything else runs, with one thread and no parsing beyond its own.
    if args
        .get(1)
        .is_some_and(|arg| arg == rlm_sandbox::LAUNCHER_SUBCOMMAND)
    {
        return std::process::ExitCode::from(rlm_sandbox::launcher_main(&args[2..]));
    }
    // The watchdog of a run waits for it to end and then ends what it left behind.
    if args
        .get(1)
        .is_some_and(|arg| arg == rlm_process::WATCHDOG_SUBCOMMAND)
    {
        return std::process::ExitCode::from(rlm_process::watchdog_main(&args[2..]));
    }
    // The command-line reference (docs/cli.md), from the definitions alone: no
    // rlm.toml, no environment.
    if args
        .get(1)
        .is_some_and(|arg| arg == markdown_help::MARKDOWN_HELP_SUBCOMMAND)
    {
        return markdown_help::main();
    }
    let args = match config_file::apply(args, std::path::Path::new(config_file::CONFIG_FILE)) {
        Ok(args) => args,
        Err(e) => return exit::finish(Err(e)),
    };
    // `mcp` parses the flags after it again for every run it starts.
    let after_mcp = mcp_flags(&args);
    let cli = cli::Cli::parse_from(args);
    hide_secrets(&cli);
    logging::init(&cli.global);
    start_watchdog(&cli);
    let result = dispatch(cli, after_mcp);
    // After a first Ctrl-C / SIGTERM: the sub-agents' grace period, then SIGKILL.
    rlm_process::finish_stop();
    // What escaped every supervisor (a cleared environment, then `setsid` or a double
    // fork) is still in the run's cgroup: the run is over, so it ends too.
    rlm_process::end_tree();
    // Nothing of the run is left: no later run needs to look for it.
    rlm_process::forget_live_record();
    exit::finish(result)
}

/// Takes API keys (and every `*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`) out of
/// this process's readable environment before any thread starts; rlm reads them from
/// memory afterwards, and passes them on only where they are meant to go.
fn hide_secrets(cli: &cli::Cli) {
    let mut names = vec!["OPENAI_API_KEY", "ANTHROPIC_API_KEY"];
    let options = match &cli.command {
        cli::Command::Run(args) => Some(&args.options),
        cli::Command::Repl(args) => Some(&args.options),
        cli::Command::Eval(args) => Some(&args.options),
        cli::Command::Mcp(args) => Some(&args.options),
        _ => None,
    };
    names.extend(options.and_then(|o| o.api_key_env.as_deref()));
    rlm_process::hide_secrets(&names);
}

/// For `run` and `repl`: marks every process the run will start with a tree cookie and
/// starts the watchdog that ends them if this process is killed (`kill -9` included).
/// Before any thread starts: it changes the environment.
fn start_watchdog(cli: &cli::Cli) {
    if !matches!(
        cli.command,
        cli::Command::Run(_) | cli::Command::Repl(_) | cli::Command::Eval(_) | cli::Command::Mcp(_)
    ) {
        return;
    }
    // The root of a run tree first ends what dead runs of this data directory left
    // (killed together with their watchdogs); a few at most, so start-up stays quick.
    let root_of_tree = std::env::var_os(rlm_process::SUPERVISION_COOKIE_ENV).is_none();
    let data_dir = &cli.global.data_dir;
    let started =
        std::env::current_exe().and_then(|exe| rlm_process::start_watchdog(&exe, Some(data_dir)));
    if let Err(error) = started {
        tracing::warn!(
            %error,
            "could not start the watchdog: if rlm-orchestrate is killed, processes it started may be left running"
        );
    }
    if root_of_tree {
        runs::reap_at_start(data_dir);
    }
}

/// Runs the chosen sub-command.
fn dispatch(cli: cli::Cli, after_mcp: Vec<std::ffi::OsString>) -> anyhow::Result<()> {
    match cli.command {
        cli::Command::Vars(args) => vars::run(&cli.global, args),
        cli::Command::Run(args) => run::run(&cli.global, *args),
        cli::Command::Repl(args) => repl::run(&cli.global, *args),
        cli::Command::Config(args) => match args.command {
            cli::ConfigCommand::Show(show) => config_cmd::show(&cli.global, show),
        },
        cli::Command::Completions(args) => completions::run(&args),
        cli::Command::Runs(args) => runs::run(&cli.global, args),
        cli::Command::Eval(args) => eval::run(&cli.global, *args),
        cli::Command::Mcp(args) => mcp::run(&cli.global, &args.server, after_mcp),
    }
}

/// The arguments after the `mcp` sub-command (empty for any other): the global flags
/// before it are skipped, so a `--data-dir mcp` is not taken for it.
fn mcp_flags(args: &[std::ffi::OsString]) -> Vec<std::ffi::OsString> {
    let mut at = 1;
    while let Some(arg) = args.get(at) {
        match arg.to_str() {
            Some("mcp") => return args[at + 1..].to_vec(),
            Some("--data-dir") => at += 2,
            Some(flag) if flag.starts_with('-') => at += 1,
            _ => break,
        }
    }
    Vec::new()
}
