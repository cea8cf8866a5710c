#!/usr/bin/env python3
"""One table and one chart of cells read by different readings (issue 24's matrix).

Usage: scripts/eval-matrix.py MANIFEST [--svg OUT.svg]

A reading (`scripts/eval-local.sh`) keeps each step's items in its own
`results.json`; the matrix of docs/eval.md takes each cell — a suite and an arm at one
length — from the reading that measured it. MANIFEST (JSON) names them:

    {"title": "...", "length": 32768,
     "arms": ["RLM --env tools", ...],                    # the columns, in order
     "cells": [{"suite": "sniah", "arm": "RLM --env tools",
                "results": "qwen2.5-coder-1.5b/sniah-tools/results.json",
                "source_arm": "rlm", "binary": "37f87dd"}, ...]}

`results` is relative to the manifest's directory; `source_arm` is the arm's name inside
that file (`rlm`, `baseline`, `rlms`). Every scored item of that suite, length and arm
counts (an item with an `error` was never scored and is left out, as `eval` does).

Prints the matrix as markdown (each cell "right/items (95 % Wilson interval)") and a
long table with the cell's tokens, seconds, forced and failed answers and its source;
--svg writes a bar chart of the accuracies with their intervals as error bars.
"""

import functools
import json
import math
import os
import sys
from dataclasses import dataclass

Z95 = 1.959964


def wilson(right, items):
    """The 95 % Wilson score interval of right/items, as fractions."""
    if items == 0:
        return 0.0, 1.0
    p = right / items
    d = 1 + Z95 * Z95 / items
    centre = (p + Z95 * Z95 / (2 * items)) / d
    half = Z95 * math.sqrt(p * (1 - p) / items + Z95 * Z95 / (4 * items * items)) / d
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass
class Cell:
    """One suite and arm of the matrix, summarised from its reading's items."""

    suite: str
    arm: str
    source: str
    binary: str
    items: int
    right: int
    input_tokens: float | None
    output_tokens: float | None
    seconds: float
    forced: int
    failed: int

    @property
    def interval(self):
        """The 95 % Wilson interval of the accuracy, as fractions."""
        return wilson(self.right, self.items)

    def short(self):
        """The matrix's entry: right/items and the interval in percent."""
        lo, hi = self.interval
        return f"{self.right}/{self.items} ({lo * 100:.0f}–{hi * 100:.0f} %)"


def mean(values):
    """The mean of the values that are there, None when none is."""
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


