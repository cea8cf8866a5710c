#!/usr/bin/env python3
"""`--env tools` beside `--env python` on a needle in 64 MiB (issue 10).

Against the instant scripted mock model (`mock-llm`), each environment answers "What is
the secret code?" over the same 64 MiB log the way a model would use it:
  python  one ```repl block (str.find + slice), then FINAL_VAR(answer)
  tools   ctx_grep(context, "secret-code"), ctx_slice around the offset it gives,
          then final_answer — native tool calls, and the same calls written as text
For each: steps, prompt + completion tokens (the mock's estimate: 4 characters a
token, the same rule for every run), bytes the model was sent, start -> answer, the
longest single step (the whole-context pass), and peak RSS of the process tree.

Usage: scripts/bench_tools.py [--runs N]   (default 3; the median is reported)
Builds the release binaries first (as scripts/bench_run.py does). Prints a Markdown
table. Conditions: an otherwise idle machine.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_run  # noqa: E402

NEEDLE = "SECRET-CODE=7f3a9c"
SIZE = 64 << 20


def script(kind, offset):
    if kind == "python":
        return [f"```repl\n{bench_run.NEEDLE_CODE['python']}\n```", "FINAL_VAR(answer)"]
    grep = {"name": "ctx_grep", "arguments": {"variable": "context", "pattern": "secret-code"}}
    slice_ = {"name": "ctx_slice", "arguments": {"variable": "context", "start": offset, "end": offset + 200}}
    final = {"name": "final_answer", "arguments": {"answer": NEEDLE}}
    if kind == "tools":
        return [{"tool_calls": [grep]}, {"tool_calls": [slice_]}, {"tool_calls": [final]}]
    as_text = lambda call: "```tool\n" + json.dumps({"tool": call["name"], "arguments": call["arguments"]}) + "\n```"
    return [as_text(grep), as_text(slice_), f"FINAL({NEEDLE})"]


def one_run(workdir, ctx, kind, offset):
    mock = bench_run.Mock(script(kind, offset), workdir)
    extra = {"python": ["--env", "python"], "tools": ["--env", "tools"],
             "tools-text": ["--env", "tools", "--tool-protocol", "text"]}[kind]
    cmd, env = bench_run.run(mock, workdir, "What is the secret code?", ctx, extra)
    peak = {"kb": 0}
    start = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    done = threading.Event()

    def sample():
        while not done.is_set():
            kb = (bench_run.vm_hwm_kb(proc.pid) or 0) + sum(bench_run.vm_hwm_kb(c) or 0 for c in bench_run.descendants(proc.pid))
            peak["kb"] = max(peak["kb"], kb)
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    elapsed = time.time() - start
    done.set()
    sampler.join()
    result = json.loads(out)
    assert result["answer"] == NEEDLE, result["answer"]
    requests = mock.requests()
    mock.stop()
    data_dir = cmd[cmd.index("--data-dir") + 1]
    events = os.path.join(data_dir, "runs", result["run_id"], "events.jsonl")
    longest = 0
    with open(events) as f:
        for line in f:
            event = json.loads(line)
            if event.get("kind") == "exec":
                longest = max(longest, event.get("duration_ms", 0))
    usage = result["usage"]
    return {
        "steps": result["iterations"],
        "tokens": (usage["prompt_tokens"], usage["completion_tokens"]),
        "sent": sum(r["body_bytes"] for r in requests),
        "elapsed": elapsed,
        "longest": longest,
        "rss_mib": peak["kb"] / 1024,
    }


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 3
    bench_run.build()
    line_len = len(b'2026-11-22T09:00:00Z svc=api level=info msg="request served" latency_ms=12\n')
    with tempfile.TemporaryDirectory(prefix="rlm-bench-tools-") as workdir:
        ctx = os.path.join(workdir, "needle.log")
        bench_run.make_context(ctx, SIZE, NEEDLE)
        with open(ctx, "rb") as f:
            offset = f.read().find(NEEDLE.encode())
        assert offset > 0 and offset % line_len == 0
        rows = {}
        for kind in ["python", "tools", "tools-text"]:
            results = [one_run(workdir, ctx, kind, offset) for _ in range(runs)]
            rows[kind] = results
    print(f"| 64 MiB needle, median of {runs} | steps | prompt + completion tokens | bytes sent to the model | start → answer | longest step (whole-context pass) | peak RSS (tree) |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for kind, results in rows.items():
        med = lambda key: statistics.median(r[key] for r in results)
        first = results[0]
        label = {"python": "`--env python` (one ```repl block)", "tools": "`--env tools`, native calls",
                 "tools-text": "`--env tools --tool-protocol text`"}[kind]
        print(f"| {label} | {first['steps']} | {first['tokens'][0]} + {first['tokens'][1]} | {first['sent']} | "
              f"{med('elapsed'):.2f} s | {med('longest'):.0f} ms | {med('rss_mib'):.0f} MiB |")


if __name__ == "__main__":
    main()
