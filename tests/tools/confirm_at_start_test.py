#!/usr/bin/env python3
"""What the plan confirmation at start compares beyond the argv: every rank's environment
against the plan's launch env, and the recipe base's values against the finalised config.

The plan confirmation at start (python/bridge_config_check.py, `--confirm`) reads the
planned launch env from its request (`planned_env`: each value as the hex of its bytes, a
secret or rank-expanded value by name only) and compares it with the rank's own environment,
byte for byte, before the script runs: a value a wrapper, a prolog or the container changed
stops the rank with exit 3, the variable named on stderr and in the verdict, and the script
never starts. This test imports the comparison and runs the program end to end with hostile
values (quotes, `$(...)`, newlines, escape bytes, bytes that are not UTF-8).

The recipe base's values (request `planned_base`: the keys bridge-launch did not send because
the runtime builds them from the same recipe) are compared where the finalised config holds
them; the conformance suite checks them against the release for every NVIDIA recipe
(fidelity-base-not-confirmed), this test what the comparison does with them.

Usage: confirm_at_start_test.py SOURCE_DIR
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


class BaseValues(unittest.TestCase):
    BASE = {"model.tensor_model_parallel_size": "2", "train.max_steps": "100",
            "model.recompute_modules": "[mla_up_proj,mlp]", "model.moe_flex_dispatcher_backend":
            "hybridep", "model.recompute_method": "null", "model.cuda_graph_scope": "[full]",
            "comm_overlap.tp_comm_overlap": "true", "ddp.overlap_grad_reduce": "true",
            "model.precision": "bf16"}

    def test_each_base_value_is_compared_where_the_finalised_config_holds_it(self):
        planned = {path: (value, key) for path, value, key, _ in check.base_values(self.BASE)}
        self.assertEqual(planned["model.tensor_model_parallel_size"],
                         (2, "recipe base model.tensor_model_parallel_size"))
        self.assertEqual(planned["train.train_iters"][0], 100)
        self.assertEqual(planned["model.recompute_modules"][0], ["mla_up_proj", "mlp"])
        self.assertEqual(planned["model.moe_flex_dispatcher_backend"][0], "hybridep")
        self.assertIsNone(planned["model.recompute_method"][0])
        # Finalisation rewrites the CUDA-graph pair and sets the overlap fields from
        # comm_overlap (compared as the resolved overlap values); precision is not one field.
        for path in ("model.cuda_graph_scope", "comm_overlap.tp_comm_overlap",
                     "ddp.overlap_grad_reduce", "model.precision"):
            self.assertNotIn(path, planned)

    def test_a_runtime_that_built_another_base_value_differs(self):
        cfg = SimpleNamespace(
            model=SimpleNamespace(tensor_model_parallel_size=4, recompute_method=None,
                                  recompute_modules=["mla_up_proj", "mlp"],
                                  moe_flex_dispatcher_backend="hybridep"),
            train=SimpleNamespace(train_iters=100))
        diffs, compared, skipped = check.config_differences(
            cfg, check.planned_values({"planned_base": self.BASE}))
        self.assertEqual([(d["field"], d["planned"], d["actual"]) for d in diffs],
                         [("model.tensor_model_parallel_size", 2, 4)])
        self.assertEqual(diffs[0]["key"], "recipe base model.tensor_model_parallel_size")
        self.assertEqual(compared, 4)
        self.assertEqual(skipped, ["model.recompute_method"])

    def test_what_the_user_sent_wins_over_the_base(self):
        planned = check.planned_values({"adapter": "hydra", "planned_base": self.BASE,
                                        "argv": ["train.train_iters=8"]})
        cfg = SimpleNamespace(train=SimpleNamespace(train_iters=8))
        diffs, _, _ = check.config_differences(cfg, planned)
        self.assertEqual([d for d in diffs if d["field"] == "train.train_iters"], [])


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
