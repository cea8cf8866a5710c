//! `rlm-orchestrate eval` on the field's benchmarks, end to end against the oracle:
//! RULER's eleven tasks and OOLONG's `trec_coarse` (from a TREC file the test writes)
//! and `released` (records the test writes in the published schema), each scored by
//! its own metric; the flags they need refused clearly when missing; and `--arm rlms`
//! built in, run against a fake of the official library that records what it was given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{json, Value};

use crate::eval::{eval_command, oracle, results};
use crate::support::Sandbox;

/// The small committed corpus (three short texts), as RULER's essays.
fn fixture_haystack() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../crates/eval/fixtures/haystack")
}

/// A TREC file of twenty questions per label, worded so that the oracle's wh-word rule
/// labels them right.
fn trec_file(sb: &Sandbox) -> PathBuf {
    let mut file = String::new();
    for i in 0..20 {
        let s = format!("place number {i}");
        file.push_str(&format!("ABBR:exp What does QX{i} stand for ?\n"));
        file.push_str(&format!("ENTY:other What colour is {s} painted ?\n"));
        file.push_str(&format!("DESC:reason Why is {s} so famous ?\n"));
        file.push_str(&format!("HUM:ind Who built {s} ?\n"));
        file.push_str(&format!("LOC:other Where is {s} found ?\n"));
        file.push_str(&format!("NUM:count How many people visit {s} ?\n"));
    }
    sb.file("train_5500.label", file)
}

fn scores(all: &[Value], suite: &str, arm: &str) -> Vec<f64> {
    let mut found: Vec<(u64, u64, f64)> = all
        .iter()
        .filter(|r| r["suite"] == suite && r["arm"] == arm)
        .map(|r| {
            (
                r["length"].as_u64().unwrap(),
                r["index"].as_u64().unwrap(),
                r["score"].as_f64().unwrap(),
            )
        })
        .collect();
    found.sort_by_key(|(length, index, _)| (*length, *index));
    assert!(!found.is_empty(), "no {suite} {arm}");
    found.into_iter().map(|(_, _, s)| s).collect()
}

const RULER: [&str; 11] = [
    "ruler/niah_single_1",
    "ruler/niah_single_2",
    "ruler/niah_single_3",
    "ruler/niah_multikey_1",
    "ruler/niah_multikey_2",
    "ruler/niah_multikey_3",
    "ruler/niah_multivalue",
    "ruler/niah_multiquery",
    "ruler/vt",
    "ruler/cwe",
    "ruler/fwe",
];

