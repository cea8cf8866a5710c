#!/usr/bin/env python3
"""Tests for scripts/readings.py: the status and table of a reading's results, against
figures computed by hand.

Run: python3 scripts/test_readings.py
"""

import json
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "readings.py"


def row(score, seconds, tokens=(100, 10), error=None, forced=False, failed=None):
    return {"suite": "ruler/vt", "length": 32768, "arm": "rlm", "score": score,
            "seconds": seconds, "input_tokens": tokens and tokens[0],
            "output_tokens": tokens and tokens[1], "forced": forced, "failed": failed,
            "error": error}


class ReadingsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.work = Path(self.dir.name)
        step = self.work / "ruler-tools"
        step.mkdir()
        rows = [row(1.0, 10), row(1.0, 20), row(0.5, 30, forced=True),
                row(0.0, 40, tokens=None, failed="exit 1"), row(0.0, 50),
                # Not asked (the server was down): left out of every figure.
                row(0.0, 0, error="connection refused")]
        (step / "results.json").write_text(json.dumps(rows))

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True,
                              text=True, check=False)

    def test_the_table_gives_the_hand_computed_figures(self):
        out = self.run_script("table", str(self.work))
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(len(lines), 3)
        self.assertEqual(lines[0].count("|"), lines[1].count("|"))
        # 2 of 5 right: Wilson 11.8–76.9 %; mean score (1 + 1 + 0.5) / 5; tokens over the
        # four that report them, 4 × 110 over 2 correct; 150 s over 5, over 2 correct.
        self.assertEqual(
            lines[2],
            "| ruler-tools | ruler/vt | 32k | rlm | 5 | 2 | 40 % | 12–77 % | 50 % "
            "| 100 / 10 (4 of 5) | 220 (4 of 5) | 30 | 75.0 | 1 | 1 |",
        )

    def test_status_counts_the_scored_and_the_right(self):
        out = self.run_script("status", str(self.work))
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertRegex(out.stdout, r"ruler-tools +ruler/vt +32768 rlm +5 scored, 2 right")

    def test_the_chart_has_a_bar_per_cell_with_its_interval(self):
        svg = self.work / "chart.svg"
        second = self.work / "ruler-python"
        second.mkdir()
        (second / "results.json").write_text(json.dumps([row(1.0, 5)]))
        out = self.run_script("chart", str(self.work), str(svg))
        self.assertEqual(out.returncode, 0, out.stderr)
        import xml.etree.ElementTree as ET
        root = ET.parse(svg).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        bars = [r for r in root.iter(ns + "rect") if r.get("class") == "bar"]
        titles = sorted(b.find(ns + "title").text for b in bars)
        self.assertEqual(titles, ["ruler-python · rlm: 1/1", "ruler-tools · rlm: 2/5"])
        # 2 of 5: the bar is 40 % of the plot's height.
        tools = next(b for b in bars if "ruler-tools" in b.find(ns + "title").text)
        self.assertAlmostEqual(float(tools.get("height")), 0.4 * 260, places=1)

    def test_a_missing_directory_and_a_bad_call_say_so(self):
        missing = self.run_script("table", str(self.work / "nowhere"))
        self.assertEqual(missing.returncode, 1)
        self.assertIn("not a directory", missing.stderr)
        self.assertEqual(self.run_script("plot", str(self.work)).returncode, 2)


if __name__ == "__main__":
    unittest.main()
