#!/usr/bin/env python3
"""`rlm-orchestrate run --env tools` driven by a real local model (issue 10, optional).

Needs a model server started by scripts/local-model.sh (not run by CI). Generates a
multi-megabyte log with one needle line, asks "What is the vault code?" N times per
configuration, and prints a Markdown table (answer right?, forced?, steps, tokens,
seconds) plus where each run's trace is kept, so a transcript can be read with
`rlm-orchestrate --data-dir DIR runs show RUN_ID`.

Usage:
  scripts/local_model_e2e.py --base-url http://127.0.0.1:8091/v1 --model qwen2.5-coder-1.5b
      [--runs 5] [--mib 10] [--protocol native,text] [--out DIR] [-- extra run flags]
The release binary is built first. --out (default: a new temp dir) keeps the log,
the data directory and one `runs show` transcript per run.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402

NEEDLE = "2026-11-22 svc=vault level=WARN the vault code is 7291"


def make_log(path, mib):
    rng = random.Random(1)
    lines = mib * (1 << 20) // 51
    with open(path, "w") as f:
        for i in range(lines):
            f.write(f"2026-11-22 svc=api level=INFO req={rng.getrandbits(32):08x} handled\n")
            if i == lines * 3 // 4:
                f.write(NEEDLE + "\n")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--mib", type=int, default=10)
    parser.add_argument("--protocol", default="native")
    parser.add_argument("--out")
    parser.add_argument("extra", nargs="*")
    args = parser.parse_args()
    bench_run.build()
    out = args.out or tempfile.mkdtemp(prefix="rlm-local-model-")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(out, "app.log")
    if not os.path.exists(log):
        make_log(log, args.mib)
    data = os.path.join(out, "data")
    print(f"log: {log} ({os.path.getsize(log) / (1 << 20):.1f} MiB); data dir: {data}\n")
    print("| protocol | run | answer | right | forced | steps | tokens (prompt + completion) | seconds |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for protocol in args.protocol.split(","):
        for n in range(1, args.runs + 1):
            cmd = [bench_run.BIN, "--data-dir", data, "-q", "run", "What is the vault code?", "--context", log,
                   "--base-url", args.base_url, "--model", args.model, "--env", "tools",
                   "--tool-protocol", protocol, "--no-stream", "--json"] + args.extra
            start = time.time()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, OPENAI_API_KEY=""))
            seconds = time.time() - start
            if proc.returncode != 0:
                print(f"| {protocol} | {n} | exit {proc.returncode}: {proc.stderr.strip()[:120]} | no | - | - | - | {seconds:.0f} |")
                continue
            result = json.loads(proc.stdout)
            answer = " ".join(result["answer"].split())
            right = "7291" in answer
            usage = result["usage"]
            show = subprocess.run([bench_run.BIN, "--data-dir", data, "runs", "show", result["run_id"]],
                                  capture_output=True, text=True)
            with open(os.path.join(out, f"{protocol}-{n}-{result['run_id']}.txt"), "w") as f:
                f.write(show.stdout)
            print(f"| {protocol} | {n} | {answer[:80]} | {'yes' if right else 'no'} | {'yes' if result['forced'] else 'no'} | "
                  f"{result['iterations']} | {usage['prompt_tokens']} + {usage['completion_tokens']} | {seconds:.0f} |",
                  flush=True)
    print(f"\ntranscripts: {out}/*.txt")


if __name__ == "__main__":
    main()
