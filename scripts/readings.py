#!/usr/bin/env python3
"""The status and the table of a reading: the `results.json` files `eval` wrote, one
directory a step (a cell), under one work directory. The reading scripts
(eval-local.sh, eval-public.sh, eval-variants.sh) all print their `status` and `table`
with this, so a figure means the same in each.

Definitions are `eval`'s own: an item is correct when its score is 1; the interval is
the 95 % Wilson score interval; tokens and seconds "per correct" are all of a cell's
over its correct answers; rows with an `error` (the item was not asked: the server was
down) are left out.

Usage: readings.py status WORK          items scored and right, per step and cell
       readings.py table WORK           the markdown table
       readings.py chart WORK OUT.svg   the accuracy of every cell with its interval:
                                        a group of bars per suite and length, a bar per
                                        step and arm
"""

import collections
import glob
import json
import math
import os
import sys
from xml.sax.saxutils import escape

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


# The chart's geometry, in SVG user units.
BAR, GAP, LEFT, TOP, PLOT_H = 14, 18, 56, 40, 260
COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def chart(work):
    """The SVG text of the chart: per (suite, length) a group of bars, one per
    (step, arm), each the cell's accuracy with its Wilson interval as a whisker."""
    groups = collections.defaultdict(dict)
    for step, rows in steps(work):
        for (suite, length, arm), cell in cells(rows):
            k = sum(1 for r in cell if correct(r))
            groups[(length, suite)][f"{step} · {arm}"] = (k, len(cell))
    series = sorted({name for bars in groups.values() for name in bars})
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(series)}
    plot_width = LEFT + sum(len(bars) * BAR + GAP for bars in groups.values()) + GAP
    # Wide enough for the title and the longest legend line (about 6.5 units a character).
    legend_width = LEFT + 16 + 6.5 * max((len(name) for name in series), default=0)
    width = int(max(plot_width, legend_width, 560))
    height = TOP + PLOT_H + 90 + 16 * len(series)
    y = lambda fraction: TOP + PLOT_H * (1 - fraction)  # noqa: E731
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{LEFT}" y="20" font-size="14">Accuracy per cell, 95 % Wilson interval '
           f'({escape(os.path.basename(os.path.normpath(work)))})</text>']
    for tick in range(0, 101, 25):
        out.append(f'<line x1="{LEFT}" x2="{plot_width - GAP}" y1="{y(tick / 100):.1f}" '
                   f'y2="{y(tick / 100):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 6}" y="{y(tick / 100) + 4:.1f}" text-anchor="end">'
                   f'{tick} %</text>')
    x = LEFT + GAP
    for (length, suite), bars in sorted(groups.items()):
        start = x
        for name in sorted(bars):
            k, n = bars[name]
            lo, hi = wilson(k, n)
            out.append(f'<rect class="bar" x="{x}" y="{y(k / n):.1f}" width="{BAR - 2}" '
                       f'height="{PLOT_H * k / n:.1f}" fill="{colour[name]}">'
                       f'<title>{escape(name)}: {k}/{n}</title></rect>')
            mid = x + (BAR - 2) / 2
            out.append(f'<line x1="{mid}" x2="{mid}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" '
                       f'stroke="black"/>')
            x += BAR
        out.append(f'<text x="{(start + x) / 2:.1f}" y="{TOP + PLOT_H + 14}" '
                   f'text-anchor="middle">{escape(suite)}</text>')
        out.append(f'<text x="{(start + x) / 2:.1f}" y="{TOP + PLOT_H + 28}" '
                   f'text-anchor="middle">{length // 1024}k</text>')
        x += GAP
    for i, name in enumerate(series):
        ly = TOP + PLOT_H + 50 + 16 * i
        out.append(f'<rect x="{LEFT}" y="{ly - 9}" width="10" height="10" fill="{colour[name]}"/>')
        out.append(f'<text x="{LEFT + 16}" y="{ly}">{escape(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    commands = {"status": 3, "table": 3, "chart": 4}
    if len(argv) < 2 or commands.get(argv[1]) != len(argv):
        sys.stderr.write(__doc__.split("Usage:", 1)[1].join(["usage:", ""]))
        return 2
    work = argv[2]
    if not os.path.isdir(work):
        sys.stderr.write(f"readings.py: {work} is not a directory (the reading's work directory)\n")
        return 1
    if argv[1] == "chart":
        with open(argv[3], "w", encoding="utf-8") as file:
            file.write(chart(work))
        print(f"readings.py: chart written to {argv[3]}")
    else:
        print(status(work) if argv[1] == "status" else table(work))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