#[test]
fn rulers_eleven_tasks_run_end_to_end_and_score_full_with_the_oracle() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let haystack = fixture_haystack();
    let output = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            &RULER.join(","),
            "--haystack",
            haystack.to_str().unwrap(),
            "--lengths",
            "6k",
            "--items",
            "1",
            "--parallel",
            "2",
        ],
    )
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    assert_eq!(all.len(), RULER.len() * 2);
    for suite in RULER {
        assert_eq!(scores(&all, suite, "rlm"), [1.0], "{suite}");
        assert_eq!(scores(&all, suite, "baseline"), [1.0], "{suite}");
        assert!(
            stdout.contains(&format!("| {suite} | 6k | rlm | 1 | 1 | 100 % |")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("| mean seconds | seconds per correct | forced | failed |"));
    // Each context's item keeps RULER's framing for the baseline; files are named
    // without the suite's slash.
    let meta = out.join("contexts").join(format!(
        "ruler-vt-6k-seed1-0-hay{}.json",
        &digest_of_fixture()[..12]
    ));
    let item: Value = serde_json::from_slice(&std::fs::read(&meta).unwrap()).unwrap();
    assert_eq!(item["suite"], "ruler/vt");
    assert_eq!(item["framing"]["kind"], "around");
    assert_eq!(item["framing"]["answer_tokens"], 30);
    assert!(item["framing"]["before"]
        .as_str()
        .unwrap()
        .starts_with("Memorize and track the chain(s)"));
    assert_eq!(item["expected"]["kind"], "ruler");
    assert_eq!(item["expected"]["value"]["metric"], "string_match_all");
    // The baseline was sent RULER's input, answer prefix last, with RULER's answer
    // tokens.
    let requests = mock.control().requests();
    let vt = requests
        .iter()
        .map(|r| &r.body)
        .find(|b| {
            b["messages"][0]["content"]
                .as_str()
                .is_some_and(|c| c.starts_with("Memorize and track"))
        })
        .unwrap();
    assert_eq!(vt["max_tokens"], 30);
    assert!(vt["messages"][0]["content"]
        .as_str()
        .unwrap()
        .ends_with(", they are: "));
}

/// `flags` as the words a command takes.
fn words(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// The fixture haystack's digest, as `eval` records it.
fn digest_of_fixture() -> String {
    rlm_eval::Haystack::load(&fixture_haystack(), 1 << 30)
        .unwrap()
        .id()
        .digest
        .clone()
}

#[test]
fn oolong_trec_coarse_is_built_from_the_trec_file_and_scored_as_oolong_scores() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let trec = trec_file(&sb);
    let haystack = fixture_haystack();
    let flags = |data: &Path| -> Vec<String> {
        [
            "--suite",
            "ruler/niah_multikey_1,oolong/trec_coarse",
            "--data",
            data.to_str().unwrap(),
            "--haystack",
            haystack.to_str().unwrap(),
            "--lengths",
            "12k",
            "--items",
            "3",
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let output = eval_command(&sb, &mock, &out, &words(&flags(&trec)))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    for arm in ["rlm", "baseline"] {
        assert_eq!(scores(&all, "oolong/trec_coarse", arm), [1.0; 3], "{arm}");
        assert_eq!(
            scores(&all, "ruler/niah_multikey_1", arm),
            [1.0; 3],
            "{arm}"
        );
    }
    // One question of each of OOLONG's groups, in OOLONG's wording; the labels are
    // not in the contexts; the data file is recorded.
    let trec_results: Vec<&Value> = all
        .iter()
        .filter(|r| r["suite"] == "oolong/trec_coarse" && r["arm"] == "rlm")
        .collect();
    for r in &trec_results {
        let question = r["question"].as_str().unwrap();
        assert!(
            question.contains("Give your final answer in the form"),
            "{question}"
        );
        assert_eq!(r["expected"]["kind"], "oolong");
        assert_eq!(r["variant"]["data"]["digest"].as_str().unwrap().len(), 64);
    }
    for entry in std::fs::read_dir(out.join("contexts")).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("oolong-trec_coarse") && name.ends_with(".txt") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(text.contains("|| Instance: ") && !text.contains("|| Label:"));
        }
    }
    // The baseline got OOLONG's framing: the window in a system message.
    let requests = mock.control().requests();
    assert!(requests.iter().any(|r| {
        r.body["messages"][0]["role"] == "system"
            && r.body["messages"][0]["content"].as_str().is_some_and(|c| {
                c.starts_with("You are a helpful assistant.\nThe following lines contain ")
            })
    }));
    // Resumed with another TREC file, it refuses and asks nothing.
    let asked = mock.control().request_count();
    let other = sb.file("other.label", "HUM:ind Who built the wall ?\n");
    let mut again = flags(&other);
    again.push("--resume".to_owned());
    let resumed = eval_command(&sb, &mock, &out, &words(&again))
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&resumed.stderr).contains("--data"));
    assert_eq!(mock.control().request_count(), asked);
}

