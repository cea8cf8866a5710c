#!/usr/bin/env python3
"""Tests for scripts/eval-public.sh's `run`: the eval steps a plan makes (suites,
lengths, envs, arms, cells), as the binary is called with them.

The binary is a stub that appends its arguments to a file, the server is named by
RLM_PUBLIC_BASE_URL (so no local model is started) and the arms leave out `rlms` (so the
official library is not installed): the tests run offline in a second.

Run: python3 scripts/test_eval_public.py
"""

import os
import stat
import subprocess
import tempfile
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent


class EvalPublicRunTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        tmp = Path(self.dir.name)
        self.calls = tmp / "calls"
        self.bin = tmp / "rlm-orchestrate"
        self.bin.write_text(f'#!/bin/sh\necho "$*" >> {self.calls}\n')
        self.bin.chmod(self.bin.stat().st_mode | stat.S_IEXEC)
        (tmp / "essays").mkdir()
        self.trec = tmp / "train_5500.label"
        self.trec.write_text("DESC:manner How did serfdom develop in and then leave Russia ?\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("RLM_PUBLIC_")}
        self.env.update(
            RLM_PUBLIC_BIN=str(self.bin),
            RLM_PUBLIC_BASE_URL="http://127.0.0.1:9/v1",
            RLM_PUBLIC_ESSAYS=str(tmp / "essays"),
            RLM_PUBLIC_TREC=str(self.trec),
            RLM_PUBLIC_ARMS="rlm,baseline",
            RLM_PUBLIC_DIR=str(tmp / "work"),
        )

    def tearDown(self):
        self.dir.cleanup()

    def run_plan(self, plan, **env):
        """The eval calls `run PLAN` makes: one line of arguments each."""
        done = subprocess.run(
            ["bash", str(SCRIPTS / "eval-public.sh"), "run", plan],
            env={**self.env, **env}, capture_output=True, text=True, timeout=60,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        return self.calls.read_text().splitlines() if self.calls.exists() else []

    @staticmethod
    def flag(call, name):
        """The value after `name` in one call's arguments."""
        words = call.split()
        return words[words.index(name) + 1]

    def test_every_length_and_env_of_a_plan_is_a_step(self):
        calls = self.run_plan("oolong")
        steps = [(self.flag(c, "--lengths"), self.flag(c, "--env"), self.flag(c, "--arms")) for c in calls]
        # The baseline goes with the first env only: it does not change with rlm's env.
        self.assertEqual(steps, [
            ("32k", "tools", "rlm,baseline"), ("32k", "python", "rlm"),
            ("128k", "tools", "rlm,baseline"), ("128k", "python", "rlm"),
        ])
        for call in calls:
            self.assertIn("--resume", call.split())
            self.assertEqual(self.flag(call, "--data"), str(self.trec))

    def test_lengths_reads_only_those_cells_of_the_plan(self):
        calls = self.run_plan("reading", RLM_PUBLIC_LENGTHS="32k", RLM_PUBLIC_ENVS="tools")
        self.assertEqual([self.flag(c, "--lengths") for c in calls], ["32k", "32k"])
        self.assertEqual(
            [self.flag(c, "--suite") for c in calls],
            ["ruler/niah_multikey_1,ruler/niah_multivalue,ruler/vt,ruler/cwe", "oolong/trec_coarse"],
        )

    def test_the_constrain_plan_runs_its_three_cells_with_the_rlm_arm_alone(self):
        calls = self.run_plan("constrain", RLM_PUBLIC_ENVS="tools")
        cells = [(c.split("--resume", 1)[1].replace(f"--haystack {self.env['RLM_PUBLIC_ESSAYS']}", "")
                  .replace(f"--data {self.trec}", "").split(), self.flag(c, "--out").rsplit("/", 1)[1])
                 for c in calls]
        self.assertEqual([out for _, out in cells], [
            "ruler-tools-auto-none", "ruler-tools-off-default", "ruler-tools-off-none",
            "oolong-tools-auto-none", "oolong-tools-off-default", "oolong-tools-off-none",
        ])
        self.assertEqual([flags for flags, _ in cells[:3]], [
            ["--corrections", "none"], ["--constrain", "off"], ["--constrain", "off", "--corrections", "none"],
        ])
        self.assertTrue(all(self.flag(c, "--arms") == "rlm" for c in calls))


if __name__ == "__main__":
    unittest.main()
