#!/usr/bin/env python3
"""Numbers in python/bridge_config_check.py are compared exactly, never as floats.

The runtime check and the plan confirmation at start (docs/runtime-check.md) compare each
planned value with the one the runtime holds. They compared numbers through float(), so a
runtime that built 2**53 for a planned 2**53 + 1 was recorded "plan confirmed" (issue 47,
item 3). This test imports the program's comparison functions and also runs the confirmation
end to end (`--confirm REQUEST -- SCRIPT`) with the fake runtime of
tests/data/fake-megatron-runtime and a script that builds one value.

Usage: config_check_numbers_test.py SOURCE_DIR
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest
from types import SimpleNamespace

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
PROGRAM = os.path.join(SOURCE, "python", "bridge_config_check.py")
FAKE_RUNTIME = os.path.join(SOURCE, "tests", "data", "fake-megatron-runtime")

spec = importlib.util.spec_from_file_location("bridge_config_check", PROGRAM)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

BIG = 2 ** 53

# A runtime that builds train.train_iters from its first argument, then finalises its config
# through megatron.bridge.training.config.runtime_config_update (the confirmation's hook).
SCRIPT = """import sys
from types import SimpleNamespace
from megatron.bridge.training.config import runtime_config_update
cfg = SimpleNamespace(model=SimpleNamespace(), train=SimpleNamespace(train_iters=int(sys.argv[1])),
                      ddp=SimpleNamespace(), optimizer=SimpleNamespace(),
                      comm_overlap=SimpleNamespace())
runtime_config_update(cfg)
"""


class ExactNumbers(unittest.TestCase):
    def test_integers_past_two_to_the_53_differ(self):
        self.assertFalse(check._same(BIG + 1, BIG))
        self.assertFalse(check._confirm_same(BIG + 1, BIG))
        self.assertFalse(check._confirm_same(BIG + 1, float(BIG)))
        self.assertFalse(check._same(-(BIG + 1), -BIG))
        self.assertFalse(check._confirm_same(10 ** 30 + 1, 10 ** 30))

    def test_equal_numbers_stay_equal(self):
        self.assertTrue(check._same(BIG + 1, BIG + 1))
        self.assertTrue(check._confirm_same(BIG + 1, BIG + 1))
        self.assertTrue(check._confirm_same(8, 8.0))  # an int field the runtime holds as float
        self.assertTrue(check._confirm_same(True, 1))  # a bool planned, an int held
        self.assertTrue(check._confirm_same(0.5, 0.5))
        self.assertFalse(check._confirm_same(0.1, 0.1000001))
        self.assertTrue(check._confirm_same(8, "8"))  # a field typed str

    def test_config_differences_names_the_field(self):
        request = {"adapter": "hydra", "argv": [f"train.train_iters={BIG + 1}"]}
        planned = check.planned_values(request)
        self.assertEqual(planned[0][1], BIG + 1)
        cfg = SimpleNamespace(train=SimpleNamespace(train_iters=BIG))
        diffs, compared, _ = check.config_differences(cfg, planned)
        self.assertEqual(compared, 1)
        self.assertEqual(len(diffs), 1)
        self.assertEqual(diffs[0]["planned"], BIG + 1)
        self.assertEqual(diffs[0]["actual"], BIG)
        cfg.train.train_iters = BIG + 1
        self.assertEqual(check.config_differences(cfg, planned)[0], [])


class ConfirmationAtStart(unittest.TestCase):
    def confirm(self, built):
        with tempfile.TemporaryDirectory() as d:
            request = os.path.join(d, "plan_confirm.json")
            with open(request, "w", encoding="utf-8") as f:
                json.dump({"adapter": "hydra", "argv": [f"train.train_iters={BIG + 1}"],
                           "planned_overlap": {}}, f)
            script = os.path.join(d, "runtime.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(SCRIPT)
            env = dict(os.environ, PYTHONPATH=FAKE_RUNTIME, RANK="0")
            run = subprocess.run([sys.executable, PROGRAM, "--confirm", request, "--", script,
                                  str(built)], env=env, capture_output=True, text=True,
                                 timeout=60, check=False)
            with open(os.path.join(d, "plan_confirmation.json"), encoding="utf-8") as f:
                return run, json.load(f)

    def test_a_runtime_that_built_two_to_the_53_for_one_more_is_not_confirmed(self):
        run, verdict = self.confirm(BIG)
        self.assertEqual(run.returncode, 3, run.stderr)
        self.assertIs(verdict["confirmed"], False)
        self.assertEqual(verdict["differences"][0]["planned"], BIG + 1)
        self.assertEqual(verdict["differences"][0]["actual"], BIG)
        self.assertIn("train.train_iters is 9007199254740992, planned 9007199254740993",
                      run.stderr)

    def test_the_planned_value_itself_is_confirmed(self):
        run, verdict = self.confirm(BIG + 1)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIs(verdict["confirmed"], True)
        self.assertEqual(verdict["compared"], 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
