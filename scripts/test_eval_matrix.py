#!/usr/bin/env python3
"""Tests for scripts/eval-matrix.py on small results.json files in a temp dir.

Run: python3 scripts/test_eval_matrix.py
"""

import contextlib
import importlib.util
import io
import json
import tempfile
import unittest
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "eval_matrix", Path(__file__).resolve().parent / "eval-matrix.py"
)
eval_matrix = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(eval_matrix)


def item(suite, arm, score, length=32768, error=None, **extra):
    """One results.json row as `eval` writes it (the fields eval-matrix reads)."""
    row = {"suite": suite, "length": length, "arm": arm, "score": score, "seconds": 10.0,
           "input_tokens": 100, "output_tokens": 5, "forced": False, "failed": None,
           "error": error}
    row.update(extra)
    return row


class EvalMatrixTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        rows = [item("sniah", "rlm", 1.0), item("sniah", "rlm", 0.5),
                item("sniah", "rlm", 0.0, forced=True),
                item("sniah", "rlm", 1.0, error="model unreachable"),
                item("sniah", "rlm", 1.0, length=4096),
                item("sniah", "baseline", 1.0)]
        (self.root / "step").mkdir()
        (self.root / "step" / "results.json").write_text(json.dumps(rows))

    def tearDown(self):
        self.dir.cleanup()

    def run_manifest(self, cells, arms=("A", "B", "C")):
        path = self.root / "m.json"
        path.write_text(json.dumps({"title": "t", "length": 32768, "arms": list(arms),
                                    "cells": cells}))
        out = io.StringIO()
        svg = self.root / "m.svg"
        with contextlib.redirect_stdout(out):
            eval_matrix.main(["eval-matrix.py", str(path), "--svg", str(svg)])
        return out.getvalue(), svg.read_text()

    def test_a_cell_counts_scored_items_of_its_arm_and_length_only(self):
        table, svg = self.run_manifest([
            {"suite": "sniah", "arm": "A", "results": "step/results.json", "source_arm": "rlm"},
            {"suite": "sniah", "arm": "B", "results": "step/results.json", "source_arm": "baseline"},
        ])
        # Three scored rlm items at 32k: one right (a partial score is not right), one forced;
        # the unscored error and the 4k item are left out.
        self.assertIn("| `sniah` | 1/3 (6–79 %) | 1/1 (21–100 %) | — |", table)
        self.assertIn("| sniah | A | 3 | 1 | 6–79 % | 100 / 5 | 10 | 1 | 0 |", table)
        self.assertIn("<svg", svg)
        self.assertIn(">1/3</text>", svg)

    def test_wilson_matches_the_known_interval(self):
        lo, hi = eval_matrix.wilson(4, 5)
        self.assertEqual((round(lo * 100), round(hi * 100)), (38, 96))
        self.assertEqual(eval_matrix.wilson(0, 0), (0.0, 1.0))

    def test_a_cell_with_no_scored_item_is_an_error_naming_it(self):
        with self.assertRaises(SystemExit) as err:
            self.run_manifest([{"suite": "pairs", "arm": "A", "results": "step/results.json",
                                "source_arm": "rlm"}])
        self.assertIn("no scored pairs item of arm rlm", str(err.exception))

    def test_an_arm_missing_from_the_columns_is_an_error(self):
        with self.assertRaises(SystemExit) as err:
            self.run_manifest([{"suite": "sniah", "arm": "Z", "results": "step/results.json",
                                "source_arm": "rlm"}])
        self.assertIn("['Z']", str(err.exception))


if __name__ == "__main__":
    unittest.main()
