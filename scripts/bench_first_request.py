#!/usr/bin/env python3
"""Start latency against a model server 150 ms away (issue 49, item 15).

Measures, for `rlm-orchestrate run` against `mock-llm --latency-ms 150` (every answer,
side requests such as /v1/models too, waits 150 ms):
  1. root run, empty data directory: process start -> first model request at the mock
  2. root run again, same data directory
  3. the nested child of each (`sub_rlm`): the parent's `sub_agent_spawned` event ->
     the child's first model request at the mock
and the side requests (discovery, tokenizers) each run made. Median of N repetitions.

Usage: scripts/bench_first_request.py [--bin PATH] [--mock PATH] [--runs N]
                                      [--latency-ms MS] [--env ENV]
Defaults: target/debug binaries (build them first), 5 runs, 150 ms, --env python.
Give `--bin` an older build to measure it against the same mock. Prints Markdown.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = {
    "rules": [
        {"contains": "Task: the child's part", "reply": "FINAL(done by the child)"},
        {"contains": "done by the child", "reply": "FINAL_VAR(answer)"},
        {"contains": "Task: delegate",
         "reply": "```repl\nanswer = sub_rlm(\"the child's part\")\nprint(answer)\n```"},
    ],
}


def get(url):
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def start_mock(mock, latency_ms, work):
    script = os.path.join(work, "script.json")
    with open(script, "w") as f:
        json.dump(SCRIPT, f)
    proc = subprocess.Popen([mock, "--script", script, "--latency-ms", str(latency_ms),
                             "--context-window", "32768"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for line in proc.stdout:
        if line.startswith("listening on "):
            return proc, line.split()[-1].strip()
    raise SystemExit("mock-llm did not start")


def one_run(binary, url, data_dir, env_kind):
    """Runs the root (which starts one child); returns (root ms, child ms, side requests)."""
    side_before = len(get(url + "/_mock/side_requests"))
    seen_before = len(get(url + "/_mock/requests"))
    started_us = time.time() * 1e6
    out = subprocess.run([binary, "--data-dir", data_dir, "run", "delegate", "--model", "mock",
                          "--sub-model", "sub-mock", "--base-url", url + "/v1", "--env", env_kind,
                          "--no-cache"],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0 or "done by the child" not in out.stdout:
        raise SystemExit(f"the run failed: {out.stderr[-2000:]}")
    requests = get(url + "/_mock/requests")[seen_before:]
    root_first = min(r["received_unix_us"] for r in requests if r["body"].get("model") == "mock")
    child_first = min(r["received_unix_us"] for r in requests if r["body"].get("model") == "sub-mock")
    spawned_ms = None
    for run in os.listdir(os.path.join(data_dir, "runs")):
        with open(os.path.join(data_dir, "runs", run, "events.jsonl")) as f:
            for line in f:
                event = json.loads(line)
                if event.get("kind") == "sub_agent_spawned":
                    spawned_ms = event["ts_ms"] if spawned_ms is None else max(spawned_ms, event["ts_ms"])
    side = len(get(url + "/_mock/side_requests")) - side_before
    return (root_first - started_us) / 1000, child_first / 1000 - spawned_ms, side


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "rlm-orchestrate"))
    parser.add_argument("--mock", default=os.path.join(ROOT, "target", "debug", "mock-llm"))
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--latency-ms", type=int, default=150)
    parser.add_argument("--env", default="python")
    args = parser.parse_args()
    figures = {"first": [], "second": []}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as work:
            mock, url = start_mock(args.mock, args.latency_ms, work)
            try:
                data_dir = os.path.join(work, "data")
                figures["first"].append(one_run(args.bin, url, data_dir, args.env))
                figures["second"].append(one_run(args.bin, url, data_dir, args.env))
            finally:
                mock.terminate()
                mock.wait()
    print(f"`{os.path.relpath(args.bin, ROOT)}`, mock latency {args.latency_ms} ms, --env {args.env}, "
          f"median of {args.runs}:\n")
    print("| run | root: start → first request | child: spawned → first request | side requests (root + child) |")
    print("| --- | --- | --- | --- |")
    for name, label in [("first", "first (empty data directory)"), ("second", "second (same data directory)")]:
        rows = figures[name]
        root = statistics.median(r[0] for r in rows)
        child = statistics.median(r[1] for r in rows)
        side = statistics.median(r[2] for r in rows)
        print(f"| {label} | {root:.0f} ms | {child:.0f} ms | {side:g} |")


if __name__ == "__main__":
    sys.exit(main())