/// Records in the published schema, over one small window of six questions whose
/// labels (by the oracle's rule) are human being ×2, location ×3, numeric value ×1.
fn released_file(sb: &Sandbox) -> PathBuf {
    let lines = [
        ("Jan 05, 2023", 11111, "Who built the bridge ?"),
        ("Jan 05, 2023", 22222, "Where is Lima found ?"),
        ("Jan 20, 2023", 11111, "Who built the canal ?"),
        ("Feb 02, 2023", 33333, "Where is Oslo found ?"),
        ("Feb 10, 2023", 11111, "Where is Riga found ?"),
        ("Jan 03, 2024", 22222, "How many people visit Accra ?"),
    ];
    let labels = ["human being", "location", "numeric value"];
    let mut window = rlm_eval::oolong::describe(true, 6, &labels);
    for (date, user, text) in lines {
        window.push_str(&format!(
            "Date: {date} || User: {user} || Instance: {text}\n"
        ));
    }
    window.push_str(&rlm_eval::oolong::describe(false, 6, &labels));
    let record = |id: u64, len: u64, question: &str, answer: &str, kind: &str| {
        json!({
            "id": id, "context_len": len, "dataset": "trec_coarse", "context_window_id": 7,
            "num_labels": 3, "context_window_text": window,
            "context_window_text_with_labels": "not read", "question": question,
            "answer": answer, "answer_type": kind, "task_group": "counting",
            "task": "TASK_TYPE.NUMERIC_ONE_CLASS", "input_subset": "False",
        })
        .to_string()
    };
    let records = [
        record(1, 1024, "In the above data, how many data points should be classified as label 'location'? Give your final answer in the form 'Answer: number'.", "[3]", "ANSWER_TYPE.NUMERIC"),
        record(2, 1024, "In the above data, which user is represented most often? Give your final answer in the form 'User: [X]', where [X] is the user ID.", "[11111]", "ANSWER_TYPE.USER"),
        record(3, 1024, "In the above data, which of the labels is the most common? Give your final answer in the form 'Label: answer' where answer is one of the labels: human being, location, numeric value.", "['location']", "ANSWER_TYPE.LABEL"),
        record(4, 2048, "In the above data, which date is represented most often? Give your final answer in the form 'Date: [X]', where [X] is the date in the format MM/DD/YYYY.", "[datetime.date(2023, 1, 5)]", "ANSWER_TYPE.DATE"),
        // A gold off by two from what the data gives: OOLONG's 0.75 ** 2.
        record(5, 2048, "In the above data, how many data points should be classified as label 'human being'? Give your final answer in the form 'Answer: number'.", "[4]", "ANSWER_TYPE.NUMERIC"),
    ];
    sb.file("oolong-synth-validation.jsonl", records.join("\n") + "\n")
}

#[test]
fn oolong_released_records_are_read_as_published_and_scored_as_oolong_scores() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let records = released_file(&sb);
    let output = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "oolong/released",
            "--data",
            records.to_str().unwrap(),
            "--lengths",
            "1k,2k",
            "--items",
            "2",
        ],
    )
    .output()
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    for arm in ["rlm", "baseline"] {
        assert_eq!(
            scores(&all, "oolong/released", arm),
            [1.0, 1.0, 1.0, 0.5625],
            "{arm}"
        );
    }
    let dated = all
        .iter()
        .find(|r| r["expected"]["value"]["kind"] == "date")
        .unwrap();
    assert_eq!(dated["expected"]["value"]["answer"], "2023-01-05");
    assert_eq!(dated["got"], "Date: 01/05/2023");
    // Asked for a length the records do not have: what they hold, exit 2.
    let short = eval_command(
        &sb,
        &mock,
        &sb.root().join("eval-4k"),
        &[
            "--suite",
            "oolong/released",
            "--data",
            records.to_str().unwrap(),
            "--lengths",
            "4k",
            "--items",
            "1",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&short.stderr);
    assert_eq!(short.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("context_len 1024 (3 records), context_len 2048 (2 records)"),
        "{stderr}"
    );
}

