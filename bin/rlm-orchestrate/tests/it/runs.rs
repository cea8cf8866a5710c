//! `runs list` / `runs show` / `runs show --html` over traces left by real runs against
//! the mock model: a root run with a nested `sub_rlm` run and an external agent, a run
//! killed mid-way, torn files. Snapshots have times and durations fixed in the traces
//! and ids and paths replaced in the output, so they read the same on every machine.
//! The HTML page is opened in headless Chromium to prove a browser renders it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use rlm_test_support::mock_llm::{MockLlm, MockLlmThread, MockReply, MockRule, MockScript};
use serde_json::Value;

use crate::support::{Sandbox, BIN};

/// An external agent: prints the sum of the numbers in the files its prompt names.
use crate::subagents::SUM_AGENT;

/// Model text that must never become markup in the HTML page.
const INJECTION: &str = "<script>alert(\"pwned\")</script> & <img src=x onerror=alert(1)>";

/// The answer of the fixture's root run.
const ROOT_ANSWER: &str = "5 lines, sum 10, the sky is blue";

/// A finished run tree: a root run (two steps) whose first step starts a nested
/// `sub_rlm` run on the sub-model, an external agent, and an `llm_query`.
struct Fixture {
    sb: Sandbox,
    _mock: MockLlmThread,
}

fn fixture() -> Fixture {
    let sb = Sandbox::new();
    let script = MockScript::new()
        .rule(MockRule::contains(
            "Task: count the lines",
            MockReply::text("Counting.\n```repl\nn = len(context.splitlines())\n```\nFINAL_VAR(n)")
                .with_usage(120, 15),
        ))
        .rule(MockRule::contains(
            "What colour is the sky?",
            MockReply::text("blue").with_usage(12, 1),
        ))
        .then(
            MockReply::text(format!(
                "Let me delegate. {INJECTION}\n```repl\nstore.set('nums', '1 2 3 4')\nlines = sub_rlm('count the lines', context='a\\nb\\nc\\nd\\ne')\ntotal = spawn_agent('add the numbers', ['nums'])\nsky = llm_query('What colour is the ' + 'sky?')\nanswer = f'{{lines}} lines, sum {{total.strip()}}, the sky is {{sky}}'\nprint(answer)\n```"
            ))
            .with_usage(700, 80),
        )
        .then(MockReply::text("FINAL_VAR(answer)").with_usage(900, 5));
    let mock = MockLlm::spawn_blocking_thread(script).unwrap();
    let agent = sb.file("sum_agent.py", SUM_AGENT);
    let out = sb
        .bare()
        .env_remove("OPENAI_API_KEY")
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "How many lines, what sum, what colour?"])
        .args(["--base-url", &mock.control().openai_base_url()])
        .args(["--model", "root-model", "--sub-model", "sub-model"])
        .args(["--retry-base-delay-ms", "5", "--json"])
        .arg("--agent-cmd")
        .arg(format!("python3 {} {{prompt_file}}", agent.display()))
        .assert()
        .success();
    let result: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(result["answer"], ROOT_ANSWER, "{result}");
    assert_eq!(result["sub_agents"], 2, "{result}");
    Fixture { sb, _mock: mock }
}

impl Fixture {
    /// `rlm-orchestrate --data-dir … runs <args…>`.
    fn runs(&self, args: &[&str]) -> assert_cmd::Command {
        runs_cmd(&self.sb, args)
    }
}

fn runs_cmd(sb: &Sandbox, args: &[&str]) -> assert_cmd::Command {
    let mut cmd = sb.bare();
    cmd.arg("--data-dir")
        .arg(sb.data_dir())
        .arg("runs")
        .args(args);
    cmd
}

