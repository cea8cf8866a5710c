#!/usr/bin/env python3
"""Runs the benchmarks of bench_run.py and bench_agents.py for two builds, interleaved
round by round, so that both meet the same machine state (issue 12's figures).

Usage: scripts/bench_compare.py BEFORE_TARGET_DIR [AFTER_TARGET_DIR] [steps] [first] [sub] [fan] [needle]
  e.g. git worktree add /tmp/before <commit> && \\
       (cd /tmp/before && CARGO_TARGET_DIR=/tmp/before-target cargo build --release \\
          -p rlm-orchestrate -p rlm-test-support --bin rlm-orchestrate --bin mock-llm) && \\
       scripts/bench_compare.py /tmp/before-target target steps sub fan
Each TARGET_DIR must hold release/rlm-orchestrate and release/mock-llm (AFTER defaults
to this repository's target/, built first). Prints each measure per round.
"""
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_agents as ba  # noqa: E402
import bench_run as br  # noqa: E402

SUB_RLM_CODE = ("```repl\nimport time\nt = time.time()\nr = sub_rlm('child task')\nassert r == 'child answer', r\n"
                "print('ELAPSED', time.time() - t)\n```")


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    dirs = [a for a in args if os.path.isdir(a)]
    what = [a for a in args if a not in dirs] or ["steps", "first", "sub", "fan"]
    if len(dirs) == 1:
        br.build()
        dirs.append(os.path.join(br.ROOT, "target"))
    else:
        br.state_conditions()
    builds = {"before": dirs[0], "after": dirs[1]}
    parent = os.path.join(br.ROOT, "target", "bench-agents")
    os.makedirs(parent, exist_ok=True)
    workdir = tempfile.mkdtemp(prefix="compare-", dir=parent)
    results = {name: {} for name in builds}
    for _ in range(3):
        for name, target in builds.items():
            br.BIN = ba.BIN = os.path.join(target, "release", "rlm-orchestrate")
            br.MOCK = os.path.join(target, "release", "mock-llm")
            r = results[name]
            if "steps" in what:
                r.setdefault("per-step ms (median of 50)", []).append(br.bench_steps(workdir)[0])
            if "first" in what:
                r.setdefault("first request ms (median of 5)", []).append(br.bench_first_request(workdir, 5)[0] * 1000)
            if "sub" in what:
                runs = [ba.timed_run(workdir, [SUB_RLM_CODE, "FINAL(child answer)", "FINAL(done)"], ["--no-cache"])
                        for _ in range(3)]
                r.setdefault("sub_rlm child ms (median of 3)", []).append(1000 * statistics.median(runs))
            if "fan" in what:
                ours, xargs = ba.bench_fan_out(workdir, runs=1)
                r.setdefault("200 agents s", []).append(ours)
                r.setdefault("xargs -P8 s", []).append(xargs)
            if "needle" in what:
                r.setdefault("512 MiB needle s", []).append(br.bench_needle(workdir, 512 << 20)[0])
    for name, measures in results.items():
        for measure, values in measures.items():
            print(f"{name:6} {measure:32} " + ", ".join(f"{v:.3f}" for v in values))
    print(f"busy after: {br.cpu_busy():.0%}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
