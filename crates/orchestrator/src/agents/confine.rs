//! `--agent-sandbox on`: external agents started through the `sandbox-exec` launcher.
//!
//! A confined agent reads the system, its program file (the file, not its directory),
//! any file its `--agent-cmd` names (a script given to `sh`), its prompt file and the
//! store; it writes only the store (so `rlm-orchestrate vars set` works) and a private
//! temporary directory that is its `TMPDIR` and working directory. The network stays
//! open, since agent CLIs call their APIs, unless `--agent-network off`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use rlm_process::{SpawnOptions, Termination};
use rlm_sandbox::{Mode, Policy};
use serde::{Deserialize, Serialize};

/// How external agents are confined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSandbox {
    /// The `rlm-orchestrate` executable whose `sandbox-exec` confines them.
    pub launcher: PathBuf,
    /// `--agent-network`: they may open network sockets.
    pub network: bool,
    /// `--agent-allow-connect`: without the network, TCP ports they may still connect
    /// to (a model endpoint).
    #[serde(default)]
    pub connect_ports: Vec<u16>,
}

impl AgentSandbox {
    /// Explains a confined agent's failure that the network rules caused or may have
    /// caused: `SIGSYS` is how a denied socket ends a confined agent, and an agent
    /// that timed out without the network may have been retrying a denied connection.
    pub(super) fn explain(&self, error: &mut rlm_protocol::SubError, termination: &Termination) {
        if self.network {
            return;
        }
        let allow = "allow its model endpoint with --agent-allow-connect HOST:PORT, or use --agent-network on";
        match termination {
            // Only without allowed ports does a denied socket end the agent.
            Termination::Signaled(signal) if *signal == libc::SIGSYS => {
                error.error = format!(
                    "the agent was ended when it tried to open a network connection, which --agent-network off denies; {allow}"
                );
            }
            Termination::TimedOut if !self.connect_ports.is_empty() => {
                error.error.push_str(&format!(
                    " (its network is off except TCP to port {}: a connection it retried may have been denied; {allow})",
                    ports(&self.connect_ports)
                ));
            }
            _ => {}
        }
    }
}