fn stdout_of(cmd: &mut assert_cmd::Command) -> String {
    let out = cmd.assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

fn list_json(sb: &Sandbox, all: bool) -> Vec<Value> {
    let args: &[&str] = if all {
        &["list", "--json", "--all"]
    } else {
        &["list", "--json"]
    };
    serde_json::from_str(&stdout_of(&mut runs_cmd(sb, args))).unwrap()
}

// ----- making traces read the same on every run -----

/// Rewrites the traces' times, durations and pids to fixed values (runs ordered as
/// they started), and returns the replacements that make the output's ids and paths
/// fixed too.
fn freeze(sb: &Sandbox) -> Vec<(String, String)> {
    let runs_dir = sb.data_dir().join("runs");
    let mut runs: Vec<(u64, PathBuf, Vec<Value>)> = std::fs::read_dir(&runs_dir)
        .unwrap()
        .map(|e| {
            let dir = e.unwrap().path();
            let events: Vec<Value> = std::fs::read_to_string(dir.join("events.jsonl"))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            (events[0]["ts_ms"].as_u64().unwrap(), dir, events)
        })
        .collect();
    runs.sort_by_key(|(ts, _, _)| *ts);
    let mut replacements = Vec::new();
    let mut agents = Vec::new();
    for (i, (_, dir, events)) in runs.iter_mut().enumerate() {
        // 2026-11-22 10:00:00 UTC, a minute apart per run, 10 ms apart per event.
        let start = 1_795_341_600_000 + i as u64 * 60_000;
        for (j, event) in events.iter_mut().enumerate() {
            event["ts_ms"] = (start + j as u64 * 10).into();
            freeze_numbers(event);
            for field in ["agent_id", "child_agent_id"] {
                if let Some(id) = event[field].as_str() {
                    if !agents.contains(&id.to_owned()) {
                        agents.push(id.to_owned());
                    }
                }
            }
        }
        let text: String = events.iter().map(|e| format!("{e}\n")).collect();
        std::fs::write(dir.join("events.jsonl"), text).unwrap();
        let summary_path = dir.join("summary.json");
        if let Ok(text) = std::fs::read_to_string(&summary_path) {
            let mut summary: Value = serde_json::from_str(&text).unwrap();
            freeze_numbers(&mut summary);
            std::fs::write(&summary_path, summary.to_string()).unwrap();
        }
        let run_id = dir.file_name().unwrap().to_string_lossy().into_owned();
        // The same length as a real id, so that tables stay aligned.
        let fixed = format!("20261122-10{i:02}00-fixed{}", (b'A' + i as u8) as char);
        replacements.push((run_id, fixed));
    }
    // Agent ids first: a root's (`root-<run id>`) contains its run id.
    let agent_ids = agents
        .iter()
        .enumerate()
        .map(|(i, agent)| (agent.clone(), format!("AGENT-{}", i + 1)));
    replacements.splice(0..0, agent_ids);
    let root = sb.root().to_string_lossy().into_owned();
    if let Ok(canonical) = sb.root().canonicalize() {
        replacements.push((canonical.to_string_lossy().into_owned(), "[SANDBOX]".into()));
    }
    replacements.push((root, "[SANDBOX]".into()));
    // The binary under test, as agent prompts name it.
    replacements.push((crate::support::BIN.to_owned(), "[RLM_BIN]".into()));
    replacements
}

/// Fixed wall times and pids wherever they occur in an event or a summary.
fn freeze_numbers(value: &mut Value) {
    let Some(object) = value.as_object_mut() else {
        return;
    };
    for (key, field) in object.iter_mut() {
        match key.as_str() {
            "duration_ms" => *field = 1234.into(),
            "latency_ms" => *field = 42.into(),
            "pid" if field.is_number() => *field = 4242.into(),
            _ => freeze_numbers(field),
        }
    }
}

fn redact(text: &str, replacements: &[(String, String)]) -> String {
    replacements
        .iter()
        .fold(text.to_owned(), |text, (from, to)| text.replace(from, to))
}

// ----- runs list / runs show -----

#[test]
fn every_runs_command_has_examples() {
    let sb = Sandbox::new();
    for args in [&["runs"][..], &["runs", "list"], &["runs", "show"]] {
        let out = sb.bare().args(args).arg("--help").assert().success();
        let text = String::from_utf8(out.get_output().stdout.clone()).unwrap();
        assert!(
            text.contains("Examples:\n  rlm-orchestrate runs"),
            "{args:?}:\n{text}"
        );
        if args == ["runs", "show"] {
            insta::assert_snapshot!("show_help", text);
        }
    }
}

#[test]
fn list_and_show_a_tree_of_runs() {
    let fx = fixture();
    let ids = freeze(&fx.sb);

    let top = redact(&stdout_of(&mut fx.runs(&["list"])), &ids);
    insta::assert_snapshot!("list", top);
    let all = redact(&stdout_of(&mut fx.runs(&["list", "--all"])), &ids);
    insta::assert_snapshot!("list_all", all);

    let runs = list_json(&fx.sb, true);
    assert_eq!(runs.len(), 2);
    let (root, child) = (&runs[0], &runs[1]);
    assert_eq!(root["depth"], 0);
    assert_eq!(root["status"], "answered");
    assert_eq!(root["answer"], ROOT_ANSWER);
    assert_eq!(root["sub_agents"], 2);
    assert_eq!(root["source"], "summary");
    // The root's tokens include its child's: 700+80, 900+5, 12+1 itself, 120+15 nested.
    assert_eq!(root["usage"]["prompt_tokens"], 700 + 900 + 12 + 120);
    assert_eq!(root["usage"]["completion_tokens"], 80 + 5 + 1 + 15);
    assert_eq!(child["depth"], 1);
    assert_eq!(child["parent_id"], root["agent_id"]);
    assert_eq!(child["answer"], "5");
    assert_eq!(child["task"], "count the lines");
    insta::assert_snapshot!(
        "list_all_json",
        redact(&serde_json::to_string_pretty(&runs).unwrap(), &ids)
    );
    // Without --all only the root is listed.
    assert_eq!(list_json(&fx.sb, false).len(), 1);

    // The shortest prefix of the root's id that the child's does not share.
    let root_id = root["run_id"].as_str().unwrap();
    let child_id = child["run_id"].as_str().unwrap();
    let common = root_id
        .bytes()
        .zip(child_id.bytes())
        .take_while(|(a, b)| a == b)
        .count();
    let shown = stdout_of(&mut fx.runs(&["show", &root_id[..=common]]));
    insta::assert_snapshot!("show", redact(&shown, &ids));
    // The nested run is shown beneath the step that started it, indented.
    let child_line = shown.lines().find(|l| l.contains(child_id)).unwrap();
    assert!(child_line.starts_with("      run "), "{child_line:?}");

    let json: Value =
        serde_json::from_str(&stdout_of(&mut fx.runs(&["show", root_id, "--json"]))).unwrap();
    assert_eq!(json["answer"], ROOT_ANSWER);
    let items = json["steps"][0]["items"].as_array().unwrap();
    let agents: Vec<&Value> = items.iter().filter(|i| i["kind"] == "sub_agent").collect();
    assert_eq!(agents.len(), 2, "{items:?}");
    let nested = agents.iter().find(|a| a["mode"] == "sub_rlm").unwrap();
    assert_eq!(nested["runs"][0]["run_id"], child["run_id"]);
    assert_eq!(nested["runs"][0]["steps"][0]["items"][1]["kind"], "text");
    let external = agents.iter().find(|a| a["mode"] == "spawn_agent").unwrap();
    assert_eq!(external["result_preview"].as_str().unwrap().trim(), "10");
    assert!(external["prompt_preview"]
        .as_str()
        .unwrap()
        .starts_with("add the numbers"));

    // A child run can be shown on its own.
    let child_shown = stdout_of(&mut fx.runs(&["show", child_id]));
    assert!(child_shown.contains("· depth 1 ·"), "{child_shown}");
}

#[test]
fn unknown_and_ambiguous_runs_fail_with_a_hint() {
    let fx = fixture();
    let out = fx.runs(&["show", "19990101-nope"]).assert().code(4);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("no run \"19990101-nope\""), "{stderr}");
    assert!(
        stderr.contains("hint: ") && stderr.contains("runs list"),
        "{stderr}"
    );

    // Both runs of the fixture start with the year.
    let out = fx.runs(&["show", "20"]).assert().code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("\"20\" matches 2 runs"), "{stderr}");
}

