#!/usr/bin/env python3
"""Every rank compares its environment with the plan's launch env before its runtime starts.

The plan confirmation at start (templates/bridge_config_check.py, `--confirm`) reads the
planned launch env from its request (`planned_env`: each value as the hex of its bytes, a
secret or rank-expanded value by name only) and compares it with the rank's own environment,
byte for byte, before the script runs: a value a wrapper, a prolog or the container changed
stops the rank with exit 3, the variable named on stderr and in the verdict, and the script
never starts. This test imports the comparison and runs the program end to end with hostile
values (quotes, `$(...)`, newlines, escape bytes, bytes that are not UTF-8).

Usage: confirm_env_test.py SOURCE_DIR
"""
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = sys.argv.pop(1) if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../..")
PROGRAM = os.path.join(SOURCE, "templates", "bridge_config_check.py")
FAKE_RUNTIME = os.path.join(SOURCE, "tests", "data", "fake-megatron-runtime")

spec = importlib.util.spec_from_file_location("bridge_config_check", PROGRAM)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)

HOSTILE = b"a'b\"c $(touch /tmp/x) `id` \\ ; \n\x1b[31m \xff\xfe end"
SCRIPT = "import sys\nprint('the runtime started')\n"


def planned(**values):
    """planned_env entries: bytes are planned values, None a secret (name only)."""
    return [{"name": k} if v is None else {"name": k, "hex": v.hex()} for k, v in values.items()]


class Comparison(unittest.TestCase):
    def test_the_same_bytes_are_confirmed(self):
        env = {b"CUDA_DEVICE_MAX_CONNECTIONS": b"32", b"HOSTILE": HOSTILE, b"TOKEN": b"s"}
        diffs, compared = check.env_differences(
            planned(CUDA_DEVICE_MAX_CONNECTIONS=b"32", HOSTILE=HOSTILE, TOKEN=None), env)
        self.assertEqual(diffs, [])
        self.assertEqual(compared, 3)

    def test_a_changed_or_missing_value_is_named_escaped_and_bounded(self):
        env = {b"CUDA_DEVICE_MAX_CONNECTIONS": b"1", b"HOSTILE": HOSTILE[:-1]}
        diffs, _ = check.env_differences(
            planned(CUDA_DEVICE_MAX_CONNECTIONS=b"32", HOSTILE=HOSTILE,
                    NVTE_FWD_LAYERNORM_SM_MARGIN=b"x" * 5000), env)
        by_field = {d["field"]: d for d in diffs}
        self.assertEqual(by_field["env CUDA_DEVICE_MAX_CONNECTIONS"]["actual"], "1")
        self.assertEqual(by_field["env CUDA_DEVICE_MAX_CONNECTIONS"]["planned"], "32")
        shown = by_field["env HOSTILE"]["planned"]
        self.assertNotIn("\x1b", shown)
        self.assertNotIn("\n", shown)
        self.assertIn("\\x1b[31m", shown)
        self.assertIn("\\xff", shown)
        margin = by_field["env NVTE_FWD_LAYERNORM_SM_MARGIN"]
        self.assertEqual(margin["actual"], "unset")
        self.assertLess(len(margin["planned"]), 200)

    def test_a_secret_is_checked_for_presence_and_never_shown(self):
        diffs, compared = check.env_differences(planned(TOKEN=None), {})
        self.assertEqual(compared, 1)
        self.assertEqual(diffs, [{"field": "env TOKEN", "key": "env.TOKEN", "planned": "set",
                                  "actual": "unset"}])
        self.assertEqual(check.env_differences(planned(TOKEN=None), {b"TOKEN": b"x"})[0], [])


class AtStart(unittest.TestCase):
    def run_rank(self, planned_env, env):
        with tempfile.TemporaryDirectory() as d:
            request = os.path.join(d, "plan_confirm.json")
            with open(request, "w", encoding="utf-8") as f:
                json.dump({"adapter": "hydra", "argv": [], "planned_overlap": {},
                           "planned_env": planned_env}, f)
            script = os.path.join(d, "runtime.py")
            with open(script, "w", encoding="utf-8") as f:
                f.write(SCRIPT)
            full = {k.encode(): v.encode() for k, v in os.environ.items()}
            full.update({b"PYTHONPATH": FAKE_RUNTIME.encode(), b"RANK": b"7"})
            full.update(env)
            run = subprocess.run([sys.executable, PROGRAM, "--confirm", request, "--", script],
                                 env=full, capture_output=True, timeout=60, check=False)
            verdict = None
            path = os.path.join(d, "plan_confirmation.json")
            if os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    verdict = json.load(f)
            return run, verdict

    def test_a_rank_whose_env_differs_stops_before_its_runtime_starts(self):
        run, verdict = self.run_rank(planned(CUDA_DEVICE_MAX_CONNECTIONS=b"32", HOSTILE=HOSTILE),
                                     {b"CUDA_DEVICE_MAX_CONNECTIONS": b"1", b"HOSTILE": HOSTILE})
        self.assertEqual(run.returncode, 3, run.stderr)
        self.assertNotIn(b"the runtime started", run.stdout)
        self.assertIn(b"the rank's environment differs from the planned launch env: env "
                      b"CUDA_DEVICE_MAX_CONNECTIONS is 1, planned 32", run.stderr)
        self.assertIs(verdict["confirmed"], False)
        self.assertEqual(verdict["rank"], 7)
        self.assertEqual([d["field"] for d in verdict["differences"]],
                         ["env CUDA_DEVICE_MAX_CONNECTIONS"])

    def test_a_rank_with_the_planned_env_runs_its_runtime(self):
        run, _ = self.run_rank(planned(CUDA_DEVICE_MAX_CONNECTIONS=b"32", HOSTILE=HOSTILE),
                               {b"CUDA_DEVICE_MAX_CONNECTIONS": b"32", b"HOSTILE": HOSTILE})
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn(b"the runtime started", run.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