/// `8080` or `8080, 443`.
fn ports(ports: &[u16]) -> String {
    ports
        .iter()
        .map(u16::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Files a program with network access reads to resolve names and check
/// certificates.
const NETWORK_FILES: &[&str] = &[
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ssl/certs",
    "/etc/ca-certificates",
    "/etc/pki",
];

/// Rewrites `spawn` to start through the launcher under the agent's policy, with
/// `tmp` (its private temporary directory, kept until it has ended) as its `TMPDIR`,
/// working directory and only writable place besides the store.
pub(super) fn confine_agent(
    sandbox: &AgentSandbox,
    spawn: &mut SpawnOptions,
    store_dirs: &[PathBuf],
    inputs: &[PathBuf],
    prompt_file: &Path,
    tmp: &Path,
) {
    let mut read = Policy::system_read_paths();
    read.extend(program_file(&spawn.program, &spawn.env));
    read.extend(
        spawn
            .args
            .iter()
            .map(PathBuf::from)
            .filter(|arg| arg.is_file()),
    );
    read.push(prompt_file.to_owned());
    // The files its prompt names: text views, and the files `file` variables refer to.
    read.extend(inputs.iter().cloned());
    read.extend(std::env::current_exe().ok());
    if sandbox.network || !sandbox.connect_ports.is_empty() {
        read.extend(NETWORK_FILES.iter().map(PathBuf::from));
    }
    let mut write = store_dirs.to_vec();
    write.push(tmp.to_owned());
    write.push(PathBuf::from("/dev/null"));
    let policy = Policy {
        mode: Mode::Strict,
        read,
        write,
        network: sandbox.network,
        connect_ports: sandbox.connect_ports.clone(),
        // A denied connection ends the agent at once, with a message saying so,
        // instead of a CLI retrying it until --agent-timeout.
        kill_on_network: true,
        read_own_proc: true,
        limits: rlm_sandbox::Limits::default(),
        private_tmp: None,
    };
    let (program, args) =
        rlm_sandbox::wrap_command(&sandbox.launcher, &policy, &spawn.program, &spawn.args);
    spawn.program = program;
    spawn.args = args;
    spawn.env.retain(|(name, _)| name != "TMPDIR");
    spawn
        .env
        .push(("TMPDIR".into(), tmp.as_os_str().to_owned()));
    spawn.cwd = Some(tmp.to_owned());
}

/// The program's file: a path as given, or looked up in the agent's `PATH`; and the
/// file it resolves to, if that is another.
fn program_file(program: &OsString, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
    let program = Path::new(program);
    let found = if program.components().count() > 1 {
        Some(program.to_owned())
    } else {
        env.iter()
            .find(|(name, _)| name == "PATH")
            .and_then(|(_, path)| {
                std::env::split_paths(path)
                    .map(|dir| dir.join(program))
                    .find(|candidate| candidate.is_file())
            })
    };
    let mut files: Vec<PathBuf> = found.into_iter().collect();
    if let Some(resolved) = files.first().and_then(|f| std::fs::canonicalize(f).ok()) {
        // A CLI installed with npm is a script that starts files of its package and of
        // its platform package beside it (Codex's native binary): its whole
        // `node_modules` tree is its program.
        files.extend(node_modules_of(&resolved));
        // A script's interpreter: a Python CLI in a virtual environment (`llm`) needs
        // the environment and the Python it was made from.
        files.extend(interpreter_dirs(&resolved));
        if !files.contains(&resolved) {
            files.push(resolved);
        }
    }
    files
}

/// The installations a script's interpreter (`#!/venv/bin/python3`) needs: the
/// directory above the interpreter's `bin/` (a virtual environment), and the one above
/// the `bin/` of the file it resolves to (the Python the environment was made from).
/// Nothing for a binary, `/usr` (already readable) or `#!/usr/bin/env`.
fn interpreter_dirs(program: &Path) -> Vec<PathBuf> {
    let Some(interpreter) = shebang(program) else {
        return Vec::new();
    };
    let resolved = std::fs::canonicalize(&interpreter).ok();
    let mut dirs: Vec<PathBuf> = Vec::new();
    for path in std::iter::once(interpreter).chain(resolved) {
        let Some(prefix) = path.parent().and_then(Path::parent) else {
            continue;
        };
        let system = [Path::new("/"), Path::new("/usr"), Path::new("/usr/local")];
        if !system.contains(&prefix) && !dirs.iter().any(|d| d == prefix) {
            dirs.push(prefix.to_owned());
        }
    }
    dirs
}

/// The interpreter named by a script's `#!` line (an absolute path), if any.
fn shebang(program: &Path) -> Option<PathBuf> {
    use std::io::Read as _;
    let mut head = [0_u8; 256];
    let read = std::fs::File::open(program).ok()?.read(&mut head).ok()?;
    let line = head[..read].strip_prefix(b"#!")?;
    let line = line.split(|&b| b == b'\n').next()?;
    let interpreter = std::str::from_utf8(line).ok()?.split_whitespace().next()?;
    let interpreter = PathBuf::from(interpreter);
    (interpreter.is_absolute() && !interpreter.ends_with("env")).then_some(interpreter)
}

/// The `node_modules` directory a file is installed in, if any.
fn node_modules_of(file: &Path) -> Option<PathBuf> {
    file.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "node_modules"))
        .map(Path::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_is_found_in_the_agents_path_and_resolved() {
        let env = vec![(
            OsString::from("PATH"),
            OsString::from("/nowhere:/bin:/usr/bin"),
        )];
        let files = program_file(&OsString::from("sh"), &env);
        assert!(files[0].ends_with("sh"), "{files:?}");
        assert!(program_file(&OsString::from("no-such-program-here"), &env).is_empty());
    }

    #[test]
    fn a_script_in_a_virtual_environment_may_read_it_and_its_python() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let base = root.join("pythons/3.11/bin");
        let venv_bin = root.join("venv/bin");
        std::fs::create_dir_all(&base).unwrap();
        std::fs::create_dir_all(&venv_bin).unwrap();
        std::fs::write(base.join("python3.11"), "").unwrap();
        std::os::unix::fs::symlink(base.join("python3.11"), venv_bin.join("python3")).unwrap();
        let script = venv_bin.join("llm");
        std::fs::write(
            &script,
            format!("#!{}\nimport llm\n", venv_bin.join("python3").display()),
        )
        .unwrap();
        assert_eq!(
            interpreter_dirs(&script),
            [root.join("venv"), root.join("pythons/3.11")]
        );
        let system = root.join("sys.sh");
        std::fs::write(&system, "#!/usr/bin/env python3\n").unwrap();
        assert!(interpreter_dirs(&system).is_empty());
        std::fs::write(&system, "#!/bin/sh\n").unwrap();
        assert!(interpreter_dirs(&system).is_empty());
    }

    #[test]
    fn an_npm_installed_cli_may_read_its_node_modules_tree() {
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("node_modules/@openai/codex/bin");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::write(bin.join("codex.js"), "").unwrap();
        let env = vec![(OsString::from("PATH"), bin.clone().into_os_string())];
        let files = program_file(&OsString::from("codex.js"), &env);
        let root = std::fs::canonicalize(dir.path()).unwrap();
        assert!(files.contains(&root.join("node_modules")), "{files:?}");
        assert_eq!(node_modules_of(Path::new("/usr/bin/sh")), None);
    }

    #[test]
    fn a_confined_agent_starts_through_the_launcher_in_its_temp_dir() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("agent.sh");
        std::fs::write(&script, "echo hi").unwrap();
        let mut spawn = SpawnOptions {
            program: "sh".into(),
            args: vec![script.clone().into_os_string(), "{x}".into()],
            env: vec![("TMPDIR".into(), "/tmp".into())],
            cwd: None,
            parent_death_signal: true,
        };
        let sandbox = AgentSandbox {
            launcher: "/bin/rlm-orchestrate".into(),
            network: false,
            connect_ports: Vec::new(),
        };
        let tmp = tempfile::tempdir().unwrap();
        confine_agent(
            &sandbox,
            &mut spawn,
            &[dir.path().join("variables")],
            &[dir.path().join("big.log")],
            &dir.path().join("prompt.txt"),
            tmp.path(),
        );
        assert_eq!(spawn.program, OsString::from("/bin/rlm-orchestrate"));
        assert_eq!(spawn.args[0], OsString::from("sandbox-exec"));
        let policy = Policy::from_arg(&spawn.args[1].to_string_lossy()).unwrap();
        assert!(
            policy.read.contains(&script),
            "the script is readable: {policy:?}"
        );
        assert!(
            !policy.read.contains(&dir.path().to_owned()),
            "not its directory"
        );
        assert!(
            policy.read.contains(&dir.path().join("big.log")),
            "a referenced context file is readable"
        );
        assert!(!policy.network);
        assert_eq!(
            &spawn.args[3..],
            &[OsString::from("sh"), script.into_os_string(), "{x}".into()]
        );
        assert_eq!(spawn.cwd.as_deref(), Some(tmp.path()));
        assert_eq!(
            spawn.env,
            vec![("TMPDIR".into(), tmp.path().as_os_str().to_owned())]
        );
    }
}
