#!/usr/bin/env python3
"""What `--sandbox auto` costs against `--sandbox off` (issue 11).

Measures, for each mode, against the instant scripted mock (interleaved runs, medians):
  1. start -> the second model request of a run whose first step runs one trivial cell
     (the kernel must be started, confined, and ready: what a user waits for)
  2. per-step request-to-request time, trivial code, 50 steps
  3. a 64 MiB needle: start -> answer

Usage: scripts/bench_sandbox.py [--runs N]   Builds the release binaries first.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402

MODES = ["off", "auto"]


def first_cell(workdir, mode):
    mock = bench_run.Mock(["```repl\nx = 1\n```", "FINAL(ok)"], workdir)
    cmd, env = bench_run.run(mock, workdir, "q", None, ["--sandbox", mode])
    start = time.time()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    second = mock.requests()[1]["received_unix_us"] / 1e6
    mock.stop()
    return (second - start) * 1000


def steps(workdir, mode, count=50):
    mock = bench_run.Mock(["```repl\nx = 1\n```"] * count + ["FINAL(done)"], workdir)
    cmd, env = bench_run.run(mock, workdir, "q", None,
                             ["--max-iterations", str(count + 5), "--sandbox", mode])
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    times = [r["received_unix_us"] for r in mock.requests()]
    mock.stop()
    return statistics.median((b - a) / 1000 for a, b in zip(times[1:], times[2:]))


def needle(workdir, mode, context):
    code = bench_run.NEEDLE_CODE["python"]
    mock = bench_run.Mock([f"```repl\n{code}\n```", "FINAL_VAR(answer)"], workdir)
    cmd, env = bench_run.run(mock, workdir, "q", context, ["--sandbox", mode])
    start = time.time()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    elapsed = time.time() - start
    mock.stop()
    return elapsed


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()
    bench_run.build()
    with tempfile.TemporaryDirectory() as workdir:
        context = os.path.join(workdir, "needle.log")
        bench_run.make_context(context, 64 << 20, "SECRET-CODE=7f3a9c")
        results = {mode: {"first": [], "step": [], "needle": []} for mode in MODES}
        for i in range(args.runs):
            for mode in MODES:
                results[mode]["first"].append(first_cell(workdir, mode))
                if i < 3:
                    results[mode]["step"].append(steps(workdir, mode))
                    results[mode]["needle"].append(needle(workdir, mode, context))
        print("| measure | --sandbox off | --sandbox auto |")
        print("| --- | --- | --- |")
        row = lambda name, key, fmt: print(
            f"| {name} | " + " | ".join(fmt(statistics.median(results[m][key])) for m in MODES) + " |")
        row(f"start -> first cell's output reaches the model, median of {args.runs}", "first",
            lambda v: f"{v:.0f} ms")
        row("per-step request-to-request, trivial code, 50 steps (median of 3 runs' medians)", "step",
            lambda v: f"{v:.2f} ms")
        row("64 MiB needle, start -> answer, median of 3", "needle", lambda v: f"{v:.2f} s")


if __name__ == "__main__":
    main()