#[test]
fn suites_missing_their_files_are_refused_naming_what_they_need() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let bad_trec = sb.file("bad.label", "HUM:ind Who ?\nQQQ:x What ?\n");
    for (flags, says) in [
        (
            vec!["--suite", "oolong/trec_coarse"],
            "suite oolong/trec_coarse is built from a TREC question-classification file",
        ),
        (
            vec!["--suite", "oolong/released"],
            "suite oolong/released is built from the released OOLONG-synth records",
        ),
        (
            vec!["--suite", "ruler/niah_multikey_1"],
            "suite ruler/niah_multikey_1 hides its needles in essays",
        ),
        (
            vec!["--suite", "oolong/trec_coarse", "--data", "no-such.label"],
            "failed to read the data file no-such.label",
        ),
        (
            vec![
                "--suite",
                "oolong/trec_coarse",
                "--data",
                bad_trec.to_str().unwrap(),
            ],
            "line 2: `QQQ` is not a TREC coarse label",
        ),
        (vec!["--suite", "ruler/niah"], "unknown suite `ruler/niah`"),
    ] {
        let output = eval_command(&sb, &mock, &out, &flags).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{flags:?}: {stderr}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert_eq!(mock.control().request_count(), 0);
}

/// A fake of the official library (`rlm.RLM`, `rlm.logger.RLMLogger`): it asks the
/// model once, as a plain call, logs the reply as its one iteration, and appends what
/// it was given to `record`. Reached through a python that puts it first on its path,
/// as RLM_RLMS_PYTHON.
fn fake_rlms(sb: &Sandbox, record: &Path) -> PathBuf {
    let library = sb.root().join("fake-rlms");
    std::fs::create_dir_all(library.join("rlm").join("logger")).unwrap();
    std::fs::write(
        library.join("rlm").join("logger").join("__init__.py"),
        r#"class RLMLogger:
    def __init__(self):
        self.iterations = []
    def get_trajectory(self):
        return {"run_metadata": {}, "iterations": self.iterations}
"#,
    )
    .unwrap();
    std::fs::write(
        library.join("rlm").join("__init__.py"),
        format!(
            r#"import json, urllib.request
RECORD = {record:?}
class _Usage:
    def __init__(self, i, o):
        self.total_input_tokens, self.total_output_tokens = i, o
class _Result:
    def __init__(self, response, usage):
        self.response, self.usage_summary = response, usage
class RLM:
    def __init__(self, backend, backend_kwargs, logger=None, **kwargs):
        self.kwargs, self.logger = backend_kwargs, logger
        shown = {{k: v for k, v in backend_kwargs.items() if k != "api_key"}}
        kwargs["logger"] = logger is not None
        with open(RECORD, "a") as f:
            f.write(json.dumps({{"backend": backend, "backend_kwargs": shown, "rlm": kwargs}}) + "\n")
    def _default_answer(self, *a, **kw):
        return ""
    def completion(self, prompt, root_prompt=None):
        body = {{"model": self.kwargs["model_name"], "messages": [{{"role": "user", "content":
            "Context:\n<<<\n" + prompt + "\n>>>\n\nQuestion: " + root_prompt + "\nAnswer with the answer only, no explanation."}}]}}
        request = urllib.request.Request(self.kwargs["base_url"].rstrip("/") + "/chat/completions",
            data=json.dumps(body).encode(), headers={{"Content-Type": "application/json"}})
        with urllib.request.urlopen(request, timeout=60) as r:
            reply = json.load(r)
        usage = reply.get("usage") or {{}}
        if self.logger is not None:
            self.logger.iterations.append({{"response": reply["choices"][0]["message"]["content"]}})
        return _Result(reply["choices"][0]["message"]["content"],
            _Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)))
    def close(self):
        pass
"#
        ),
    )
    .unwrap();
    let python = sb.root().join("fake-python");
    std::fs::write(
        &python,
        format!(
            "#!/bin/sh\nPYTHONPATH='{}' exec python3 \"$@\"\n",
            library.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).unwrap();
    python
}

