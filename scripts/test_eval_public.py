#!/usr/bin/env python3
"""Tests for scripts/eval-public.sh's `run`: the eval steps a plan makes (suites,
lengths, envs, arms, cells), as the binary is called with them.

The binary is a stub that appends its arguments (a JSON list a line) to a file and exits
with RLM_STUB_EXIT (default 0), the server is named by
RLM_PUBLIC_BASE_URL (so no local model is started) and the arms leave out `rlms` (so the
official library is not installed): the tests run offline in a second.

Run: python3 scripts/test_eval_public.py
"""

import json
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
        self.bin.write_text(
            "#!/usr/bin/env python3\nimport json, os, sys\n"
            f"with open({str(self.calls)!r}, 'a') as f:\n"
            "    f.write(json.dumps(sys.argv[1:]) + '\\n')\n"
            "sys.exit(int(os.environ.get('RLM_STUB_EXIT', '0')))\n"
        )
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

    def script(self, plan, **env):
        """Runs `eval-public.sh run PLAN`; returns the finished process."""
        return subprocess.run(
            ["bash", str(SCRIPTS / "eval-public.sh"), "run", plan],
            env={**self.env, **env}, capture_output=True, text=True, timeout=60,
        )

    def calls_made(self):
        """The arguments of every eval call so far, in order."""
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    def run_plan(self, plan, **env):
        """The eval calls a successful `run PLAN` makes."""
        done = self.script(plan, **env)
        self.assertEqual(done.returncode, 0, done.stderr)
        return self.calls_made()

    @staticmethod
    def flag(call, name):
        """The value after `name` in one call's arguments."""
        return call[call.index(name) + 1]

    @staticmethod
    def cell_flags(call):
        """The flags a call has after `--resume` besides the step's data."""
        rest = call[call.index("--resume") + 1:]
        for data in ("--haystack", "--data"):
            if data in rest:
                at = rest.index(data)
                del rest[at:at + 2]
        return rest

    def test_every_length_and_env_of_a_plan_is_a_step(self):
        calls = self.run_plan("oolong")
        steps = [(self.flag(c, "--lengths"), self.flag(c, "--env"), self.flag(c, "--arms")) for c in calls]
        # The baseline goes with the first env only: it does not change with rlm's env.
        self.assertEqual(steps, [
            ("32k", "tools", "rlm,baseline"), ("32k", "python", "rlm"),
            ("128k", "tools", "rlm,baseline"), ("128k", "python", "rlm"),
        ])
        for call in calls:
            self.assertIn("--resume", call)
            self.assertEqual(self.flag(call, "--data"), str(self.trec))

    def test_lengths_reads_only_those_cells_of_the_plan(self):
        calls = self.run_plan("reading", RLM_PUBLIC_LENGTHS="32k", RLM_PUBLIC_ENVS="tools")
        self.assertEqual([self.flag(c, "--lengths") for c in calls], ["32k", "32k"])
        self.assertEqual(
            [self.flag(c, "--suite") for c in calls],
            ["ruler/niah_multikey_1,ruler/niah_multivalue,ruler/vt,ruler/cwe", "oolong/trec_coarse"],
        )

    def test_lengths_may_be_written_as_eval_writes_them(self):
        calls = self.run_plan("oolong", RLM_PUBLIC_LENGTHS="128k,32k", RLM_PUBLIC_ENVS="tools")
        # The plan's order, whatever the variable's.
        self.assertEqual([self.flag(c, "--lengths") for c in calls], ["32k", "128k"])

    def test_a_length_the_plan_does_not_read_is_refused_before_anything_runs(self):
        done = self.script("oolong", RLM_PUBLIC_LENGTHS="32k 64k")
        self.assertEqual(done.returncode, 1)
        self.assertIn("RLM_PUBLIC_LENGTHS names 64k, which plan oolong does not read (it reads 32k 128k)",
                      done.stderr)
        self.assertEqual(self.calls_made(), [])

    def test_an_interrupted_step_ends_the_plan_and_a_failed_one_does_not(self):
        # eval exits 130 when interrupted (Ctrl-C): the plan stops there.
        done = self.script("oolong", RLM_STUB_EXIT="130")
        self.assertEqual(done.returncode, 130)
        self.assertIn("interrupted; what was scored is kept: run again to go on", done.stderr)
        self.assertEqual(len(self.calls_made()), 1)
        # Items left unscored (exit 1: the server was down) leave the rest of the plan to run.
        self.calls.unlink()
        done = self.script("oolong", RLM_STUB_EXIT="1")
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(len(self.calls_made()), 4)
        self.assertIn("items left unscored; run again to ask them", done.stdout)

    def test_the_constrain_plan_runs_its_three_cells_with_the_rlm_arm_alone(self):
        calls = self.run_plan("constrain", RLM_PUBLIC_ENVS="tools")
        self.assertEqual([Path(self.flag(c, "--out")).name for c in calls], [
            "ruler-tools-auto-none", "ruler-tools-off-default", "ruler-tools-off-none",
            "oolong-tools-auto-none", "oolong-tools-off-default", "oolong-tools-off-none",
        ])
        cells = [["--corrections", "none"], ["--constrain", "off"], ["--constrain", "off", "--corrections", "none"]]
        self.assertEqual([self.cell_flags(c) for c in calls], cells * 2)
        self.assertTrue(all(self.flag(c, "--arms") == "rlm" for c in calls))


if __name__ == "__main__":
    unittest.main()
