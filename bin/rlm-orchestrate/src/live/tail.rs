//! Follows nested runs for the live view by reading their `events.jsonl`.
//!
//! A nested run (`sub_rlm`) is another process writing its own trace under
//! `<data-dir>/runs/<run-id>/`; this process only hears `sub_agent_spawned` and
//! `sub_agent_finished`. While a sub-agent of the tree is running, a thread looks four
//! times a second for run directories started since the root run whose `run_started`
//! names a known agent as parent, and feeds their new lines into the tree (read with
//! the trace reader's [`EventsTail`]). It costs one directory listing and a few small
//! reads per tick, and nothing when no sub-agent runs.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rlm_orchestrator::events::{EventData, RUNS_DIR};
use rlm_orchestrator::trace::EventsTail;

use super::tree::Tree;

/// Time between two looks at the run directories.
const POLL_MS: u64 = 250;
/// Length of the time prefix of a run id (`20261122-094312`), which sorts by start.
const RUN_ID_TIME_LEN: usize = 15;

/// The thread following nested runs.
pub struct Tailer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Tailer {
    /// Starts following runs under `data_dir` that descend from the runs of `tree`.
    pub fn start(data_dir: &Path, tree: Arc<Mutex<Tree>>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let runs_dir = data_dir.join(RUNS_DIR);
        let flag = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("rlm-live-tail".into())
            .spawn(move || follow(&runs_dir, &tree, &flag))
            .ok();
        Self { stop, thread }
    }

    /// Stops the thread and waits for it (at most one poll interval).
    pub fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            thread.thread().unpark();
            let _ = thread.join();
        }
    }
}

/// A followed run.
struct Followed {
    tail: EventsTail,
    done: bool,
}

fn follow(runs_dir: &Path, tree: &Mutex<Tree>, stop: &AtomicBool) {
    let mut followed: HashMap<String, Followed> = HashMap::new();
    let mut unrelated: HashSet<String> = HashSet::new();
    while !stop.load(Ordering::Relaxed) {
        std::thread::park_timeout(Duration::from_millis(POLL_MS));
        let (root, searching) = {
            let tree = lock(tree);
            (
                tree.root_run_id().map(|id| id.as_str().to_owned()),
                tree.has_running_agents(),
            )
        };
        let Some(root) = root else { continue };
        if searching {
            discover(runs_dir, &root, tree, &mut followed, &mut unrelated);
        }
        for run in followed.values_mut().filter(|f| !f.done) {
            read_new_lines(run, tree);
        }
    }
}

/// Adds the run directories whose first event names a known agent as parent.
fn discover(
    runs_dir: &Path,
    root: &str,
    tree: &Mutex<Tree>,
    followed: &mut HashMap<String, Followed>,
    unrelated: &mut HashSet<String>,
) {
    let Ok(entries) = std::fs::read_dir(runs_dir) else {
        return;
    };
    let since = root.get(..RUN_ID_TIME_LEN).unwrap_or(root);
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == root || followed.contains_key(&name) || unrelated.contains(&name) {
            continue;
        }
        if name.get(..RUN_ID_TIME_LEN).unwrap_or(&name) < since {
            unrelated.insert(name); // started before the root run
            continue;
        }
        let tail = EventsTail::new(&entry.path());
        let Some(first) = tail.first_event() else {
            continue; // not written yet: look again next time
        };
        let parent_known = first.parent_id.as_ref().is_some_and(|parent| {
            let tree = lock(tree);
            let known = tree.agent_ids().any(|id| id == parent);
            known
        });
        if !matches!(first.data, EventData::RunStarted(_)) {
            unrelated.insert(name);
        } else if parent_known {
            followed.insert(name, Followed { tail, done: false });
        }
        // Otherwise its parent may be a run not discovered yet: look again next time.
    }
}

/// Applies the complete lines written since the last look.
fn read_new_lines(run: &mut Followed, tree: &Mutex<Tree>) {
    let events = run.tail.read_new();
    if events.is_empty() {
        return;
    }
    let mut tree = lock(tree);
    for event in events {
        run.done |= matches!(event.data, EventData::RunFinished(_));
        tree.apply(&event);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use std::fs::File;

    use super::*;
    use rlm_orchestrator::env::EnvKind;
    use rlm_orchestrator::events::{AgentMode, Event, RunStarted, SubAgentSpawned};
    use rlm_orchestrator::ids::{AgentId, RunId};

    fn line(event: &Event) -> String {
        format!("{}\n", serde_json::to_string(event).unwrap())
    }

    fn event(run: &str, agent: &str, parent: Option<&str>, data: EventData) -> Event {
        Event {
            run_id: RunId::from(run),
            depth: u32::from(parent.is_some()),
            agent_id: AgentId::parse(agent).unwrap(),
            parent_id: parent.map(|p| AgentId::parse(p).unwrap()),
            ts_ms: 1,
            data,
        }
    }

    fn started() -> EventData {
        EventData::RunStarted(RunStarted {
            task: "t".into(),
            model: "m".into(),
            env: EnvKind::Python,
            context: None,
            pid: 1,
            context_window: None,
            sub_context_window: None,
        })
    }

    #[test]
    fn children_of_known_agents_are_followed_and_others_not() {
        let dir = tempfile::tempdir().unwrap();
        let runs = dir.path().join(RUNS_DIR);
        let root_id = "20261122-094312-aaaaaa";
        let tree = Mutex::new(Tree::default());
        lock(&tree).apply(&event(root_id, "root", None, started()));
        lock(&tree).apply(&event(
            root_id,
            "root",
            None,
            EventData::SubAgentSpawned(SubAgentSpawned {
                child_agent_id: AgentId::parse("kid").unwrap(),
                mode: AgentMode::SubRlm,
                pid: None,
                task: "t".into(),
            }),
        ));
        for (id, agent, parent) in [
            ("20261122-094313-bbbbbb", "kid", Some("root")),
            ("20261122-094314-cccccc", "stranger", Some("someone-else")),
            ("20261121-000000-dddddd", "old", Some("root")),
        ] {
            std::fs::create_dir_all(runs.join(id)).unwrap();
            let mut file = File::create(runs.join(id).join("events.jsonl")).unwrap();
            file.write_all(line(&event(id, agent, parent, started())).as_bytes())
                .unwrap();
            file.write_all(
                line(&event(
                    id,
                    agent,
                    parent,
                    EventData::StepStarted { iteration: 1 },
                ))
                .as_bytes(),
            )
            .unwrap();
            file.write_all(b"{\"partial").unwrap();
        }
        let mut followed = HashMap::new();
        let mut unrelated = HashSet::new();
        discover(&runs, root_id, &tree, &mut followed, &mut unrelated);
        assert_eq!(
            followed.keys().collect::<Vec<_>>(),
            ["20261122-094313-bbbbbb"]
        );
        assert!(unrelated.contains("20261121-000000-dddddd"));
        assert!(
            !unrelated.contains("20261122-094314-cccccc"),
            "looked at again"
        );
        let run = followed.values_mut().next().unwrap();
        read_new_lines(run, &tree);
        let text = lock(&tree).render(1000, 100, 20, false).join("\n");
        assert!(text.contains("step 1"), "{text}");
        assert!(
            run.tail.read_new().is_empty(),
            "a partial line waits for its end"
        );
    }
}
