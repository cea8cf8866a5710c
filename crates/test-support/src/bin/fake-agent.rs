//! `fake-agent`: a stand-in for an external CLI agent (`claude -p`, `codex exec`, …)
//! that misbehaves on request.
//!
//! Tests run it through `--agent-cmd` to check what rlm does with an agent that
//! answers, stores its result, hangs, forks grandchildren (some of which `setsid` out
//! of the process group), ignores SIGTERM, prints gigabytes or fails. It is a test
//! tool, not an agent: it never calls a model.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

const USAGE: &str = "\
fake-agent — a misbehaving stand-in for an external CLI agent (NOT an agent)

Usage: fake-agent [--pids-file F] [--ready-file F] [--linger N] MODE [ARGS...]
       (or FAKE_AGENT_MODE='MODE ARGS...' in the environment)

Options:
  --pids-file F   write the pids of this process and every process it starts to F
                  (one a line, written atomically once all are started)
  --ready-file F  create F once set up (children started, SIGTERM blocked, ...)
  --linger N      first start N children that sleep forever holding stdout open

Modes:
  answer TEXT             print TEXT and exit 0
  echo-prompt [--prompt-file F | --prompt P]
                          print the prompt read from F, P or stdin
  echo-args ARGS...       print ARGS as a JSON array
  write-result TEXT       store TEXT as the result ($RLM_RESULT_FILE, store format,
                          atomic rename) and print noise on stdout
  write-result-json JSON  the same with a JSON value
  hang                    sleep forever
  fork-grandchildren N    start N sleeping children (every second one calls setsid),
                          one double-forked setsid daemon, then hang
  ignore-sigterm          block SIGTERM, then hang
  print-gigabytes         write to stdout forever
  print-bytes N           write N bytes of 'x' to stdout, then exit 0
  exit-code N             write a message to stderr and exit N
  slow MS TEXT            sleep MS milliseconds, then print TEXT
  echo-env                print a JSON object of the RLM_* variables, with \"api_keys\":
                          the names of variables ending in _API_KEY that are set";

/// Exit code for bad usage.
const USAGE_EXIT: u8 = 2;

fn main() -> ExitCode {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    if args.is_empty() {
        if let Ok(mode) = std::env::var("FAKE_AGENT_MODE") {
            args = mode.split_whitespace().map(str::to_owned).collect();
        }
    }
    match run(args) {
        Ok(code) => code,
        Err(message) => {
            let _ = writeln!(io::stderr(), "fake-agent: {message}\n\n{USAGE}");
            ExitCode::from(USAGE_EXIT)
        }
    }
}

#[derive(Default)]
struct Options {
    pids_file: Option<PathBuf>,
    ready_file: Option<PathBuf>,
    linger: usize,
}