@functools.lru_cache(maxsize=None)
def results_of(path):
    """The rows of one results.json, read once however many cells it holds."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_cell(spec, base, length):
    """The cell a manifest entry names, from its results.json."""
    path = os.path.join(base, spec["results"])
    rows = [
        r
        for r in results_of(path)
        if r["suite"] == spec["suite"]
        and r["length"] == length
        and r["arm"] == spec["source_arm"]
        and not r.get("error")
    ]
    if not rows:
        raise SystemExit(
            f"eval-matrix: {path} has no scored {spec['suite']} item of arm "
            f"{spec['source_arm']} at length {length}: check the manifest's entry"
        )
    return Cell(
        suite=spec["suite"],
        arm=spec["arm"],
        source=spec["results"],
        binary=spec.get("binary", ""),
        items=len(rows),
        right=sum(1 for r in rows if r["score"] == 1),
        input_tokens=mean([r.get("input_tokens") for r in rows]),
        output_tokens=mean([r.get("output_tokens") for r in rows]),
        seconds=sum(r["seconds"] for r in rows) / len(rows),
        forced=sum(1 for r in rows if r.get("forced")),
        failed=sum(1 for r in rows if r.get("failed")),
    )


def matrix_markdown(cells, arms, suites, length_label):
    """Suites as rows, arms as columns; a cell not in the manifest is "—"."""
    by_key = {(c.suite, c.arm): c for c in cells}
    lines = [
        f"| suite ({length_label}) | " + " | ".join(arms) + " |",
        "| --- | " + " | ".join("---" for _ in arms) + " |",
    ]
    for suite in suites:
        entries = [by_key[(suite, a)].short() if (suite, a) in by_key else "—" for a in arms]
        lines.append(f"| `{suite}` | " + " | ".join(entries) + " |")
    return "\n".join(lines)


def long_markdown(cells):
    """One row per cell with its tokens, seconds, forced and failed answers and source."""

    def tokens(cell):
        if cell.input_tokens is None:
            return "—"
        return f"{cell.input_tokens:,.0f} / {cell.output_tokens:,.0f}".replace(",", " ")

    lines = [
        "| suite | arm | items | right | 95 % CI | mean in / out tokens | mean s | forced | failed | binary | results |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in cells:
        lo, hi = c.interval
        lines.append(
            f"| {c.suite} | {c.arm} | {c.items} | {c.right} | {lo * 100:.0f}–{hi * 100:.0f} % | "
            f"{tokens(c)} | {c.seconds:.0f} | {c.forced} | {c.failed} | {c.binary} | {c.source} |"
        )
    return "\n".join(lines)


COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#7f7f7f", "#d62728", "#ff7f0e"]


def svg_chart(cells, arms, suites, title):
    """Grouped bars: a group per suite, a bar per arm, the Wilson interval as a whisker."""
    width, height = 960, 460
    left, right, top, bottom = 60, 20, 50, 110
    plot_w, plot_h = width - left - right, height - top - bottom
    group_w = plot_w / len(suites)
    bar_w = group_w * 0.8 / len(arms)
    by_key = {(c.suite, c.arm): c for c in cells}

    def y(fraction):
        return top + plot_h * (1 - fraction)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="24" font-size="16" text-anchor="middle">{title}</text>',
    ]
    for tick in range(0, 101, 20):
        ty = y(tick / 100)
        out.append(f'<line x1="{left}" x2="{width - right}" y1="{ty}" y2="{ty}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{ty + 4}" text-anchor="end">{tick} %</text>')
    for g, suite in enumerate(suites):
        gx = left + g * group_w + group_w * 0.1
        for a, arm in enumerate(arms):
            cell = by_key.get((suite, arm))
            x = gx + a * bar_w
            if cell is None:
                out.append(f'<text x="{x + bar_w / 2}" y="{y(0) - 4}" text-anchor="middle" fill="#999">—</text>')
                continue
            accuracy = cell.right / cell.items
            lo, hi = cell.interval
            colour = COLOURS[a % len(COLOURS)]
            out.append(
                f'<rect x="{x + 1:.1f}" y="{y(accuracy):.1f}" width="{bar_w - 2:.1f}" '
                f'height="{y(0) - y(accuracy):.1f}" fill="{colour}" fill-opacity="0.8"/>'
            )
            mid = x + bar_w / 2
            out.append(f'<line x1="{mid:.1f}" x2="{mid:.1f}" y1="{y(lo):.1f}" y2="{y(hi):.1f}" stroke="black"/>')
            for end in (lo, hi):
                out.append(
                    f'<line x1="{mid - 4:.1f}" x2="{mid + 4:.1f}" y1="{y(end):.1f}" y2="{y(end):.1f}" stroke="black"/>'
                )
            out.append(
                f'<text x="{mid:.1f}" y="{y(0) + 14:.1f}" text-anchor="middle" font-size="10">'
                f"{cell.right}/{cell.items}</text>"
            )
        out.append(
            f'<text x="{left + g * group_w + group_w / 2:.1f}" y="{y(0) + 32:.1f}" '
            f'text-anchor="middle" font-size="13">{suite}</text>'
        )
    legend_y = height - 40
    for a, arm in enumerate(arms):
        lx = left + a * (plot_w / len(arms))
        out.append(f'<rect x="{lx:.1f}" y="{legend_y}" width="12" height="12" fill="{COLOURS[a % len(COLOURS)]}"/>')
        out.append(f'<text x="{lx + 16:.1f}" y="{legend_y + 11}">{arm}</text>')
    out.append(
        f'<text x="{left}" y="{height - 10}" fill="#555">bars: accuracy (answers scored right); '
        f"whiskers: 95 % Wilson interval; under each bar: right/items</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--svg"):
        raise SystemExit(__doc__.split("\n\n")[1])
    manifest_path = argv[1]
    with open(manifest_path, encoding="utf-8") as f:
        manifest = json.load(f)
    base = os.path.dirname(os.path.abspath(manifest_path))
    length = manifest["length"]
    arms = manifest["arms"]
    unknown = {c["arm"] for c in manifest["cells"]} - set(arms)
    if unknown:
        raise SystemExit(f"eval-matrix: cells name arms not in \"arms\": {sorted(unknown)}")
    cells = [read_cell(spec, base, length) for spec in manifest["cells"]]
    suites = list(dict.fromkeys(c.suite for c in cells))
    length_label = f"{length // 1024}k" if length % 1024 == 0 else str(length)
    print(matrix_markdown(cells, arms, suites, length_label))
    print()
    print(long_markdown(cells))
    if len(argv) == 4:
        with open(argv[3], "w", encoding="utf-8") as f:
            f.write(svg_chart(cells, arms, suites, manifest["title"]))


if __name__ == "__main__":
    main(sys.argv)
