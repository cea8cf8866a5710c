#!/usr/bin/env python3
"""Benchmarks of sub-agents (issue 4), each timed inside the REPL by the model's code:

  1. 200 trivial external agents at --max-parallel 8, against `xargs -P8` running the
     same command 200 times
  2. 16 llm_query_parallel calls at --max-parallel 16 against a mock with 0.5 s latency
  3. spawn -> result of one sub_rlm child process (a nested rlm-orchestrate run) with
     an instant mock

Usage: scripts/bench_agents.py   (builds release binaries; prints a Markdown table; the
data directories stay in target/bench-agents/, see main())
"""
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_run import BIN, ROOT, Mock, build  # noqa: E402

AGENT = "sh -c 'echo ok'"


def timed_run(workdir, replies, extra, latency_ms=0):
    """Runs the script; returns the first float the REPL printed after `ELAPSED`."""
    mock = Mock(replies, workdir, latency_ms)
    data = os.path.join(workdir, f"data-{time.time_ns()}")
    cmd = [BIN, "--data-dir", data, "-q", "run", "bench", "--base-url", mock.url + "/v1",
           "--model", "mock", "--json"] + extra
    subprocess.run(cmd, env=dict(os.environ, OPENAI_API_KEY=""), check=True, stdout=subprocess.DEVNULL)
    for request in mock.requests():
        text = json.dumps(request["body"])
        m = re.search(r"ELAPSED ([0-9.]+)", text.split("REPL output:")[-1]) if "REPL output:" in text else None
        if m:
            mock.stop()
            return float(m.group(1))
    mock.stop()
    raise RuntimeError("no ELAPSED line in any request")


def bench_fan_out(workdir, runs=5):
    """Medians of `runs` alternating runs of ours and of xargs (alternating, so that a
    busy moment of the machine does not land on one side only)."""
    code = ("```repl\nimport time\nt = time.time()\nr = spawn_agents([('task %d' % i, []) for i in range(200)])\n"
            "assert all(x == 'ok' for x in r), r[:3]\nprint('ELAPSED', time.time() - t)\n```")
    ours, xargs = [], []
    for _ in range(runs):
        ours.append(timed_run(workdir, [code, "FINAL(done)"],
                              ["--agent-cmd", AGENT, "--max-parallel", "8", "--no-cache"]))
        start = time.time()
        subprocess.run(f"seq 200 | xargs -P8 -I{{}} {AGENT} > /dev/null", shell=True, check=True)
        xargs.append(time.time() - start)
    return statistics.median(ours), statistics.median(xargs)


def bench_parallel_queries(workdir):
    code = ("```repl\nimport time\nt = time.time()\nr = llm_query_parallel(['question %d' % i for i in range(16)])\n"
            "print('ELAPSED', time.time() - t)\n```")
    replies = [code] + ["answer"] * 16 + ["FINAL(done)"]
    return timed_run(workdir, replies, ["--max-parallel", "16", "--no-cache"], latency_ms=500)


def bench_sub_rlm(workdir, runs=5):
    code = ("```repl\nimport time\nt = time.time()\nr = sub_rlm('child task')\nassert r == 'child answer', r\n"
            "print('ELAPSED', time.time() - t)\n```")
    return statistics.median(
        timed_run(workdir, [code, "FINAL(child answer)", "FINAL(done)"], ["--no-cache"]) for _ in range(runs))


def main():
    build()
    # Kept, not deleted: on ext4 without a journal (this machine's disk), every file
    # created within minutes of a mass deletion nearby pays for skipping the freshly
    # freed inodes (`recently_deleted` in the kernel), and each agent creates two files
    # (its result and the result's lock). Deleting this run's ~2 000 files at the end
    # made the next run up to 4x slower; that measured the harness, not rlm.
    # `cargo clean` (or rm -r target/bench-agents) removes them.
    parent = os.path.join(ROOT, "target", "bench-agents")
    os.makedirs(parent, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="run-", dir=parent)
    print(f"data in {workdir}", file=sys.stderr)
    ours, xargs = bench_fan_out(workdir)
    parallel = bench_parallel_queries(workdir)
    child = bench_sub_rlm(workdir)
    print("| measure | result | target |")
    print("| --- | --- | --- |")
    print(f"| 200 trivial agents, --max-parallel 8 (median of 5) | {ours:.3f} s vs xargs -P8 {xargs:.3f} s = {ours / xargs:.2f}× | ≤ 1.5× |")
    print(f"| 16 llm_query_parallel calls, 0.5 s mock latency, --max-parallel 16 | {parallel:.3f} s | ≤ 0.55 s |")
    print(f"| one sub_rlm child process, spawn → result, instant mock (median of 5) | {child * 1000:.0f} ms | ≤ 150 ms |")


if __name__ == "__main__":
    main()
