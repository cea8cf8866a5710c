#!/usr/bin/env python3
"""Adversarial replies through `rlm-orchestrate run` (issue 49, item 4).

Against the instant scripted mock model (`mock-llm`), the first reply of a run is one of
the inputs the fourth hostile review named, then the mock answers `FINAL(done)`:
  final-open   280 KB of `FINAL(\\n` (the FINAL finder, `--env python`)
  brace-text   160 KB of `{` under `--env tools --tool-protocol text` (the text tool-call
               parser)
and, to show the parsers stay linear at the size the property tests use, the same two
at 1 MB. For each: start -> exit of the run (`--max-iterations 1`: the reply, then the
forced answer), and the reply's step as the trace times it (`step_completed`).

Usage: scripts/bench_parsers.py [--debug] [--no-build] [--runs N] [--only NAME]
Release binaries by default (built first, as scripts/bench_run.py does); `--debug` uses
`target/debug` (what `cargo build` made). Prints a Markdown table.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402

INPUTS = {
    "final-open": ("FINAL(\n" * (280_000 // 7), ["--env", "python"]),
    "brace-text": ("{" * 160_000, ["--env", "tools", "--tool-protocol", "text"]),
    "final-open-1mb": ("FINAL(\n" * (1_000_000 // 7), ["--env", "python"]),
    "brace-text-1mb": ("{" * 1_000_000, ["--env", "tools", "--tool-protocol", "text"]),
}


def one_run(workdir, ctx, name):
    reply, extra = INPUTS[name]
    mock = bench_run.Mock([reply, "FINAL(done)"], workdir)
    cmd, env = bench_run.run(mock, workdir, "count the apples", ctx,
                             list(extra) + ["--max-iterations", "1", "--no-stream"])
    start = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    elapsed = time.time() - start
    mock.stop()
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}: {proc.stderr[-2000:]}")
    result = json.loads(proc.stdout)
    data_dir = cmd[cmd.index("--data-dir") + 1]
    step_ms = None
    with open(os.path.join(data_dir, "runs", result["run_id"], "events.jsonl")) as f:
        for line in f:
            event = json.loads(line)
            if event.get("kind") == "step_completed" and event.get("iteration") == 1:
                step_ms = event.get("duration_ms")
    return {"elapsed": elapsed, "step_ms": step_ms, "answer": result["answer"]}


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    if "--debug" in sys.argv:
        bench_run.BIN = os.path.join(bench_run.ROOT, "target", "debug", "rlm-orchestrate")
        bench_run.MOCK = os.path.join(bench_run.ROOT, "target", "debug", "mock-llm")
        profile = "debug"
    else:
        profile = "release"
        if "--no-build" not in sys.argv:
            bench_run.build()
    names = [only] if only else list(INPUTS)
    with tempfile.TemporaryDirectory(prefix="rlm-bench-parsers-") as workdir:
        ctx = os.path.join(workdir, "context.txt")
        with open(ctx, "w") as f:
            f.write("one apple\n" * 100)
        rows = {name: [one_run(workdir, ctx, name) for _ in range(runs)] for name in names}
    print(f"| reply ({profile} build, median of {runs}) | start → exit | the reply's step |")
    print("| --- | --- | --- |")
    for name, results in rows.items():
        elapsed = statistics.median(r["elapsed"] for r in results)
        steps = [r["step_ms"] for r in results if r["step_ms"] is not None]
        step = f"{statistics.median(steps) / 1000:.2f} s" if steps else "—"
        print(f"| {name} | {elapsed:.2f} s | {step} |")


if __name__ == "__main__":
    main()
