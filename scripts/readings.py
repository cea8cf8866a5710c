#!/usr/bin/env python3
"""The status and the table of a reading: the `results.json` files `eval` wrote, one
directory a step (a cell), under one work directory. The reading scripts
(eval-local.sh, eval-public.sh, eval-variants.sh) all print their `status` and `table`
with this, so a figure means the same in each.

Definitions are `eval`'s own: an item is correct when its score is 1; the interval is
the 95 % Wilson score interval; tokens and seconds "per correct" are all of a cell's
over its correct answers; rows with an `error` (the item was not asked: the server was
down) are left out.

Usage: readings.py status WORK     items scored and right, per step and cell
       readings.py table WORK      the markdown table
"""

import collections
import glob
import json
import math
import os
import sys

Z_95 = 1.959964

HEADER = (
    "| step | suite | length | arm | items | correct | accuracy | 95 % CI | mean score "
    "| mean in / out tokens | tokens per correct | mean s | seconds per correct | forced | failed |"
)


def wilson(k, n, z=Z_95):
    """The 95 % Wilson score interval of k successes in n trials, as fractions."""
    if n == 0:
        return 0.0, 0.0
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return max(0.0, c - h), min(1.0, c + h)


def steps(work):
    """(step, rows) for every results.json one level below `work`, sorted by step."""
    for path in sorted(glob.glob(os.path.join(work, "*", "results.json"))):
        with open(path, encoding="utf-8") as file:
            yield os.path.basename(os.path.dirname(path)), json.load(file)


def cells(rows):
    """The asked rows of one step by (suite, length, arm), shortest length first."""
    grouped = collections.defaultdict(list)
    for row in rows:
        if not row.get("error"):
            grouped[(row["suite"], row["length"], row["arm"])].append(row)
    return sorted(grouped.items(), key=lambda kv: (kv[0][1], kv[0][0], kv[0][2]))


def correct(row):
    return row["score"] >= 1


def table_row(step, suite, length, arm, rows):
    """One cell of the table, as its markdown line."""
    n = len(rows)
    k = sum(1 for r in rows if correct(r))
    lo, hi = wilson(k, n)
    # Tokens over the items that report them (a failed run reports none): marked with
    # the count when some do not.
    usage = [
        (r["input_tokens"], r["output_tokens"])
        for r in rows
        if r.get("input_tokens") is not None and r.get("output_tokens") is not None
    ]
    mark = "" if len(usage) == n else f" ({len(usage)} of {n})"
    if usage:
        mean_in = sum(i for i, _ in usage) / len(usage)
        mean_out = sum(o for _, o in usage) / len(usage)
        tokens = f"{mean_in:.0f} / {mean_out:.0f}{mark}"
        per = f"{sum(i + o for i, o in usage) / k:.0f}{mark}" if k else "—"
    else:
        tokens, per = "unknown", "unknown"
    seconds = sum(r["seconds"] for r in rows)
    per_second = f"{seconds / k:.1f}" if k else "—"
    mean = sum(r["score"] for r in rows) / n
    forced = sum(1 for r in rows if r.get("forced"))
    failed = sum(1 for r in rows if r.get("failed"))
    return (
        f"| {step} | {suite} | {length // 1024}k | {arm} | {n} | {k} | {100 * k / n:.0f} % "
        f"| {100 * lo:.0f}–{100 * hi:.0f} % | {100 * mean:.0f} % | {tokens} | {per} "
        f"| {seconds / n:.0f} | {per_second} | {forced} | {failed} |"
    )


def table(work):
    lines = [HEADER, "|" + " --- |" * (HEADER.count(" | ") + 1)]
    for step, rows in steps(work):
        for (suite, length, arm), cell in cells(rows):
            lines.append(table_row(step, suite, length, arm, cell))
    return "\n".join(lines)


def status(work):
    lines = []
    for step, rows in steps(work):
        for (suite, length, arm), cell in cells(rows):
            right = sum(1 for r in cell if correct(r))
            lines.append(f"{step:24} {suite:24} {length:>7} {arm:9} {len(cell)} scored, {right} right")
    return "\n".join(lines)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("status", "table"):
        sys.stderr.write(__doc__.split("Usage:", 1)[1].join(["usage:", ""]))
        return 2
    work = argv[2]
    if not os.path.isdir(work):
        sys.stderr.write(f"readings.py: {work} is not a directory (the reading's work directory)\n")
        return 1
    print(status(work) if argv[1] == "status" else table(work))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
