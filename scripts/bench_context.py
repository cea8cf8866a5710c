#!/usr/bin/env python3
"""Benchmarks of contexts given by path (issue 14): referenced (the default) beside
copied (--copy-context), in one run, against the instant scripted mock model.

Measures:
  1. process start -> first model request for 2 KB, 512 MiB and 3 GiB files
     (median of N runs each; target <= 50 ms referenced)
  2. a needle in 3 GiB found through search() (lazy, no flag): start -> answer, and
     the peak RSS of the orchestrator plus the kernel (target <= 512 MB)
  3. a needle in 512 MiB found with context.find: start -> answer (target <= 1.0 s)
  4. data directory growth of one run over a referenced file (target <= 1 MB)

Usage: scripts/bench_context.py [--runs N] [--skip-copy-3g]
Builds the release binaries first; files go to a temporary directory on the
repository's file system (5 GiB free needed, 8 GiB with the 3 GiB copy).
Prints a Markdown table.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402  (the mock, the context writer, /proc sampling)

NEEDLE = "SECRET-CODE=7f3a9c"
FIND_CODE = "i = context.find('SECRET-CODE=')\nanswer = context[i:i+18]\nprint(i, answer)"
SEARCH_CODE = ("hits = search(context, 'SECRET-CODE=')\nat = hits[0]['offset']\n"
               "answer = context[at:at+18]\nprint(type(context).__name__, hits[0]['line'], answer)")


def du(path):
    total = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except OSError:
                pass
    return total


def needle_run(workdir, ctx, code, extra=()):
    """start -> answer, peak RSS (KiB) of the orchestrator and of its largest child,
    and the data directory's size afterwards."""
    mock = bench_run.Mock([f"```repl\n{code}\n```", "FINAL_VAR(answer)"], workdir)
    cmd, env = bench_run.run(mock, workdir, "What is the secret code?", ctx, list(extra))
    data = cmd[2]
    elapsed, out, peaks = bench_run.run_with_peaks(cmd, env, interval=0.01)
    answer = json.loads(out)["answer"]
    assert answer == NEEDLE, answer
    mock.stop()
    size = du(data)
    subprocess.run(["rm", "-rf", data], check=True)
    return elapsed, peaks, size


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-copy-3g", action="store_true",
                        help="do not measure copying the 3 GiB file (3 GiB more disk, a minute)")
    args = parser.parse_args()
    bench_run.build()
    with tempfile.TemporaryDirectory(dir=os.path.join(bench_run.ROOT, "target")) as workdir:
        files = {}
        for name, size in [("2 KB", 2048), ("512 MiB", 512 << 20), ("3 GiB", 3 << 30)]:
            path = os.path.join(workdir, f"ctx-{size}.log")
            bench_run.make_context(path, size, NEEDLE)
            files[name] = path
        # Warm the page cache the same way for both modes.
        for path in files.values():
            subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=True)

        rows = []
        copy_limit = ["--max-context-bytes", str(4 << 30)]
        for name, path in files.items():
            ref = bench_run.first_request(workdir, path, args.runs, [])
            if name == "3 GiB" and args.skip_copy_3g:
                copy = None
            else:
                copy = bench_run.first_request(workdir, path, max(1, args.runs // 2 if name != "2 KB" else args.runs),
                                     ["--copy-context"] + copy_limit)
            rows.append((f"start → first model request, {name} file (median)",
                         f"{ref[0]*1000:.0f} ms (min {ref[1]*1000:.0f})",
                         f"{copy[0]*1000:.0f} ms" if copy else "not measured", "≤ 50 ms"))

        t, peaks, size = needle_run(workdir, files["512 MiB"], FIND_CODE)
        rows.append(("512 MiB needle (context.find on a str): start → answer", f"{t:.2f} s", "", "≤ 1.0 s"))
        rows.append(("  peak RSS orchestrator / kernel", f"{peaks['orchestrator']/1024:.0f} / {peaks['kernel']/1024:.0f} MB", "", ""))
        rows.append(("  data directory after the run", f"{size/1024:.0f} KB", "", "≤ 1 MB"))
        t_copy, peaks_copy, size_copy = needle_run(workdir, files["512 MiB"], FIND_CODE, ["--copy-context"])
        rows[-3] = (rows[-3][0], rows[-3][1], f"{t_copy:.2f} s", rows[-3][3])
        rows[-2] = (rows[-2][0], rows[-2][1], f"{peaks_copy['orchestrator']/1024:.0f} / {peaks_copy['kernel']/1024:.0f} MB", "")
        rows[-1] = (rows[-1][0], rows[-1][1], f"{size_copy/1024/1024:.0f} MB", rows[-1][3])

        t, peaks, size = needle_run(workdir, files["512 MiB"], SEARCH_CODE, ["--lazy-context", "always"])
        rows.append(("512 MiB needle, lazy (search()): start → answer", f"{t:.2f} s", "", ""))
        rows.append(("  peak RSS orchestrator / kernel", f"{peaks['orchestrator']/1024:.0f} / {peaks['kernel']/1024:.0f} MB", "", ""))

        t, peaks, size = needle_run(workdir, files["3 GiB"], SEARCH_CODE)
        total = (peaks["orchestrator"] + peaks["kernel"]) / 1024
        rows.append(("3 GiB needle, lazy by default (search()): start → answer", f"{t:.2f} s", "", ""))
        rows.append(("  peak RSS orchestrator + kernel", f"{peaks['orchestrator']/1024:.0f} + {peaks['kernel']/1024:.0f} = {total:.0f} MB", "", "≤ 512 MB"))
        rows.append(("  data directory after the run", f"{size/1024:.0f} KB", "", "≤ 1 MB"))

    print("| measure | referenced (default) | copied (--copy-context) | target |")
    print("|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
