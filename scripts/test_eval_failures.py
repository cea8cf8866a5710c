#!/usr/bin/env python3
"""Tests for scripts/eval-failures.py: the cause it gives an item from its trace's events.

Run: python3 scripts/test_eval_failures.py
"""

import importlib.util
import unittest
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location(
    "eval_failures", Path(__file__).resolve().parent / "eval-failures.py"
)
eval_failures = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(eval_failures)


def result(forced=True, failed=None):
    """One wrong item of results.json (the fields eval-failures reads)."""
    return {"forced": forced, "failed": failed, "error": None, "got": "2"}


def step(iteration, text, output):
    """A step's reply and what its call or code gave, as events.jsonl holds them."""
    return [
        {"kind": "text", "iteration": iteration, "text": text},
        {"kind": "exec", "iteration": iteration, "output": output},
    ]


class CauseTest(unittest.TestCase):
    def test_a_request_past_the_window_is_window(self):
        cause, _ = eval_failures.cause(result(failed="the stream ended without data"), [])
        self.assertEqual(cause, "window")

    def test_final_called_inside_code_is_format(self):
        events = step(2, "```repl\nFINAL(x)\n```", "NameError: name 'FINAL' is not defined")
        self.assertEqual(eval_failures.cause(result(), events)[0], "format")

    def test_an_argument_written_but_lost_by_the_parser_is_format(self):
        # A reply with one brace too many puts `reduce` beside the arguments, and the
        # call is refused for a missing reduce the model did write.
        text = '{"name": "ctx_map_reduce", "arguments": {"map": {"extract": "x"}}, "reduce": {"op": "top_k"}}'
        events = step(4, text, "invalid call of ctx_map_reduce: missing field `reduce`; a call that works: …")
        cause, evidence = eval_failures.cause(result(), events)
        self.assertEqual(cause, "format")
        self.assertIn("missing field `reduce`", evidence)

    def test_an_argument_the_reply_never_wrote_is_other(self):
        text = '{"name": "ctx_map_reduce", "arguments": {"map": {"extract": "x"}}}'
        events = step(4, text, "invalid call of ctx_map_reduce: missing field `reduce`")
        self.assertEqual(eval_failures.cause(result(), events)[0], "other")

    def test_a_run_stopped_on_repeated_calls_is_repeat(self):
        events = step(7, '{"name": "ctx_grep"}', "Call not run: the same call already ran 2 times.")
        events.append({
            "kind": "warning",
            "message": "stopping: the reply needed the same correction (repeat_limit) again, after 2 corrections",
        })
        self.assertEqual(eval_failures.cause(result(), events)[0], "repeat")
        # The same warning on a run that answered by itself is not the cause.
        self.assertEqual(eval_failures.cause(result(forced=False), events)[0], "other")

    def test_a_forced_run_without_a_stop_is_other(self):
        cause, evidence = eval_failures.cause(result(), step(20, "x", "y"))
        self.assertEqual((cause, evidence), ("other", "forced: no answer within the iterations"))

    def test_an_answered_wrong_item_is_other(self):
        cause, evidence = eval_failures.cause(result(forced=False), [])
        self.assertEqual((cause, evidence), ("other", "answered: 2"))


if __name__ == "__main__":
    unittest.main()