#[test]
fn an_empty_data_dir_lists_nothing_and_creates_nothing() {
    let sb = Sandbox::new();
    let out = runs_cmd(&sb, &["list"]).assert().success();
    assert!(out.get_output().stdout.is_empty());
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.starts_with("warning: no runs in "), "{stderr}");
    assert_eq!(list_json(&sb, true), Vec::<Value>::new());
    assert!(!sb.data_dir().exists());
    runs_cmd(&sb, &["show", "x"]).assert().code(4);
}

#[test]
fn running_killed_and_torn_runs_are_read_from_their_events() {
    let sb = Sandbox::new();
    // The model never answers in time: the run sits in its first step.
    let mock = MockLlm::spawn_blocking_thread(MockScript::always(
        MockReply::text("FINAL(too late)").with_delay(Duration::from_secs(600)),
    ))
    .unwrap();
    let mut child = Command::new(BIN)
        .env_remove("RLM_DATA_DIR")
        .env_remove("OPENAI_API_KEY")
        .current_dir(sb.root())
        .arg("--data-dir")
        .arg(sb.data_dir())
        .args(["run", "a slow question", "--model", "m", "--base-url"])
        .arg(mock.control().openai_base_url())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let events_file = || -> Option<PathBuf> {
        let dir = std::fs::read_dir(sb.data_dir().join("runs"))
            .ok()?
            .next()?
            .ok()?;
        Some(dir.path().join("events.jsonl"))
    };
    eventually("the run's first step starts", || {
        events_file()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .is_some_and(|t| t.contains("\"step_started\""))
    });

    let runs = list_json(&sb, false);
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0]["status"], "running", "{runs:?}");
    assert_eq!(runs[0]["source"], "events");
    assert_eq!(runs[0]["task"], "a slow question");
    assert_eq!(runs[0]["iterations"], 1);
    assert!(runs[0]["answer"].is_null());

    child.kill().unwrap();
    child.wait().unwrap();
    let runs = list_json(&sb, false);
    assert_eq!(runs[0]["status"], "unknown", "{runs:?}");
    let table = stdout_of(&mut runs_cmd(&sb, &["list"]));
    assert!(table.contains(" unknown "), "{table}");

    // A torn line (a crash mid-write) is skipped with a warning naming the line.
    let events = events_file().unwrap();
    let mut text = std::fs::read_to_string(&events).unwrap();
    let lines = text.lines().count();
    text.push_str("{\"run_id\": \"torn");
    std::fs::write(&events, text).unwrap();
    let out = runs_cmd(&sb, &["list", "--json"]).assert().success();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains(&format!(
            "events.jsonl:{}: skipped a line that is not JSON",
            lines + 1
        )),
        "{stderr}"
    );
    let runs: Vec<Value> = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(runs[0]["task"], "a slow question");
    // -q silences the warning.
    let out = runs_cmd(&sb, &["-q", "list"]).assert().success();
    assert!(out.get_output().stderr.is_empty());

    // A half-written summary.json is ignored in favour of the events.
    let summary = events.with_file_name("summary.json");
    std::fs::write(&summary, "{\"run_id\": \"x\", \"status\": \"answ").unwrap();
    let out = runs_cmd(&sb, &["show", runs[0]["run_id"].as_str().unwrap()])
        .assert()
        .success();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("summary.json: not a valid summary"),
        "{stderr}"
    );
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(stdout.contains("· unknown · depth 0"), "{stdout}");
    assert!(stdout.contains("step 1"), "{stdout}");
}

