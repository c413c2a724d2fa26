#!/usr/bin/env python3
"""`--runtime-check` against the released Megatron-Bridge (the conformance venv).

Runs bridge-launch's runtime check (plan/runtime_check.h, python/bridge_config_check.py)
with the conformance suite's cached release as the user's Python, and asserts what the user
sees:

  clean        an example passes: `plan --format json` exits 0 and carries the outcome, and its
               `runtime-check-passed` line names the release and the perf recipe;
  refused      plans that bridge-launch's own rules accept and the release refuses, one of each
               class: a Hydra override the release does not have (override refused), a moe
               CUDA graph without drop-padding (refused at finalisation), a misspelt
               `--recipe` in runtime.command (the command's recipe is the one checked), a
               Hub config the cache lacks (refused at once, naming the model id),
               a recipe name the release lacks (no recipe). Each: exit 2, the release's own
               message, the recipe line (file:line:col) or the override that set the value;
  differs      a patched release (a sitecustomize that changes one value in
               runtime_config_update, as a site's fork might) keeps the plan from running as
               checked: exit 2, `runtime-check-differs` names the field, planned and actual value;
  own failure  no such Python, and a Python without Megatron-Bridge: one clear error, exit 2;
  launch       a Slurm --dry-run with the check refused: nothing printed as submitted;
  at start     the plan confirmation (plan/plan_confirm.h) in a real local launch: rank 0 runs
               a runtime that builds the config from its argv through the release's config
               code and stops before training (the other ranks exit at once). The released
               runtime_config_update is confirmed (`status` says so); the patched release
               above fails the job at start, and `why` names ddp.bucket_size with both values.

The release runs offline: HF_HOME is the suite's offline Hub cache (hf_configs/) and the
Transformer Engine stub is on PYTHONPATH, as in the suite. Prints each case's time; the last
line is `N passed, N failed`.

Usage: runtime_check_test.py BRIDGE_LAUNCH_BIN SOURCE_DIR
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import write_offline_hub  # noqa: E402  (the suite's offline Hub cache)


def venv_python(source):
    r = subprocess.run(["bash", os.path.join(source, "scripts", "conformance-env.sh")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"conformance-env.sh failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


PATCH = '''
# A site's patched Megatron-Bridge: its runtime_config_update ends with another DDP bucket size.
import megatron.bridge.training.config as _config
_released = _config.runtime_config_update
def runtime_config_update(cfg, *args, **kwargs):
    result = _released(cfg, *args, **kwargs)
    cfg.ddp.bucket_size = 50000000
    return result
_config.runtime_config_update = runtime_config_update
'''


OLDER = '''
# A release that predates model.moe_permute_fusion: its configs have no such field.
import megatron.bridge.training.utils.omegaconf_utils as _ou
from omegaconf import open_dict
_created = _ou.create_omegaconf_dict_config
def create_omegaconf_dict_config(cfg, *args, **kwargs):
    omega, excluded = _created(cfg, *args, **kwargs)
    with open_dict(omega.model):
        del omega.model["moe_permute_fusion"]
    return omega, excluded
_ou.create_omegaconf_dict_config = create_omegaconf_dict_config
'''


# A runtime for the confirmation at start: rank 0 builds the config from exactly its argv as
# run_script.py does (the config path of python/bridge_config_check.py, which calls the
# release's runtime_config_update) and stops before training; the other ranks have nothing to
# build here.
RUNTIME = '''
import os, sys
if os.environ.get("RANK", "0") != "0":
    sys.exit(0)
sys.path.insert(0, {python_dir!r})
import bridge_config_check as b
argv = sys.argv[1:]
flags, _, _ = b.parse_mb_argv(argv)
case, _ = b.case_of({{"adapter": "megatron_bridge", "argv": argv, "world_size": flags["num_gpus"],
                     "gpu": flags["gpu"], "capability": None, "recipe_lookup": {{}}}})
b.load_release()
res = b.run_case(case)
print("stopping before training; finalised:", res.get("finalize"), flush=True)
'''


class Suite:
    def __init__(self, binary, source, python, scratch):
        self.binary, self.source, self.python, self.scratch = binary, source, python, scratch
        self.passed, self.failed = 0, 0
        self.env = dict(os.environ)
        self.env["HF_HOME"] = os.path.join(scratch, "hf")
        self.env["HF_HUB_OFFLINE"] = "1"
        self.env["TRANSFORMERS_OFFLINE"] = "1"
        self.env["PYTHONPATH"] = os.path.join(HERE, "stubs")
        self.env["BRIDGE_LAUNCH_HOME"] = os.path.join(scratch, "home")

    def patched_release(self, name, sitecustomize):
        """The environment of a release changed by `sitecustomize` (imported at start-up)."""
        where = os.path.join(self.scratch, name)
        os.makedirs(where)
        with open(os.path.join(where, "sitecustomize.py"), "w") as f:
            f.write(sitecustomize)
        env = dict(self.env)
        env["PYTHONPATH"] = where + os.pathsep + env["PYTHONPATH"]
        return env

    def run(self, args, env=None):
        t0 = time.time()
        r = subprocess.run([self.binary] + args, capture_output=True, text=True,
                           env=env or self.env, cwd=self.source, timeout=1000)
        return r, time.time() - t0

    def expect(self, name, ok, detail):
        if ok:
            self.passed += 1
            print(f"  ok    {name}")
        else:
            self.failed += 1
            print(f"  FAIL  {name}: {detail}")

    def case(self, name, args, exit_code, wants, env=None, unwanted=()):
        r, seconds = self.run(args, env)
        out = r.stdout + r.stderr
        missing = [w for w in wants if w not in out]
        present = [w for w in unwanted if w in out]
        self.expect(f"{name} ({seconds:.1f} s)",
                    r.returncode == exit_code and not missing and not present,
                    f"exit {r.returncode} (want {exit_code}); missing {missing}; "
                    f"unwanted {present}\n{out[-2500:]}")
        return r


def main():
    binary, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    t_start = time.time()
    python = venv_python(source)
    scratch = tempfile.mkdtemp(prefix="bridge-runtime-check-")
    try:
        write_offline_hub(os.path.join(scratch, "hf"))
        s = Suite(binary, source, python, scratch)
        run_cases(s, python, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"runtime check suite: {time.time() - t_start:.1f} s")
    print(f"{s.passed} passed, {s.failed} failed")
    sys.exit(1 if s.failed else 0)


def run_cases(s, python, scratch):
    qwen = "examples/recipes/qwen3-30b-a3b-ep-overlap.yaml"
    # A loaded machine may take minutes to import torch: the limit is not what is tested here.
    rc = ["--runtime-check", python, "runtime.check.timeout=900"]
    print("clean:")
    r, seconds = s.run(["plan", qwen, "--format", "json"] + rc)
    try:
        shown = json.loads(r.stdout)
    except ValueError:
        shown = {}
    got = shown.get("runtime_check") or {}
    passed = [d["message"] for d in shown.get("diagnostics", [])
              if d.get("code") == "runtime-check-passed"]
    s.expect(f"the Qwen3 MoE example passes ({seconds:.1f} s)",
             r.returncode == 0 and got.get("passed") is True and got.get("python") == python
             and got.get("findings") == 0 and got.get("seconds", 0) > 0
             and got.get("recipe") == "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"
             and passed and "megatron.bridge 0.6.2" in passed[0],
             f"exit {r.returncode}\n{r.stdout[-1500:]}{r.stderr[-1500:]}")
    # checkpoint: (docs/long-jobs.md) goes as the release's own keys; the check compares
    # each override with the value the finalised config holds.
    s.case("a checkpoint section lands as the release's checkpoint.save/load/save_interval/"
           "most_recent_k/async_save",
           ["validate", qwen, "checkpoint.dir=/lustre/ckpt", "checkpoint.interval=100",
            "checkpoint.keep=2", "checkpoint.async=true",
            "executor.slurm.container_mounts=[/lustre:/lustre]"] + rc, 0,
           ["runtime-check-passed"])
    print("refused (bridge-launch's rules accept each; the release does not):")
    env = s.patched_release("older", OLDER)
    s.case("an override the release does not have (a release without moe_permute_fusion)",
           ["validate", qwen] + rc, 2,
           ["runtime-check-refused", "model.moe_permute_fusion", f"{qwen}:30:",
            "Could not override 'model.moe_permute_fusion'"], env=env)
    # A CUDA graph of the whole MoE layer on a model that drops no tokens (no capacity factor):
    # Megatron-Core refuses it when the config is finalised, and bridge-launch's own rules do
    # not know it (an mlp graph on an all-MoE model, the case here before, is rule E22 now).
    moe_graph = ["runtime.adapter=hydra", "model.cuda_graph_impl=transformer_engine",
                 "model.cuda_graph_scope=[moe]",
                 "comm_overlap.overlap_moe_expert_parallel_comm=false"]
    s.case("finalisation: a moe CUDA graph without drop-padding",
           ["validate", qwen] + moe_graph + rc,
           2, ["runtime-check-refused", "moe cuda graph is only supported with drop-padding MoE",
               "override 'model.cuda_graph_scope=[moe]'"])
    # The recipe the job's command names is the one checked: run_recipe.py's `--recipe` in
    # runtime.command, misspelt, is refused by the release (it was checked against
    # model.recipe's recipe and "passed").
    gpt = "examples/recipes/gpt-175b-tp-pp-dp.yaml"
    s.case("a misspelt --recipe in runtime.command is the recipe checked (hydra adapter)",
           ["validate", gpt, "runtime.command=[python,/opt/Megatron-Bridge/scripts/training/"
            "run_recipe.py,--recipe,gpt3_175b_pretrain_32gpu_h100_bf16_cnofig]"] + rc, 2,
           ["runtime-check-refused", "gpt3_175b_pretrain_32gpu_h100_bf16_cnofig",
            "hydra-recipe-unknown"])
    # Offline without the Hub config the recipe reads (a login node's usual state, with
    # HF_HUB_OFFLINE unset): a refusal naming the model id and how to cache it, at once, not
    # minutes of Hub retries reported as the check's own failure.
    env = dict(s.env, HF_HOME=os.path.join(scratch, "empty-hf"))
    env.pop("HF_HUB_OFFLINE", None)
    env.pop("TRANSFORMERS_OFFLINE", None)
    s.case("a Hub config the cache lacks is refused with the model id to cache",
           ["validate", qwen] + rc, 2,
           ["runtime-check-refused", "reads the Hugging Face config of Qwen/Qwen3-30B-A3B",
            "snapshot_download('Qwen/Qwen3-30B-A3B'", os.path.join(scratch, "empty-hf")],
           env=env, unwanted=["the check itself failed", "runtime-check-failed"])
    s.case("no such recipe in the release (hydra adapter)",
           ["validate", qwen, "runtime.adapter=hydra", "model.recipe=qwen3_31b_a3b"] + rc, 2,
           ["runtime-check-refused", "qwen3_31b_a3b", "override 'model.recipe"])
    print("differs (a patched release changes a planned value):")
    env = s.patched_release("patched", PATCH)
    s.case("the patched bucket size is named with both values", ["validate", qwen] + rc, 2,
           ["runtime-check-differs", "ddp.bucket_size", "134217728", "50000000"], env=env)
    print("the check's own failure:")
    s.case("no such Python", ["validate", qwen, "--runtime-check", "/nonexistent/python3"], 2,
           ["runtime-check-failed", "/nonexistent/python3"], unwanted=["terminate", "what():"])
    s.case("a Python without Megatron-Bridge", ["validate", qwen, "--runtime-check",
                                                sys.executable], 2,
           ["runtime-check-failed", "does not import", "megatron"])
    print("launch:")
    s.case("a refused plan is not submitted (Slurm --dry-run)",
           ["--executor", "slurm", "--dry-run", qwen] + moe_graph + rc, 2,
           ["runtime-check-refused"], unwanted=["#SBATCH"])
    print("at start (a real local launch; rank 0 builds the config with the release):")
    runtime = os.path.join(scratch, "runtime.py")
    with open(runtime, "w") as f:
        f.write(RUNTIME.format(python_dir=os.path.join(s.source, "python")))
    local = ["--executor", "local", "-ng", "16", "-gn", "16", qwen, "cluster.gpus_per_node_max=16",
             f"runtime.command=[{python}, {runtime}]",
             "executor.local.job_dir=" + os.path.join(scratch, "jobs")]
    s.case("the release builds the planned config: confirmed, then it stops before training",
           local + ["name=confirm-clean"], 0, ["stopping before training; finalised: {'ok': True}"])
    s.case("status says rank 0 confirmed the plan", ["status", "confirm-clean"], 0,
           ["plan confirmed by rank 0 (", "megatron.bridge 0.6.2"])
    # Rank 0 only: 16 imports of the release at once would take minutes on 2 cores.
    env = s.patched_release("patched-at-start", "import os\nif os.environ.get('RANK') == '0':\n"
                            + "".join("    " + line + "\n" for line in PATCH.strip().splitlines()))
    s.case("a patched release in the job fails it at start",
           local + ["name=confirm-patched"], 1,
           ["the runtime built a config that differs from the plan: ddp.bucket_size is 50000000, "
            "planned 134217728"], env=env, unwanted=["stopping before training"])
    s.case("why names the field with the planned and the built value", ["why", "confirm-patched"],
           1, ["plan differs on rank 0: ddp.bucket_size is 50000000, planned 134217728 "
               "(comm_overlap.bucket_size)"])


if __name__ == "__main__":
    main()