fn run(mut args: Vec<String>) -> Result<ExitCode, String> {
    let mut options = Options::default();
    loop {
        match args.first().map(String::as_str) {
            Some("--pids-file") => options.pids_file = Some(take_value(&mut args)?.into()),
            Some("--ready-file") => options.ready_file = Some(take_value(&mut args)?.into()),
            Some("--linger") => {
                options.linger = take_value(&mut args)?
                    .parse()
                    .map_err(|_| "--linger needs a number")?;
            }
            Some("--help" | "-h") => {
                let _ = writeln!(io::stdout(), "{USAGE}");
                return Ok(ExitCode::SUCCESS);
            }
            _ => break,
        }
    }
    if args.is_empty() {
        return Err("no mode given".into());
    }
    let mode = args.remove(0);
    let mut pids = vec![std::process::id()];
    for _ in 0..options.linger {
        pids.push(start_self("sleep", Stdio::inherit())?);
    }
    let arg = |i: usize| {
        args.get(i)
            .cloned()
            .ok_or(format!("{mode} needs an argument"))
    };
    match mode.as_str() {
        // Internal modes of the children this program starts.
        "sleep" => sleep_forever(),
        "setsid-sleep" => {
            nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
            sleep_forever()
        }
        "double-fork" => {
            let pid = start_self("setsid-sleep", Stdio::null())?;
            say(&format!("{pid}\n"));
            Ok(ExitCode::SUCCESS)
        }

        "answer" => {
            finish_setup(&options, &pids)?;
            say(&format!("{}\n", arg(0)?));
            Ok(ExitCode::SUCCESS)
        }
        "echo-prompt" => {
            finish_setup(&options, &pids)?;
            let prompt = match args.first().map(String::as_str) {
                Some("--prompt-file") => std::fs::read_to_string(arg(1)?)
                    .map_err(|e| format!("reading the prompt file: {e}"))?,
                Some("--prompt") => arg(1)?,
                _ => {
                    let mut text = String::new();
                    io::stdin()
                        .read_to_string(&mut text)
                        .map_err(|e| format!("reading stdin: {e}"))?;
                    text
                }
            };
            say(&prompt);
            Ok(ExitCode::SUCCESS)
        }
        "echo-args" => {
            finish_setup(&options, &pids)?;
            say(&format!("{}\n", json!(args)));
            Ok(ExitCode::SUCCESS)
        }
        "write-result" | "write-result-json" => {
            let value = if mode == "write-result" {
                Value::String(arg(0)?)
            } else {
                serde_json::from_str(&arg(0)?).map_err(|e| format!("bad JSON: {e}"))?
            };
            write_result(&value)?;
            finish_setup(&options, &pids)?;
            say("this stdout is noise: the stored result wins\n");
            Ok(ExitCode::SUCCESS)
        }
        "hang" => {
            finish_setup(&options, &pids)?;
            sleep_forever()
        }
        "fork-grandchildren" => {
            let count: usize = arg(0)?.parse().map_err(|_| "N must be a number")?;
            for i in 0..count {
                let mode = if i % 2 == 1 { "setsid-sleep" } else { "sleep" };
                pids.push(start_self(mode, Stdio::null())?);
            }
            pids.push(double_fork()?);
            finish_setup(&options, &pids)?;
            sleep_forever()
        }
        "ignore-sigterm" => {
            let mut blocked = nix::sys::signal::SigSet::empty();
            blocked.add(nix::sys::signal::Signal::SIGTERM);
            nix::sys::signal::sigprocmask(
                nix::sys::signal::SigmaskHow::SIG_BLOCK,
                Some(&blocked),
                None,
            )
            .map_err(|e| format!("sigprocmask: {e}"))?;
            finish_setup(&options, &pids)?;
            sleep_forever()
        }
        "print-gigabytes" => {
            finish_setup(&options, &pids)?;
            let chunk = vec![b'x'; 64 * 1024];
            let mut out = io::stdout().lock();
            while out.write_all(&chunk).is_ok() {}
            Ok(ExitCode::SUCCESS)
        }
        "print-bytes" => {
            let total: usize = arg(0)?.parse().map_err(|_| "N must be a number")?;
            finish_setup(&options, &pids)?;
            let chunk = vec![b'x'; 64 * 1024];
            let mut out = io::stdout().lock();
            let mut left = total;
            while left > 0 {
                let n = left.min(chunk.len());
                if out.write_all(&chunk[..n]).is_err() {
                    break;
                }
                left -= n;
            }
            Ok(ExitCode::SUCCESS)
        }
        "exit-code" => {
            let code: u8 = arg(0)?.parse().map_err(|_| "N must be 0-255")?;
            finish_setup(&options, &pids)?;
            let _ = writeln!(
                io::stderr(),
                "fake-agent: failing on purpose with exit code {code}"
            );
            Ok(ExitCode::from(code))
        }
        "slow" => {
            let ms: u64 = arg(0)?.parse().map_err(|_| "MS must be a number")?;
            let text = arg(1)?;
            finish_setup(&options, &pids)?;
            std::thread::sleep(Duration::from_millis(ms));
            say(&format!("{text}\n"));
            Ok(ExitCode::SUCCESS)
        }
        "echo-env" => {
            finish_setup(&options, &pids)?;
            let mut object = serde_json::Map::new();
            let mut api_keys = Vec::new();
            for (name, value) in std::env::vars() {
                if name.starts_with("RLM_") {
                    object.insert(name.clone(), Value::String(value));
                }
                if name.ends_with("_API_KEY") {
                    api_keys.push(Value::String(name));
                }
            }
            object.insert("api_keys".into(), Value::Array(api_keys));
            say(&format!("{}\n", Value::Object(object)));
            Ok(ExitCode::SUCCESS)
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

fn take_value(args: &mut Vec<String>) -> Result<String, String> {
    let flag = args.remove(0);
    if args.is_empty() {
        return Err(format!("{flag} needs a value"));
    }
    Ok(args.remove(0))
}

fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn sleep_forever() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// Starts this program in an internal mode and returns the child's pid. The child is
/// not waited for: it is meant to outlive us unless someone kills it.
fn start_self(mode: &str, stdout: Stdio) -> Result<u32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let child = Command::new(exe)
        .arg(mode)
        .stdin(Stdio::null())
        .stdout(stdout)
        .spawn()
        .map_err(|e| format!("starting a child: {e}"))?;
    Ok(child.id())
}

/// Starts a child that starts a `setsid` grandchild and exits at once, leaving the
/// grandchild re-parented away from us. Returns the grandchild's pid.
fn double_fork() -> Result<u32, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
    let mut child = Command::new(exe)
        .arg("double-fork")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting a child: {e}"))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .map_err(|e| format!("reading the grandchild's pid: {e}"))?;
    let _ = child.wait();
    line.trim()
        .parse()
        .map_err(|_| format!("bad grandchild pid {line:?}"))
}

/// Writes the pids file and the ready file (each atomically).
fn finish_setup(options: &Options, pids: &[u32]) -> Result<(), String> {
    if let Some(path) = &options.pids_file {
        let text: String = pids.iter().map(|p| format!("{p}\n")).collect();
        write_atomically(path, text.as_bytes())?;
    }
    if let Some(path) = &options.ready_file {
        write_atomically(path, b"ready\n")?;
    }
    Ok(())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let name = path
        .file_name()
        .ok_or_else(|| format!("{} has no file name", path.display()))?
        .to_string_lossy();
    let temp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    std::fs::write(&temp, bytes).map_err(|e| format!("writing {}: {e}", temp.display()))?;
    std::fs::rename(&temp, path).map_err(|e| format!("renaming to {}: {e}", path.display()))
}

/// Stores `value` as the agent's result the way any program can: a JSON file in the
/// store's format at `$RLM_RESULT_FILE`, written to a temp name and renamed.
fn write_result(value: &Value) -> Result<(), String> {
    let path = std::env::var("RLM_RESULT_FILE").map_err(|_| "RLM_RESULT_FILE is not set")?;
    let key = std::env::var("RLM_RESULT_KEY").map_err(|_| "RLM_RESULT_KEY is not set")?;
    let parent = std::env::var("RLM_PARENT_ID").unwrap_or_default();
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let size = serde_json::to_vec(value).map_err(|e| e.to_string())?.len();
    let file = json!({
        "ref": {
            "id": format!("fake-{}-{}", std::process::id(), now.as_nanos()),
            "key": key,
            "scope": format!("agent:{parent}"),
            "type": if value.is_string() { "text" } else { "json" },
            "sizeBytes": size,
            "createdAt": now.as_millis() as u64,
        },
        "value": value,
        "persist": true,
    });
    write_atomically(Path::new(&path), file.to_string().as_bytes())
}
