//! Reading one run directory without trusting it.
//!
//! A run directory may belong to a run that is still going (its `events.jsonl` ends in
//! the middle of the story, `summary.json` does not exist yet), to one that crashed or
//! was killed (no `run_finished`, maybe a torn last line), or to an older or newer
//! binary. Nothing here fails on such a file: a line that is not an event is skipped
//! and reported as a [`TraceProblem`], a summary that does not parse is ignored in
//! favour of the events.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::TraceProblem;
pub use crate::events::EVENTS_FILE;
use crate::events::{Event, EventData, RunStarted, RunSummaryFile, SUMMARY_FILE};

/// Longest first line read to learn a run's task (the `run_started` event).
const FIRST_LINE_MAX_BYTES: u64 = 1 << 20;

/// Reads `summary.json`: `None` when it does not exist (a running or crashed run),
/// `None` plus a problem when it cannot be read or parsed (a torn write).
pub(crate) fn read_summary(dir: &Path, problems: &mut Vec<TraceProblem>) -> Option<RunSummaryFile> {
    let path = dir.join(SUMMARY_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            problems.push(TraceProblem::file(&path, format!("unreadable: {e}")));
            return None;
        }
    };
    match RunSummaryFile::parse(&text) {
        Ok(summary) => Some(summary),
        Err(e) => {
            problems.push(TraceProblem::file(
                &path,
                format!("not a valid summary ({e}); using the events instead"),
            ));
            None
        }
    }
}

/// Reads the first event of `events.jsonl` (normally `run_started`), or `None` when the
/// file is missing, empty or its first line is not an event.
pub(crate) fn read_first_event(dir: &Path, problems: &mut Vec<TraceProblem>) -> Option<Event> {
    let path = dir.join(EVENTS_FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return None,
        Err(e) => {
            problems.push(TraceProblem::file(&path, format!("unreadable: {e}")));
            return None;
        }
    };
    let mut line = String::new();
    let mut reader = BufReader::new(file.take(FIRST_LINE_MAX_BYTES));
    if let Err(e) = reader.read_line(&mut line) {
        problems.push(TraceProblem::file(&path, format!("unreadable: {e}")));
        return None;
    }
    if line.trim().is_empty() {
        return None;
    }
    parse_line(&line, &path, 1, problems)
}

/// Reads every event of the `events.jsonl` of the run directory `dir`, skipping (and
/// reporting) lines that are not events. A missing file is an empty trace.
pub fn read_events(dir: &Path, problems: &mut Vec<TraceProblem>) -> Vec<Event> {
    let path = dir.join(EVENTS_FILE);
    let file = match File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            problems.push(TraceProblem::file(&path, "missing".to_owned()));
            return Vec::new();
        }
        Err(e) => {
            problems.push(TraceProblem::file(&path, format!("unreadable: {e}")));
            return Vec::new();
        }
    };
    let mut events = Vec::new();
    let mut reader = BufReader::new(file);
    let mut buf = Vec::new();
    let mut number = 0;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                problems.push(TraceProblem::file(&path, format!("unreadable: {e}")));
                break;
            }
        }
        number += 1;
        let line = String::from_utf8_lossy(&buf);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(event) = parse_line(&line, &path, number, problems) {
            events.push(event);
        }
    }
    events
}

/// One line → one event, or a problem naming the line.
fn parse_line(
    line: &str,
    path: &Path,
    number: usize,
    problems: &mut Vec<TraceProblem>,
) -> Option<Event> {
    match serde_json::from_str::<Event>(line) {
        Ok(event) => Some(event),
        Err(e) => {
            let message = match serde_json::from_str::<Value>(line) {
                Ok(value) => {
                    let kind = value.get("kind").and_then(Value::as_str).unwrap_or("?");
                    format!(
                        "skipped an event this version does not understand (kind {kind:?}: {e})"
                    )
                }
                Err(_) => format!("skipped a line that is not JSON ({e})"),
            };
            problems.push(TraceProblem {
                path: path.to_owned(),
                line: Some(number),
                message,
            });
            None
        }
    }
}

