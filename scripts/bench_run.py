#!/usr/bin/env python3
"""Benchmarks of `rlm-orchestrate run` against the instant scripted mock model.

Measures (issue 3):
  1. process start -> first model request, 2 KB context (median of N runs)
  2. per-step request-to-request time with trivial code (median over 50 steps)
  3. a needle in a 512 MiB context: start -> answer, peak RSS of the orchestrator and
     of the Python kernel, sampled from /proc
  4. root request bytes for a 2 KB and a 512 MiB context

Usage: scripts/bench_run.py [--quick]   (--quick: 64 MiB instead of 512 MiB)
Builds the release binaries first. Prints a Markdown table.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "rlm-orchestrate")
MOCK = os.path.join(ROOT, "target", "release", "mock-llm")


def build():
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "rlm-orchestrate", "-p", "rlm-test-support",
                    "--bin", "rlm-orchestrate", "--bin", "mock-llm"], cwd=ROOT, check=True)
    state_conditions()


def cpu_busy(seconds=1.0):
    """The fraction of all CPUs' time spent busy over `seconds` (from /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        idle = fields[3] + fields[4]  # idle + iowait
        return sum(fields), idle
    total0, idle0 = sample()
    time.sleep(seconds)
    total1, idle1 = sample()
    total = max(total1 - total0, 1)
    return 1 - (idle1 - idle0) / total


def state_conditions():
    """Prints, on stderr, the conditions the figures depend on, and warns when the
    machine is busy. The figures in BENCHMARKS.md were taken on an idle machine: the
    per-step and nested-run figures are chains of wake-ups between processes (model
    server, orchestrator, kernel), and other load changes them in both directions (a
    busy CPU wakes faster than an idle one that has to leave a sleep state, but runs
    our work later)."""
    busy = cpu_busy()
    python = subprocess.run(["python3", "-c", "import sys; print(sys.version.split()[0])"],
                            capture_output=True, text=True).stdout.strip()
    print(f"conditions: {os.cpu_count()} CPUs, {busy:.0%} busy in the second before measuring, "
          f"release build, python {python}, data directories on {ROOT}'s file system", file=sys.stderr)
    if busy > 0.15:
        print("warning: the machine is busy; the figures will not be comparable with BENCHMARKS.md "
              "(stop other work and run again)", file=sys.stderr)


