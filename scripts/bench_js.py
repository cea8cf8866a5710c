#!/usr/bin/env python3
"""`--env js` beside `--env python`, measured in one run (issue 9).

For each environment, against the instant scripted mock model (`mock-llm`):
  1. per-step request-to-request time with trivial code (median over 50 steps)
  2. a needle in a 64 MiB and a 512 MiB text context: start -> answer
  3. peak RSS of the whole tree while doing it: the orchestrator (which holds the
     QuickJS heap under --env js) plus the Python kernel under --env python

Usage: scripts/bench_js.py [--quick]   (--quick: only 64 MiB)
Builds the release binaries first (as scripts/bench_run.py does). Prints a Markdown
table. Conditions: an otherwise idle machine; the 512 MiB file is generated in a temp
directory (needs ~1 GiB free on it).
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402


def main():
    quick = "--quick" in sys.argv
    sizes = [64 << 20] if quick else [64 << 20, 512 << 20]
    bench_run.build()
    rows = {}
    with tempfile.TemporaryDirectory(prefix="rlm-bench-js-") as workdir:
        for env_kind in ["python", "js"]:
            median, p90 = bench_run.bench_steps(workdir, env_kind=env_kind)
            rows.setdefault("step", {})[env_kind] = f"median {median:.2f} ms, p90 {p90:.2f} ms"
        for size in sizes:
            for env_kind in ["python", "js"]:
                elapsed, peaks, _, ctx_bytes = bench_run.bench_needle(workdir, size, env_kind=env_kind)
                total_kb = peaks["orchestrator"] + peaks["kernel"]
                ratio = total_kb * 1024 / ctx_bytes
                mib = size >> 20
                rows.setdefault(f"needle {mib}", {})[env_kind] = f"{elapsed:.2f} s"
                rows.setdefault(f"rss {mib}", {})[env_kind] = f"{total_kb / 1024:.0f} MiB ({ratio:.2f}× the context)"
    print("| measure | python | js |")
    print("| --- | --- | --- |")
    print(f"| per-step request-to-request, trivial code, 50 steps | {rows['step']['python']} | {rows['step']['js']} |")
    for size in sizes:
        mib = size >> 20
        print(f"| {mib} MiB needle, start → answer | {rows[f'needle {mib}']['python']} | {rows[f'needle {mib}']['js']} |")
        print(f"| {mib} MiB needle, peak RSS (orchestrator + kernel) | {rows[f'rss {mib}']['python']} | {rows[f'rss {mib}']['js']} |")


if __name__ == "__main__":
    main()
