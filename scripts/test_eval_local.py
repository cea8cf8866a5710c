#!/usr/bin/env python3
"""Tests for scripts/eval-local.sh's `collect` and `show`: a reading's results and traces
are collected into a work directory outside the source tree, never into docs/, and
`show` reads a run back from there.

Each test copies the script (and scripts/eval-failures.py, which `collect` runs) into a
scratch root, so nothing the script writes can land in this checkout.

Run: python3 scripts/test_eval_local.py
"""

import gzip
import json
import os
import shutil
import stat
import subprocess
import tempfile
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
RUN_ID = "20260101-000000-abcdef"
MODEL = "qwen2.5-coder-1.5b"


class EvalLocalTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name) / "checkout"
        (self.root / "scripts").mkdir(parents=True)
        for name in ("eval-local.sh", "eval-failures.py"):
            shutil.copy(SCRIPTS / name, self.root / "scripts" / name)
        # A reading's work directory as `eval-local.sh run` leaves it: one step with a
        # scored RLM item, and that run's trace in the data directory.
        self.work = Path(self.dir.name) / "work"
        step = self.work / "records-python"
        step.mkdir(parents=True)
        row = {"suite": "aggregate", "length": 32768, "arm": "rlm", "score": 0.0,
               "seconds": 1.0, "forced": True, "failed": None, "error": None,
               "got": "7", "run_id": RUN_ID}
        (step / "results.json").write_text(json.dumps([row]))
        run = self.work / "data" / "runs" / RUN_ID
        run.mkdir(parents=True)
        (run / "events.jsonl").write_text('{"kind": "run_started", "task": "t"}\n')
        (run / "summary.json").write_text("{}")

    def tearDown(self):
        self.dir.cleanup()

    def script(self, *args, **env):
        """Runs the scratch copy of eval-local.sh; returns the finished process."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("RLM_EVAL_")}
        environ.update(RLM_EVAL_DIR=str(self.work), RLM_EVAL_NAME="t", **env)
        return subprocess.run(
            ["bash", str(self.root / "scripts" / "eval-local.sh"), *args],
            env=environ, capture_output=True, text=True, timeout=120,
        )

    def assert_collected(self, into):
        step = into / "records-python"
        self.assertTrue((step / "results.json").is_file(), f"no results.json under {step}")
        events = step / "runs" / RUN_ID / "events.jsonl.gz"
        with gzip.open(events, "rt") as f:
            self.assertIn("run_started", f.read())
        self.assertTrue((into / "failures.md").is_file())
        self.assertFalse((self.root / "docs").exists(), "collect wrote into the source tree's docs/")

    def test_collect_writes_to_the_directory_named_and_not_into_docs(self):
        into = Path(self.dir.name) / "archive"
        done = self.script("collect", RLM_EVAL_COLLECT=str(into))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_collected(into / f"{MODEL}-t")

    def test_collect_defaults_to_the_ignored_local_models_directory(self):
        done = self.script("collect")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assert_collected(self.root / ".local-models" / "readings" / f"{MODEL}-t")

    def test_show_reads_a_collected_run_once_the_data_directory_is_gone(self):
        into = Path(self.dir.name) / "archive"
        self.assertEqual(self.script("collect", RLM_EVAL_COLLECT=str(into)).returncode, 0)
        shutil.rmtree(self.work / "data")
        # A stand-in binary: prints the trace `runs show` would read.
        fake = Path(self.dir.name) / "fake-rlm"
        fake.write_text('#!/bin/sh\n# --data-dir DIR runs show RUN\ncat "$2/runs/$5/events.jsonl"\n')
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
        done = self.script("show", RUN_ID, RLM_EVAL_COLLECT=str(into), RLM_EVAL_BIN=str(fake))
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("run_started", done.stdout)
        self.assertFalse((self.root / "docs").exists(), "the run was read from the source tree's docs/")


if __name__ == "__main__":
    unittest.main()