/// Waits (bounded) until `check` holds.
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..1200 {
        if check() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("timed out waiting until {what}");
}

// ----- the HTML page -----

#[test]
fn the_html_page_is_self_contained_and_escapes_model_text() {
    let fx = fixture();
    let root = &list_json(&fx.sb, false)[0];
    let page_path = fx.sb.root().join("page.html");
    let said = stdout_of(&mut fx.runs(&[
        "show",
        root["run_id"].as_str().unwrap(),
        "--html",
        page_path.to_str().unwrap(),
    ]));
    assert!(
        said.starts_with("wrote ") && said.contains("page.html"),
        "{said}"
    );
    let page = std::fs::read_to_string(&page_path).unwrap();
    // `-` writes the same page to stdout.
    let piped = stdout_of(&mut fx.runs(&["show", root["run_id"].as_str().unwrap(), "--html", "-"]));
    assert_eq!(piped, page);

    assert!(page.starts_with("<!doctype html>"));
    assert!(page.contains("default-src 'none'"));
    // Nothing is fetched: no element that loads anything (escaped text can hold
    // neither `<` nor `"`).
    for remote in ["src=\"", "<img", "<link", "<iframe", "<object", "<embed"] {
        assert!(!page.contains(remote), "{remote} in the page");
    }
    for href in page.split("href=\"").skip(1) {
        assert!(
            href.starts_with('#'),
            "a link leaves the page: {}",
            &href[..40.min(href.len())]
        );
    }
    // Model text is escaped, never markup.
    assert!(!page.contains(INJECTION));
    assert!(page.contains(
        "&lt;script&gt;alert(&quot;pwned&quot;)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;"
    ));
    assert_eq!(page.matches("<script>").count(), 1);
    // Without JavaScript the page still holds everything, in <details>.
    assert!(page.contains(ROOT_ANSWER));
    assert!(page.contains("<details class=\"agent\""));
}