#[test]
fn arm_rlms_is_built_in_with_the_rlm_arms_model_server_and_iterations() {
    let sb = Sandbox::new();
    let mock = oracle(Duration::ZERO);
    let out = sb.root().join("eval");
    let record = sb.root().join("rlms-calls.jsonl");
    let python = fake_rlms(&sb, &record);
    let output = eval_command(
        &sb,
        &mock,
        &out,
        &[
            "--suite",
            "ruler/niah_single_1,ruler/cwe",
            "--lengths",
            "4k",
            "--items",
            "2",
            "--arm",
            "rlms",
            "--max-iterations",
            "7",
            "--request-timeout",
            "90",
            "--temperature",
            "0",
        ],
    )
    .env("RLM_RLMS_PYTHON", &python)
    .output()
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let all = results(&out);
    // rlm, baseline and rlms (every arm by default), each scored; rlms reported its
    // tokens, so tokens and seconds per correct answer are known for every arm.
    for suite in ["ruler/niah_single_1", "ruler/cwe"] {
        for arm in ["rlm", "baseline", "rlms"] {
            assert_eq!(scores(&all, suite, arm), [1.0, 1.0], "{suite} {arm}");
        }
        let row = stdout
            .lines()
            .find(|l| l.starts_with(&format!("| {suite} | 4k | rlms |")))
            .unwrap();
        assert!(!row.contains("unknown"), "{row}");
    }
    for r in all.iter().filter(|r| r["arm"] == "rlms") {
        assert!(r["input_tokens"].as_u64().unwrap() > 100, "{r}");
    }
    // summary.json: the table's cells, tokens and seconds per correct answer for every
    // arm.
    let summary: Vec<Value> =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary.len(), 2 * 3);
    for row in &summary {
        assert!(row["tokens_per_correct"].as_f64().unwrap() > 0.0, "{row}");
        assert!(row["seconds_per_correct"].as_f64().unwrap() > 0.0, "{row}");
    }
    // The library got the rlm arm's model, server, iterations, timeout, temperature.
    let calls: Vec<Value> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(calls.len(), 4);
    let base_url = mock.control().openai_base_url();
    for call in &calls {
        assert_eq!(call["backend"], "openai");
        assert_eq!(call["backend_kwargs"]["model_name"], "oracle");
        assert_eq!(call["backend_kwargs"]["base_url"], base_url.as_str());
        assert_eq!(call["backend_kwargs"]["timeout"], 90.0);
        assert_eq!(call["backend_kwargs"]["sampling_args"]["temperature"], 0.0);
        assert_eq!(call["rlm"]["max_iterations"], 7);
        assert_eq!(call["rlm"]["logger"], true);
    }
    // The library's trajectory is kept beside each answer: its one iteration is the
    // reply the item was scored on.
    for r in all.iter().filter(|r| r["arm"] == "rlms") {
        let answers = out.join("arms").join("rlms");
        let kept: Vec<Value> = std::fs::read_dir(&answers)
            .unwrap()
            .filter_map(|dir| {
                let file = dir.ok()?.path().join("answer.out.trajectory.json");
                serde_json::from_slice(&std::fs::read(file).ok()?).ok()
            })
            .collect();
        assert_eq!(kept.len(), 4, "{}", answers.display());
        let got = r["got"].as_str().unwrap_or_default().trim();
        assert!(
            kept.iter().any(|t| t["iterations"][0]["response"]
                .as_str()
                .is_some_and(|reply| reply.trim() == got)),
            "{r}"
        );
    }
    // Without a python that has the library: one clear error before anything runs.
    let missing = eval_command(
        &sb,
        &mock,
        &sb.root().join("eval-missing"),
        &[
            "--suite",
            "ruler/vt",
            "--lengths",
            "4k",
            "--items",
            "1",
            "--arm",
            "rlms",
        ],
    )
    .env_remove("RLM_RLMS_PYTHON")
    .env_remove("RLM_ARMS_DIR")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&missing.stderr);
    assert_eq!(missing.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("scripts/arms/setup-rlms.sh"), "{stderr}");
    let without = eval_command(
        &sb,
        &mock,
        &sb.root().join("eval-without"),
        &[
            "--suite",
            "ruler/vt",
            "--lengths",
            "4k",
            "--items",
            "1",
            "--arm",
            "rlms",
        ],
    )
    .env("RLM_RLMS_PYTHON", "python3")
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert_eq!(without.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot import the official RLM library"),
        "{stderr}"
    );
}
