//! The `mock-llm` binary's start-up contract: scripts (the demo, benchmarks) read the
//! first line of its stdout for the URL, and a person reads its stderr banner.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rlm_test_support::mock_llm::MockScript;

/// Upper bound of the wait for the server to exit (only reached when a test fails).
const EXIT_LIMIT: Duration = Duration::from_secs(20);

#[test]
fn stdout_starts_with_the_url_and_stderr_is_one_sentence() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mock-llm"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    stdout.read_line(&mut first).unwrap();
    let port = first
        .strip_prefix("listening on http://127.0.0.1:")
        .and_then(|rest| rest.strip_suffix('\n'))
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"));
    assert!(port.parse::<u16>().is_ok_and(|port| port > 0), "{first:?}");

    // Closing stdin (a pipe) ends the server.
    drop(child.stdin.take());
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > EXIT_LIMIT {
            child.kill().unwrap();
            panic!("mock-llm did not exit when its stdin closed");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(stderr, format!("{}\n", MockScript::new().describe()));
    assert!(stderr.ends_with(".\n"), "{stderr:?}");
}