/// The start time encoded in a run id (`20261122-094312-3fa9c1`), in ms since the epoch.
pub(crate) fn time_from_run_id(run_id: &str) -> Option<u64> {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let mut parts = run_id.splitn(3, '-');
    let (date, time) = (parts.next()?, parts.next()?);
    if date.len() != 8 || time.len() != 6 || !digits(date) || !digits(time) {
        return None;
    }
    let num = |s: &str| s.parse::<i64>().ok();
    let (y, m, d) = (num(&date[..4])?, num(&date[4..6])?, num(&date[6..])?);
    let (hh, mm, ss) = (num(&time[..2])?, num(&time[2..4])?, num(&time[4..])?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    u64::try_from(((days * 24 + hh) * 60 + mm) * 60 + ss)
        .ok()
        .map(|s| s * 1000)
}

/// (year, month, day) → days since 1970-01-01 (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Whether the orchestrator process `pid` of a run without an ending still exists:
/// a live `rlm-orchestrate` process with that id (Linux `/proc`; elsewhere unknown,
/// so `false`). A recycled pid of an unrelated program does not count.
pub(crate) fn orchestrator_alive(pid: u32) -> bool {
    let cmdline = PathBuf::from("/proc").join(pid.to_string()).join("cmdline");
    match std::fs::read(&cmdline) {
        Ok(bytes) => {
            let program = bytes.split(|b| *b == 0).next().unwrap_or_default();
            let name = program.rsplit(|b| *b == b'/').next().unwrap_or_default();
            name.starts_with(b"rlm-orchestrate")
        }
        Err(_) => false,
    }
}

/// The `run_started` of an event, if it is one.
pub(crate) fn started_fields(event: &Event) -> Option<&RunStarted> {
    if let EventData::RunStarted(started) = &event.data {
        Some(started)
    } else {
        None
    }
}

/// Follows the `events.jsonl` of a run that is still being written, for readers that
/// show a run while it goes (the live view): each call returns the events of the lines
/// completed since the last one. A line being written is left for the next call; a
/// line that is not an event is skipped.
#[derive(Debug, Clone)]
pub struct EventsTail {
    path: PathBuf,
    offset: u64,
}

impl EventsTail {
    /// Follows the events file of the run directory `dir`, from its start.
    pub fn new(dir: &Path) -> Self {
        Self {
            path: dir.join(EVENTS_FILE),
            offset: 0,
        }
    }

    /// The first event, once its line is complete (normally `run_started`); it does
    /// not move the tail.
    pub fn first_event(&self) -> Option<Event> {
        let file = File::open(&self.path).ok()?;
        let mut line = String::new();
        BufReader::new(file.take(FIRST_LINE_MAX_BYTES))
            .read_line(&mut line)
            .ok()?;
        if !line.ends_with('\n') {
            return None;
        }
        serde_json::from_str(&line).ok()
    }

    /// The events of the lines completed since the last call.
    pub fn read_new(&mut self) -> Vec<Event> {
        let Ok(mut file) = File::open(&self.path) else {
            return Vec::new();
        };
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(self.offset)).is_err() || file.read_to_end(&mut bytes).is_err()
        {
            return Vec::new();
        }
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += complete as u64;
        bytes[..complete]
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Event>(line).ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_carry_their_start_time() {
        assert_eq!(
            time_from_run_id("20251122-093959-3fa9c1"),
            Some(1_763_804_399_000)
        );
        assert_eq!(time_from_run_id("19700101-000000-x"), Some(0));
        assert_eq!(time_from_run_id("not-a-run"), None);
        assert_eq!(time_from_run_id("20251322-093959-3fa9c1"), None);
    }

    #[test]
    fn broken_lines_are_skipped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let good = r#"{"run_id":"r","depth":0,"agent_id":"a","parent_id":null,"ts_ms":5,"kind":"step_started","iteration":1}"#;
        let unknown = r#"{"run_id":"r","depth":0,"agent_id":"a","parent_id":null,"ts_ms":6,"kind":"teleported"}"#;
        std::fs::write(
            dir.path().join(EVENTS_FILE),
            format!("{good}\n{{\"torn\": \n\n{unknown}\n{good}"),
        )
        .unwrap();
        let mut problems = Vec::new();
        let events = read_events(dir.path(), &mut problems);
        assert_eq!(events.len(), 2);
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert_eq!(problems[0].line, Some(2));
        assert!(problems[0].message.contains("not JSON"));
        assert_eq!(problems[1].line, Some(4));
        assert!(problems[1].message.contains("\"teleported\""));
    }

    #[test]
    fn a_torn_summary_is_a_problem_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let mut problems = Vec::new();
        assert!(read_summary(dir.path(), &mut problems).is_none());
        assert!(problems.is_empty());
        std::fs::write(dir.path().join(SUMMARY_FILE), "{\"run_id\": \"r\", \"sta").unwrap();
        assert!(read_summary(dir.path(), &mut problems).is_none());
        assert_eq!(problems.len(), 1);
    }

    #[test]
    fn our_own_process_is_not_an_orchestrator() {
        // The test binary is alive but is not rlm-orchestrate; pid 0 never is.
        assert!(!orchestrator_alive(std::process::id()));
        assert!(!orchestrator_alive(0));
    }
}
