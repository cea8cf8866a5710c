#!/usr/bin/env python3
"""Why each item of an `rlm-orchestrate eval` reading was not right, from its traces.

Usage: scripts/eval-failures.py WORK_DIR [--items]

WORK_DIR is a reading's work directory (`.local-models/eval`, `.local-models/eval-NAME`,
`.local-models/variants-NAME`): one directory per step holding `results.json`, and
`data/runs/<run id>/events.jsonl` for the RLM arm's runs — or the reading as
`scripts/eval-local.sh collect` keeps it (`.local-models/readings/<reading>`), where each
step keeps its runs' events as `<step>/runs/<run id>/events.jsonl.gz`. Every item scored
below 1 gets one cause, the first that fits:

  window   the run (or the arm) failed on a request past the model's window: the
           server's refusal ("maximum context length", "exceed context window"),
           llama-cpp-python's empty stream ("the stream ended without data"), or rlm's
           own refusal to send what its estimate says does not fit.
  format   the run ended without an answer of the model's own (forced) after a reply
           that was not understood as it was meant: FINAL / FINAL_VAR called inside a
           code cell where the REPL did not define it (NameError), or repeated
           corrections of one reply form (other than code repeated unchanged), or a
           tool call refused for a missing argument the reply did write (the parser
           lost it: `"reduce"` beside the arguments, not in them). A run that got past
           such a reply and answered is not counted here.
  repeat   the run was stopped (forced) because the model kept sending code or a call
           that had already run twice: refused (repeat_limit) and sent again, until the
           loop's stop on the same correction three times in a row. The model cycles
           through what it already did instead of answering or looking elsewhere.
  other    the reply was understood and the run ended within the window: a wrong
           answer, or no answer in the iterations (wrong code, wrong reduction, gave
           up — what only reading the trace (`runs show`) tells apart).

Prints a markdown table per cell (step, suite, length, arm) and the totals; --items
adds one line per failing item (run id, cause, the evidence).
"""

import collections
import glob
import gzip
import json
import os
import re
import sys

WINDOW = re.compile(
    r"stream ended without data|maximum context length|exceed(?:s|ed)? (?:the )?context window"
    r"|context_length_exceeded|Requested tokens \(\d+\) exceed"
    # rlm's own refusal before it sends: the fixed part of the conversation does not fit.
    r"|over the \d+ tokens the (?:sub-)?model's window leaves",
    re.IGNORECASE,
)
FINAL_NAME_ERROR = re.compile(r"NameError: name '(FINAL|FINAL_VAR|Final|final|SUBMIT)' is not defined")
STOPPED_ON_FORM = re.compile(r"stopping: the reply was again (.+?), after \d+ corrections")
STOPPED_ON_REPEAT = re.compile(r"stopping: the reply needed the same correction \(repeat_limit\) again")
MISSING_ARGUMENT = re.compile(r"invalid call of \w+: missing field `(\w+)`")


def events_of(data_dir, step_dir, run_id):
    """The events of one run: from the data directory, else as committed beside the step."""
    if not run_id:
        return []
    path = os.path.join(data_dir, "runs", run_id, "events.jsonl")
    committed = os.path.join(step_dir, "runs", run_id, "events.jsonl.gz")
    if os.path.exists(path):
        opened = open(path, encoding="utf-8")
    elif os.path.exists(committed):
        opened = gzip.open(committed, "rt", encoding="utf-8")
    else:
        return []
    events = []
    with opened as lines:
        for line in lines:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def cause(result, events):
    """(cause, evidence) of one item scored below 1."""
    texts = [result.get("failed") or "", result.get("error") or "", result.get("stderr_tail") or ""]
    texts += [e.get("message", "") for e in events if e.get("kind") in ("error", "warning")]
    for text in texts:
        found = WINDOW.search(text)
        if found:
            return "window", found.group(0)
    texts_by_step = collections.defaultdict(str)
    for e in events:
        if e.get("kind") == "text":
            texts_by_step[e.get("iteration")] += e.get("text") or ""
    for e in events if result.get("forced") else []:
        if e.get("kind") == "exec":
            found = FINAL_NAME_ERROR.search(e.get("output") or "")
            if found:
                return "format", found.group(0)
            missing = MISSING_ARGUMENT.search(e.get("output") or "")
            if missing and f'"{missing.group(1)}"' in texts_by_step[e.get("iteration")]:
                return "format", missing.group(0) + " (written in the reply)"
        if e.get("kind") == "warning":
            found = STOPPED_ON_FORM.search(e.get("message", ""))
            if found and "already ran" not in found.group(1):
                return "format", found.group(0)
    if result.get("forced"):
        for text in texts:
            found = STOPPED_ON_REPEAT.search(text)
            if found:
                return "repeat", found.group(0)
        return "other", "forced: no answer within the iterations"
    return "other", "answered: " + (result.get("got") or "").strip().replace("\n", " ")[:60]


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    work = args[0]
    data_dir = os.path.join(work, "data")
    cells = collections.defaultdict(lambda: collections.Counter())
    items = []
    for path in sorted(glob.glob(os.path.join(work, "*", "results.json"))):
        step = os.path.basename(os.path.dirname(path))
        with open(path, encoding="utf-8") as f:
            rows = json.load(f)
        for r in rows:
            if r.get("error"):
                continue
            key = (step, r["suite"], r["length"], r["arm"])
            cells[key]["items"] += 1
            if r["score"] >= 1:
                cells[key]["right"] += 1
                continue
            events = events_of(data_dir, os.path.dirname(path), r.get("run_id"))
            why, evidence = cause(r, events)
            cells[key][why] += 1
            items.append((key, r.get("run_id") or "-", why, evidence))
    print("| step | suite | length | arm | items | right | not right | window | format | repeat | other |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    total = collections.Counter()
    for (step, suite, length, arm), c in sorted(cells.items()):
        wrong = c["items"] - c["right"]
        print(
            f"| {step} | {suite} | {length // 1024}k | {arm} | {c['items']} | {c['right']} | {wrong} "
            f"| {c['window']} | {c['format']} | {c['repeat']} | {c['other']} |"
        )
        total.update(c)
    wrong = total["items"] - total["right"]
    share = lambda n: f"{n} ({100 * n / wrong:.0f} %)" if wrong else "0"
    print(
        f"| **all** | | | | {total['items']} | {total['right']} | {wrong} "
        f"| {share(total['window'])} | {share(total['format'])} | {share(total['repeat'])} "
        f"| {share(total['other'])} |"
    )
    if "--items" in sys.argv:
        print()
        for (step, suite, length, arm), run_id, why, evidence in items:
            print(f"- {step} {suite} {length // 1024}k {arm} {run_id}: {why} — {evidence}")


if __name__ == "__main__":
    main()