/// The Chromium binary, if one is installed (`RLM_CHROMIUM` overrides).
fn chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("RLM_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
    .find(|candidate| candidate.is_file())
}

/// True on CI (`CI=true`), where a missing browser is a failure, not a skip.
fn on_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Runs headless Chromium on `page` with `mode` (`--dump-dom`, `--screenshot=…`);
/// returns its stdout.
fn headless(browser: &Path, profile: &Path, page: &Path, mode: &[&str]) -> String {
    let out = Command::new("timeout")
        .arg("120")
        .arg(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--window-size=1280,2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(mode)
        .arg(format!("file://{}", page.display()))
        .env("HOME", profile)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_html_page_renders_in_headless_chromium() {
    let Some(browser) = chromium() else {
        assert!(
            !on_ci(),
            "CI=true but no chromium on PATH: .ci/run installs Debian's `chromium` package"
        );
        eprintln!("SKIPPED the_html_page_renders_in_headless_chromium: no chromium binary on PATH (install Debian's `chromium`, or set RLM_CHROMIUM)");
        return;
    };
    let fx = fixture();
    let runs = list_json(&fx.sb, true);
    let root_id = runs[0]["run_id"].as_str().unwrap();
    let child_id = runs[1]["run_id"].as_str().unwrap();
    let page = fx.sb.root().join("trace.html");
    fx.runs(&["show", root_id, "--html", page.to_str().unwrap()])
        .assert()
        .success();
    let profile = tempfile::tempdir().unwrap();

    let dom = headless(&browser, profile.path(), &page, &["--dump-dom"]);
    // The script ran (the CSP let it) and added its toolbar.
    assert!(dom.contains("data-viewer=\"ready\""), "{dom}");
    assert!(dom.contains("data-action=\"expand\""));
    // The answer, in the header and in the final step.
    assert!(dom.matches(ROOT_ANSWER).count() >= 2);
    // Both sub-agents, and beneath the nested one its own run at depth 1.
    let json: Value =
        serde_json::from_str(&stdout_of(&mut fx.runs(&["show", root_id, "--json"]))).unwrap();
    for agent in json["steps"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["kind"] == "sub_agent")
    {
        let id = agent["agent_id"].as_str().unwrap();
        assert!(
            dom.contains(&format!("data-agent-id=\"{id}\"")),
            "agent {id}"
        );
        assert!(
            dom.contains(&format!("href=\"#agent-{id}\"")),
            "tree link to {id}"
        );
    }
    assert!(dom.contains(&format!("data-run-id=\"{child_id}\" data-depth=\"1\"")));
    // The injected markup stayed text: no element came out of it.
    assert!(!dom.contains("<img"), "model text became an element");
    assert!(!dom.contains("alert(\"pwned\")</script>"));
    assert!(dom.contains("&lt;script&gt;alert(\"pwned\")&lt;/script&gt;"));

    // A screenshot, kept for people: target/tmp/runs-viewer.png.
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("runs-viewer.png");
    let _ = std::fs::remove_file(&shot);
    headless(
        &browser,
        profile.path(),
        &page,
        &[&format!("--screenshot={}", shot.display())],
    );
    let png = std::fs::read(&shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 20_000,
        "a suspiciously small screenshot ({} bytes)",
        png.len()
    );
}