class Mock:
    """mock-llm serving a JSON script on 127.0.0.1 (TCP_NODELAY, keep-alive)."""

    def __init__(self, replies, workdir, latency_ms=0):
        path = os.path.join(workdir, f"script-{time.time_ns()}.json")
        with open(path, "w") as f:
            json.dump(replies, f)
        self.proc = subprocess.Popen([MOCK, "--script", path, "--latency-ms", str(latency_ms)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = self.proc.stdout.readline().strip()
        self.url = line.rsplit(" ", 1)[-1]

    def requests(self):
        with urllib.request.urlopen(self.url + "/_mock/requests", timeout=10) as r:
            data = json.load(r)
        return [q for q in data if q["path"].endswith("/chat/completions")]

    def stop(self):
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run(mock, workdir, task, context, extra=()):
    data = os.path.join(workdir, f"data-{time.time_ns()}")
    cmd = [BIN, "--data-dir", data, "-q", "run", task, "--base-url", mock.url + "/v1", "--model", "mock",
           "--json"] + (["--context", context] if context else []) + list(extra)
    env = dict(os.environ, OPENAI_API_KEY="")
    return cmd, env


def make_context(path, size, needle=None):
    line = b'2026-11-22T09:00:00Z svc=api level=info msg="request served" latency_ms=12\n'
    with open(path, "wb") as f:
        written = 0
        chunk = line * 16384
        while written < size:
            if needle and written >= size // 2:
                f.write(needle.encode() + b"\n")
                written += len(needle) + 1
                needle = None
            f.write(chunk)
            written += len(chunk)


def vm_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def descendants(pid):
    out = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                for child in f.read().split():
                    out.append(int(child))
                    out.extend(descendants(int(child)))
    except OSError:
        pass
    return out


def run_with_peaks(cmd, env, interval=0.02):
    """Runs `cmd` to its end, sampling /proc: (seconds, its stdout, peak RSS in KiB of
    the process and of its largest descendant: {"orchestrator", "kernel"})."""
    peaks = {"orchestrator": 0, "kernel": 0}
    start = time.time()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE)
    done = threading.Event()

    def sample():
        while not done.is_set():
            peaks["orchestrator"] = max(peaks["orchestrator"], vm_hwm_kb(proc.pid) or 0)
            for child in descendants(proc.pid):
                peaks["kernel"] = max(peaks["kernel"], vm_hwm_kb(child) or 0)
            time.sleep(interval)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, _ = proc.communicate()
    elapsed = time.time() - start
    done.set()
    sampler.join()
    return elapsed, out, peaks


def bench_first_request(workdir, runs):
    ctx = os.path.join(workdir, "small.log")
    make_context(ctx, 2048)
    return first_request(workdir, ctx, runs)


def first_request(workdir, ctx, runs, extra=()):
    """(median, min) seconds from process start to the first model request over `ctx`,
    each run on a data directory of its own (removed afterwards)."""
    latencies = []
    for _ in range(runs):
        mock = Mock(["FINAL(ok)"], workdir)
        cmd, env = run(mock, workdir, "q", ctx, extra)
        start = time.time()
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        first = mock.requests()[0]["received_unix_us"] / 1e6
        latencies.append(first - start)
        mock.stop()
        subprocess.run(["rm", "-rf", cmd[cmd.index("--data-dir") + 1]], check=True)
    return statistics.median(latencies), min(latencies)


# The model's code for each environment: a trivial step, and the needle search.
STEP_CODE = {"python": "x = 1", "js": "var x = 1"}
NEEDLE_CODE = {
    "python": "i = context.find('SECRET-CODE=')\nanswer = context[i:i+18]\nprint(i, answer)",
    "js": "const i = context.indexOf('SECRET-CODE=')\nconst answer = context.slice(i, i + 18)\nconsole.log(i, answer)",
}


def bench_steps(workdir, steps=50, env_kind="python"):
    mock = Mock([f"```repl\n{STEP_CODE[env_kind]}\n```"] * steps + ["FINAL(done)"], workdir)
    cmd, env = run(mock, workdir, "q", None, ["--max-iterations", str(steps + 5), "--env", env_kind])
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    times = [r["received_unix_us"] for r in mock.requests()]
    mock.stop()
    gaps = [(b - a) / 1000 for a, b in zip(times[1:], times[2:])]  # skip the first (kernel start)
    return statistics.median(gaps), statistics.quantiles(gaps, n=10)[-1]


def bench_needle(workdir, size, env_kind="python"):
    ctx = os.path.join(workdir, f"needle-{size}.log")
    needle = "SECRET-CODE=7f3a9c"
    if not os.path.exists(ctx):
        make_context(ctx, size, needle)
    replies = [f"```repl\n{NEEDLE_CODE[env_kind]}\n```", "FINAL_VAR(answer)"]
    mock = Mock(replies, workdir)
    cmd, env = run(mock, workdir, "What is the secret code?", ctx, ["--env", env_kind])
    elapsed, out, peaks = run_with_peaks(cmd, env)
    answer = json.loads(out)["answer"]
    assert answer == needle, answer
    root_bytes = mock.requests()[0]["body_bytes"]
    mock.stop()
    return elapsed, peaks, root_bytes, os.path.getsize(ctx)


def root_bytes_small(workdir):
    ctx = os.path.join(workdir, "small2.log")
    make_context(ctx, 2048)
    mock = Mock(["FINAL(ok)"], workdir)
    cmd, env = run(mock, workdir, "What is the secret code?", ctx)
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    n = mock.requests()[0]["body_bytes"]
    mock.stop()
    return n


def main():
    quick = "--quick" in sys.argv
    size = (64 if quick else 512) << 20
    build()
    with tempfile.TemporaryDirectory(prefix="rlm-bench-") as workdir:
        first_median, first_min = bench_first_request(workdir, 10)
        step_median, step_p90 = bench_steps(workdir)
        elapsed, peaks, big_root, ctx_bytes = bench_needle(workdir, size)
        small_root = root_bytes_small(workdir)
    mib = ctx_bytes / (1 << 20)
    print(f"| measure | result | target |")
    print(f"| --- | --- | --- |")
    print(f"| start → first model request (2 KB context), median of 10 | {first_median*1000:.0f} ms (min {first_min*1000:.0f} ms) | ≤ 150 ms |")
    print(f"| per-step request-to-request, trivial code, 50 steps | median {step_median:.2f} ms, p90 {step_p90:.2f} ms | ≤ 2 ms median |")
    print(f"| {mib:.0f} MiB needle, start → answer | {elapsed:.2f} s | ≤ 3 s |")
    print(f"| peak RSS, orchestrator | {peaks['orchestrator']/1024:.0f} MiB | ≤ 300 MiB |")
    print(f"| peak RSS, Python kernel | {peaks['kernel']/1024:.0f} MiB ({peaks['kernel']*1024/ctx_bytes:.2f}× the context) | ≤ 1.2× |")
    print(f"| root request bytes, 2 KB vs {mib:.0f} MiB context | {small_root} vs {big_root} (Δ {abs(big_root-small_root)}) | within a few hundred bytes |")


if __name__ == "__main__":
    main()
