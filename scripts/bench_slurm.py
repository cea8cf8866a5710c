#!/usr/bin/env python3
"""Fan-out through Slurm beside the local runner (issue 15): 16 and 200 trivial agents
(`sh -c 'echo ok'`), timed inside the REPL by the model's code, `--runner local` and
`--runner slurm` alternating; and `srun true` alone, the per-job floor.

Needs a cluster: `scripts/slurm-local.sh start` (one node, 16 CPUs declared).
Usage: scripts/bench_slurm.py [--runs N]   (builds release binaries; prints a Markdown table)
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_agents import AGENT, timed_run  # noqa: E402
from bench_run import ROOT, build  # noqa: E402


def fan_out(workdir, agents, runner, parallel):
    code = ("```repl\nimport time\nt = time.time()\n"
            f"r = spawn_agents([('task %d' % i, []) for i in range({agents})])\n"
            "assert all(x == 'ok' for x in r), r[:3]\nprint('ELAPSED', time.time() - t)\n```")
    return timed_run(workdir, [code, "FINAL(done)"],
                     ["--agent-cmd", AGENT, "--max-parallel", str(parallel), "--no-cache",
                      "--runner", runner])


def srun_floor(runs):
    times = []
    for _ in range(runs):
        start = time.time()
        subprocess.run(["srun", "--ntasks=1", "--quiet", "true"], check=True)
        times.append(time.time() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    build()
    rows = []
    with tempfile.TemporaryDirectory(dir=os.path.join(ROOT, "target")) as workdir:
        for agents, parallel in [(16, 16), (200, 16)]:
            local, slurm = [], []
            for _ in range(args.runs):
                local.append(fan_out(workdir, agents, "local", parallel))
                slurm.append(fan_out(workdir, agents, "slurm", parallel))
            lo, sl = statistics.median(local), statistics.median(slurm)
            rows.append((f"{agents} trivial agents, --max-parallel {parallel} (median of {args.runs})",
                         f"{lo:.2f} s", f"{sl:.2f} s",
                         f"{(sl - lo) / agents * parallel * 1000:.0f} ms"))
    floor = srun_floor(10)
    print("| measure | --runner local | --runner slurm | slurm overhead per job (× parallel / agents) |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print(f"| `srun --ntasks=1 true` alone (median of 10) | | {floor * 1000:.0f} ms | |")


if __name__ == "__main__":
    main()
