#!/usr/bin/env python3
"""Conformance of bridge-launch's plans with the released Megatron-Bridge (tests/conformance/).

Runs with the system python3 (PyYAML). For every example recipe that targets Megatron-Bridge, in
both adapter forms (megatron_bridge: run_script.py flags + Hydra overrides; hydra: plain
section.key=value), and for a generated corpus built from the overlap knobs with a fixed seed,
it runs `bridge-launch plan --format json` and `bridge-launch validate`, turns each plan into a
case for harness.py (which runs the release's own config code in the conformance venv, one
process for all cases), and checks:

  (a) every forwarded override is accepted by the release, lands with the planned value and
      survives finalisation (run_script.py's flag layer, runtime_config_update);
  (b) validate's verdict equals the release's (recipe found, overrides accepted, finalisation
      without an exception);
  (c) the 14 resolved overlap values equal the release's after CommOverlapConfig.setup();
  (d) plan's runtime_env names every env_vars entry of the performance recipe the release
      builds, with its value and the value each rank gets (the launch env's wins).

Disagreements are grouped in classes. Those listed in known_gaps.json (bugs still open in the
C++ sources) are reported as "known gap" (neither pass nor fail); a known gap that no longer
occurs is a failure ("fixed: remove it from known_gaps.json"). The last line is exactly
`N passed, N failed` (cases; known gaps are counted on the line before it).

Usage: run_conformance.py BRIDGE_LAUNCH_BIN SOURCE_DIR [--release 0.6.2] [--corpus N]
       [--seed S] [--jobs J] [--json FILE] [--keep DIR] [--verbose]
"""

import argparse
import collections
import concurrent.futures
import copy
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity  # noqa: E402  (this directory's named-recipe fidelity check)
import guide_command  # noqa: E402  (NVIDIA's whole smoke-test command as recipe keys)
import perf_recipe_table  # noqa: E402  (this directory's table generator)

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))

OVERLAP_FIELDS = [
    "tp_comm_overlap", "tp_comm_overlap_cfg", "tp_comm_bootstrap_backend", "overlap_p2p_comm",
    "batch_p2p_comm", "defer_embedding_wgrad_compute", "wgrad_deferral_limit",
    "overlap_moe_expert_parallel_comm", "delay_wgrad_compute", "overlap_grad_reduce",
    "overlap_param_gather", "overlap_param_gather_with_optimizer_step", "align_param_gather",
    "bucket_size",
]

# run_script.py's flags as bridge-launch's runtime check parses them (the same table).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
from bridge_config_check import CONFIG_FLAGS, parse_mb_argv  # noqa: E402


def equivalent(key, planned, got, res):
    """Values the release keeps in another, equivalent form (not a disagreement):
    - an empty list and None (Megatron-Core's disabled cuda_graph_scope is None);
    - cuda_graph_impl "local" with scope [full_iteration] is stored as impl "full_iteration"
      with no scope (megatron.bridge.utils.cuda_graph set_full_iteration_cuda_graph)."""
    if planned in ([], None) and got in ([], None):
        return True
    # `mixed_precision=<recipe name>` becomes that recipe's MixedPrecisionConfig at finalisation.
    recipes = res.get("mixed_precision_recipes") or {}
    if key == "mixed_precision" and isinstance(planned, str) and isinstance(got, dict) \
            and planned in recipes:
        return covers(got, recipes[planned])
    vals = res.get("values") or {}
    if key == "model.cuda_graph_impl" and planned == "local" and got == "full_iteration":
        return True
    if key == "model.cuda_graph_scope" and planned == ["full_iteration"] and got in ([], None) \
            and vals.get("model.cuda_graph_impl") == "full_iteration":
        return True
    # Megatron-Core 0.19 moves a (deprecated) cuda_graph_scope list into cuda_graph_modules.
    if key == "model.cuda_graph_scope" and isinstance(planned, list) and got in ([], None):
        modules = vals.get("model.cuda_graph_modules")
        if isinstance(modules, list) and [str(m).lower() for m in modules] == \
                [str(p).lower() for p in planned]:
            return True
    return False

def overridden_as_planned(key, got, plan):
    """A ddp./optimizer. value the user set that CommOverlapConfig.setup() replaces with the
    overlap resolution's: the plan says so (ddp-field-overridden) and shows the value the
    runtime ends with, which is what finalisation gave."""
    section, _, field = key.partition(".")
    if section not in ("ddp", "optimizer") or not plan:
        return False
    warned = any(d.get("code") == "ddp-field-overridden" and d.get("path") == key
                 for d in plan.get("diagnostics") or [])
    return warned and same((plan.get(section) or {}).get(field), got)


CLASS_TEXT = {
    "override-refused": "(a) a forwarded override is refused by the release's Hydra/OmegaConf machinery",
    "override-landed-wrong": "(a) an accepted override lands with another value than the plan's",
    "override-overwritten-by-flags": "(a) run_script.py's flag layer overwrites a forwarded override",
    "override-changed-at-finalisation": "(a) runtime_config_update changes a forwarded value",
    "flag-changed": "(a) a run_script.py flag's value does not survive finalisation",
    "release-refuses-no-perf-recipe": "(b) validate accepts; run_script.py finds no flat perf recipe",
    "release-refuses-override": "(b) validate accepts; the release refuses an override",
    "release-refuses-run-script": "(b) validate accepts; run_script.py's own flag handling raises",
    "release-refuses-finalisation": "(b) validate accepts; runtime_config_update raises",
    "release-refuses-no-te": "(b) validate accepts (TE absent); the release cannot import without TE",
    "release-accepts-refused-plan": "(b) validate refuses; the release accepts the same config",
    "overlap-value-mismatch": "(c) a resolved overlap value differs from the release's",
    "runtime-env-unnamed": "(d) the perf recipe sets an env variable that plan's runtime_env does not name",
    "runtime-env-wrong": "(d) plan's runtime_env says otherwise than the release's perf recipe",
    "harness-error": "the harness failed on a case (a bug of the suite)",
}


# ---------------------------------------------------------------------------------------------
# Small helpers


def log(msg):
    print(msg, flush=True)


def same(a, b):
    """Equality that keeps bools apart from ints and ignores None entries of mappings."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        a = {k: v for k, v in a.items() if v is not None}
        b = {k: v for k, v in b.items() if v is not None}
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return type(a) is type(b) and a == b


def short(v, n=120):
    s = json.dumps(v, sort_keys=True) if not isinstance(v, str) else v
    return s if len(s) <= n else s[:n - 3] + "..."


class _ValueParser:
    """Reads an override value the way the plan means it: Hydra's lowercase booleans, null,
    numbers, [a,b] lists and {k:v} mappings; anything else is a string."""

    def __init__(self, text):
        self.s, self.i = text, 0

    def parse(self):
        v = self.value()
        if self.i != len(self.s):
            return self.s  # not a structured value after all: a plain string
        return v

    def value(self):
        if self.i < len(self.s) and self.s[self.i] == "[":
            self.i += 1
            out = []
            while self.i < len(self.s) and self.s[self.i] != "]":
                out.append(self.value())
                if self.i < len(self.s) and self.s[self.i] == ",":
                    self.i += 1
            self.i += 1
            return out
        if self.i < len(self.s) and self.s[self.i] == "{":
            self.i += 1
            out = {}
            while self.i < len(self.s) and self.s[self.i] != "}":
                j = self.s.index(":", self.i)
                key = self.s[self.i:j].strip()
                self.i = j + 1
                out[key] = self.value()
                if self.i < len(self.s) and self.s[self.i] == ",":
                    self.i += 1
            self.i += 1
            return out
        j = self.i
        while j < len(self.s) and self.s[j] not in ",]}":
            j += 1
        word, self.i = self.s[self.i:j], j
        return scalar(word)


def scalar(word):
    w = word.strip()
    if w in ("true", "True"):
        return True
    if w in ("false", "False"):
        return False
    if w in ("null", "None", "~"):
        return None
    if re.fullmatch(r"[-+]?\d+", w):
        return int(w)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", w):
        return float(w)
    return w


def parse_value(text):
    try:
        return _ValueParser(text).parse()
    except (ValueError, IndexError):
        return text


# ---------------------------------------------------------------------------------------------
# bridge-launch


class BridgeLaunch:
    def __init__(self, binary, home):
        self.binary, self.env = binary, dict(os.environ, HOME=home, NO_COLOR="1")

    def plan(self, recipe, overrides=()):
        r = subprocess.run([self.binary, "plan", "--format", "json", recipe, *overrides],
                           capture_output=True, text=True, env=self.env, check=False)
        try:
            doc = json.loads(r.stdout)
        except json.JSONDecodeError:
            doc = None
        return r.returncode, doc, r.stderr[-2000:]

    def validate(self, recipe, overrides=()):
        r = subprocess.run([self.binary, "validate", recipe, *overrides], capture_output=True,
                           text=True, env=self.env, check=False)
        return r.returncode, (r.stdout + r.stderr)[-3000:]


# ---------------------------------------------------------------------------------------------
# The corpus


PRESETS = [
    "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_fp8_h100_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_bf16_b200_h12288_tp4_mbs1_seqlen2048",
    "userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
    "userbuffers_bf16_h100_h6144_tp2_mbs2_seqlen2048",
]
INLINE_UB = {
    "qkv_dgrad": {"method": "bulk", "num_sm": 4, "cga_size": 2, "set_sm_margin": False},
    "proj_fprop": {"method": "pipeline", "num_sm": 24, "cga_size": 2, "num_splits": 4,
                   "set_sm_margin": True},
    "fc2_fprop": {"method": "ring_exchange", "set_sm_margin": True},
}


def mutate(doc, rng, moe):
    """Apply a few random overlap-knob changes to a recipe document (in place). Returns the
    list of knob names changed (for the case id)."""
    m, co = doc.setdefault("model", {}), doc.setdefault("comm_overlap", {}) or {}
    doc["comm_overlap"] = co
    ddp = doc.setdefault("ddp", {}) or {}
    doc["ddp"] = ddp
    cl, rt, tr = doc["cluster"], doc["runtime"], doc["train"]
    layers = m.get("num_layers") or 48
    heads = m.get("num_attention_heads") or 32
    changed = []

    def topology():
        tp = rng.choice([t for t in (1, 2, 4, 8) if heads % t == 0])
        pp = rng.choice([1, 1, 2, 4])
        vpps = [None] + [v for v in (1, 2, 3, 4) if pp > 1 and layers % (pp * v) == 0]
        vpp = rng.choice(vpps) if pp > 1 else (None if rng.random() < 0.95 else 2)
        cp = rng.choice([1, 1, 1, 2])
        ep = rng.choice([1, 2, 4, 8, 16]) if moe else 1
        etp = rng.choice([None, None, 1, tp])
        per = tp * pp * cp
        if moe:
            per = max(per, (etp or tp) * ep * pp)
        dp = rng.choice([1, 2, 4, 8])
        ng = per * dp if rng.random() < 0.9 else per * dp + 8
        gn = cl.get("gpus_per_node", 8)
        ng = max(gn, ((ng + gn - 1) // gn) * gn) if ng >= gn else ng
        m.update(tensor_model_parallel_size=tp, pipeline_model_parallel_size=pp,
                 virtual_pipeline_model_parallel_size=vpp, context_parallel_size=cp)
        if moe:
            m.update(expert_model_parallel_size=ep, expert_tensor_parallel_size=etp)
        cl["num_gpus"] = ng
        if ng < gn:
            cl["gpus_per_node"] = ng
        m["sequence_parallel"] = tp > 1 and rng.random() < 0.85
        mbs = tr.get("micro_batch_size") or 1
        dpr = max(1, ng // max(1, tp * pp * cp))
        tr["global_batch_size"] = mbs * dpr * rng.choice([8, 16, 32])

    knobs = {
        "topology": topology,
        "tp_overlap": lambda: co.update(tp_comm_overlap=rng.choice([True, True, False, None])),
        "ub_cfg": lambda: co.update(tp_comm_overlap_cfg=rng.choice(
            PRESETS + [None, copy.deepcopy(INLINE_UB)])),
        "bootstrap": lambda: co.update(tp_comm_bootstrap_backend=rng.choice(["nccl", "mpi", "gloo"])),
        "p2p": lambda: co.update(overlap_p2p_comm=rng.choice([None, True, False]),
                                 batch_p2p_comm=rng.choice([None, None, True, False])),
        "dp_fields": lambda: co.update(**{
            f: rng.choice([None, True, False]) for f in rng.sample(
                ["overlap_grad_reduce", "overlap_param_gather", "align_param_gather",
                 "overlap_param_gather_with_optimizer_step"], rng.randint(1, 3))}),
        "bucket": lambda: co.update(bucket_size=rng.choice([None, 40000000, 134217728])),
        "defer_wgrad": lambda: co.update(defer_embedding_wgrad_compute=rng.choice([True, False]),
                                         wgrad_deferral_limit=rng.choice([None, -1, 0, 22, 50])),
        "dist_opt": lambda: ddp.update(use_distributed_optimizer=rng.choice([True, True, False])),
        "ddp_fields": lambda: ddp.update(**{
            f: rng.choice([True, False]) for f in rng.sample(
                ["overlap_grad_reduce", "overlap_param_gather", "align_param_gather"],
                rng.randint(1, 2))}),
        "recompute": lambda: m.update(**rng.choice([
            dict(recompute_granularity=None, recompute_method=None, recompute_num_layers=None,
                 recompute_modules=None),
            dict(recompute_granularity="selective", recompute_modules=["core_attn"],
                 recompute_method=None, recompute_num_layers=None),
            dict(recompute_granularity="selective", recompute_modules=["core_attn", "mlp"],
                 recompute_method=None, recompute_num_layers=None),
            dict(recompute_granularity="full", recompute_method="uniform",
                 recompute_num_layers=1, recompute_modules=None),
            dict(recompute_granularity="full", recompute_method="block", recompute_num_layers=2,
                 recompute_modules=None),
        ] + ([dict(recompute_granularity="selective", recompute_modules=["moe"],
                   recompute_method=None, recompute_num_layers=None)] if moe else []))),
        "cuda_graph": lambda: m.update(**rng.choice([
            dict(cuda_graph_impl="none", cuda_graph_scope=[]),
            dict(cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn"]),
            dict(cuda_graph_impl="transformer_engine", cuda_graph_scope=["attn", "moe_router"]
                 if moe else ["attn", "mlp"]),
            dict(cuda_graph_impl="local", cuda_graph_scope=["full_iteration"]),
            dict(cuda_graph_impl="local", cuda_graph_scope=[]),
        ])),
        "grad_fusion": lambda: m.update(gradient_accumulation_fusion=rng.choice([True, False])),
        "bias": lambda: m.update(add_bias_linear=rng.choice([None, True, False])),
        "te": lambda: rt.update(transformer_engine=rng.choice(
            ["2.9.0", "2.9.0", "2.6.0", "2.7.0", "2.12.0", "2.12.0rc1", False])),
        "gpu": lambda: (cl.update(gpu=rng.choice(["h100", "h100", "b200", "gb200"])),
                        cl.update(gpus_per_node=4 if cl["gpu"] == "gb200" else 8)),
        "mbs": lambda: tr.update(micro_batch_size=rng.choice([1, 1, 2])),
        "compute_dtype": lambda: m.update(compute_dtype=rng.choice(["bf16", "fp8_cs", "fp8_mx"])),
    }
    if moe:
        knobs.update({
            "ep_overlap": lambda: co.update(overlap_moe_expert_parallel_comm=rng.choice(
                [True, True, False, None])),
            "delay_wgrad": lambda: co.update(delay_wgrad_compute=rng.choice([True, True, False])),
            "dispatcher": lambda: m.update(**rng.choice([
                dict(moe_token_dispatcher_type="alltoall", moe_flex_dispatcher_backend=None),
                dict(moe_token_dispatcher_type="allgather", moe_flex_dispatcher_backend=None),
                dict(moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend="deepep"),
                dict(moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend="hybridep"),
                dict(moe_token_dispatcher_type="alltoall", moe_flex_dispatcher_backend="deepep"),
            ])),
            "shared_expert": lambda: m.update(moe_shared_expert_overlap=rng.choice([True, False])),
            "mtp": lambda: m.update(mtp_num_layers=rng.choice([None, 0, 1, 2])),
            "permute_fusion": lambda: m.update(moe_permute_fusion=rng.choice([True, False])),
        })
    else:
        knobs["delay_wgrad"] = lambda: co.update(delay_wgrad_compute=True)
    names = sorted(knobs)
    picked = rng.sample(names, rng.randint(2, 6))
    if "gpu" in picked:  # before topology, which reads gpus_per_node
        picked.remove("gpu")
        picked.insert(0, "gpu")
    if "mbs" in picked and "topology" not in picked:
        picked.append("topology")
    if "mbs" in picked:
        picked.remove("mbs")
        picked.insert(0, "mbs")
    for k in picked:
        knobs[k]()
        changed.append(k)
    return changed


def example_recipes(source):
    out = []
    d = os.path.join(source, "examples", "recipes")
    for name in sorted(os.listdir(d)):
        if not name.endswith(".yaml"):
            continue
        with open(os.path.join(d, name)) as f:
            doc = yaml.safe_load(f)
        if (doc.get("runtime") or {}).get("adapter") == "megatron_bridge":
            out.append((name[:-5], doc))
    return out


def write_recipe(dirname, name, doc):
    path = os.path.join(dirname, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f, sort_keys=False)
    return path


def build_corpus(examples, n, seed, tmp):
    """Recipes: (id, adapter, path, doc, generated)."""
    rng = random.Random(seed)
    items = []
    for name, doc in examples:
        for adapter in ("megatron_bridge", "hydra"):
            d = copy.deepcopy(doc)
            d["runtime"]["adapter"] = adapter
            rid = f"example/{name}/{adapter}"
            items.append((rid, adapter, write_recipe(tmp, rid.replace("/", "__"), d), d, False))
    for i in range(n):
        name, base = examples[i % len(examples)]
        d = copy.deepcopy(base)
        moe = (d.get("model") or {}).get("num_moe_experts") is not None
        knobs = mutate(d, rng, moe)
        d["name"] = f"gen-{i:04d}"
        for adapter in ("megatron_bridge", "hydra"):
            dd = copy.deepcopy(d)
            dd["runtime"]["adapter"] = adapter
            rid = f"gen/{i:04d}-{name}-{'+'.join(knobs)}/{adapter}"
            items.append((rid, adapter, write_recipe(tmp, f"gen{i:04d}_{adapter}", dd), dd, True))
    return items


# ---------------------------------------------------------------------------------------------
# Plans -> harness cases


def te_version_of(doc):
    te = (doc.get("runtime") or {}).get("transformer_engine", None)
    if te is False:
        return None  # absent
    return str(te) if te is not None else "2.9.0"  # unknown: the stub's default


def argv_payload(doc, argv):
    """The adapter's part of argv: after runtime.command and runtime.args."""
    rt = doc.get("runtime") or {}
    skip = len(rt.get("command") or []) + len(rt.get("args") or [])
    return argv[skip:]


def derived_overrides(doc):
    """For a plan refused before the adapter ran (no argv): the recipe's own values in the
    hydra form, so the release's verdict on the same config can still be asked."""
    m = dict(doc.get("model") or {})
    out = []
    for k in ("family", "recipe", "precision", "compute_dtype"):
        m.pop(k, None)
    for sec, vals in (("model", m), ("comm_overlap", doc.get("comm_overlap") or {}),
                      ("ddp", doc.get("ddp") or {}), ("optimizer", doc.get("optimizer") or {}),
                      ("mixed_precision", doc.get("mixed_precision") or {})):
        for k, v in vals.items():
            if v is None and sec != "model":
                continue
            out.append(f"{sec}.{k}={hydra_text(v)}")
    tr = doc.get("train") or {}
    for k, v in tr.items():
        if k in ("task",) or v is None:
            continue
        out.append(f"train.{'train_iters' if k == 'max_steps' else k}={hydra_text(v)}")
    return out


def hydra_text(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, list):
        return "[" + ",".join(hydra_text(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{hydra_text(x)}" for k, x in v.items()) + "}"
    return str(v)


READS = ["ddp.use_distributed_optimizer", "model.gradient_accumulation_fusion",
         "model.add_bias_linear", "model.add_qkv_bias", "model.sequence_parallel",
         "mixed_precision", "train.train_iters", "model.bf16", "model.fp16", "model.params_dtype",
         "comm_overlap", "model.moe_token_dispatcher_type", "model.moe_flex_dispatcher_backend",
         "optimizer.use_precision_aware_optimizer", "optimizer.use_distributed_optimizer",
         "model.cuda_graph_impl", "model.cuda_graph_scope",
         "rerun_state_machine.check_for_nan_in_loss", "model.pipeline_model_parallel_size",
         "model.virtual_pipeline_model_parallel_size", "model.cuda_graph_modules"]


def make_case(rid, adapter, doc, plan):
    m = doc.get("model") or {}
    cl = doc.get("cluster") or {}
    tr = doc.get("train") or {}
    gpu = ((plan or {}).get("topology") or {}).get("gpu") or cl.get("gpu") or "h100"
    ng = ((plan or {}).get("topology") or {}).get("num_gpus") or cl.get("num_gpus") or 1
    perf = {"model_family_name": m.get("family"), "model_recipe_name": m.get("recipe"),
            "task": tr.get("task") or "pretrain", "num_gpus": ng, "gpu": gpu,
            "compute_dtype": m.get("compute_dtype") or "bf16"}
    case = {"id": rid, "adapter": adapter, "world_size": ng, "gpu": gpu,
            "te_version": te_version_of(doc), "read": READS}
    payload = argv_payload(doc, (plan or {}).get("argv") or [])
    derived = not payload
    if adapter == "megatron_bridge":
        case["mode"] = "perf_script"
        if derived:
            words = []
            t = {"tensor_model_parallel_size": m.get("tensor_model_parallel_size", 1),
                 "pipeline_model_parallel_size": m.get("pipeline_model_parallel_size", 1),
                 "virtual_pipeline_model_parallel_size": m.get("virtual_pipeline_model_parallel_size"),
                 "context_parallel_size": m.get("context_parallel_size", 1),
                 "expert_model_parallel_size": m.get("expert_model_parallel_size", 1),
                 "expert_tensor_parallel_size": m.get("expert_tensor_parallel_size")
                 or m.get("tensor_model_parallel_size", 1)}
            for k, v in (("seq_length", m.get("seq_length")),
                         ("global_batch_size", tr.get("global_batch_size")),
                         ("micro_batch_size", tr.get("micro_batch_size")),
                         ("max_steps", tr.get("max_steps"))):
                if v is not None:
                    t[k] = v
            flags = t
            overrides = [o for o in derived_overrides(doc) if not o.startswith("train.train_iters")
                         and o.split("=")[0].split(".", 1)[1] not in t
                         and o.split("=")[0] not in ("train.global_batch_size",
                                                     "train.micro_batch_size")]
        else:
            flags, overrides, _ = parse_mb_argv(payload)
            perf.update({k: flags[k] for k in ("model_family_name", "model_recipe_name", "gpu",
                                               "num_gpus", "compute_dtype", "task",
                                               "config_variant") if k in flags})
            flags = {k: v for k, v in flags.items() if k in CONFIG_FLAGS}
        case.update(perf=perf, flags=flags, overrides=overrides)
    else:
        case["mode"] = "recipe"
        case["recipe_lookup"] = perf
        case["overrides"] = derived_overrides(doc) if derived else payload
    case["derived_from_recipe"] = derived
    return case


def strip_targets(v, expanded_preset=None):
    """A planned Hydra object without its _target_/_call_ keys: a {_target_:<preset>,_call_:false}
    reference becomes the preset's layers as the plan expands them."""
    if isinstance(v, dict):
        if v.get("_call_") is False and isinstance(expanded_preset, dict):
            return expanded_preset
        return {k: strip_targets(x, expanded_preset) for k, x in v.items()
                if k not in ("_target_", "_call_")}
    if isinstance(v, list):
        return [strip_targets(x, expanded_preset) for x in v]
    return v


def covers(landed, want):
    """`landed` holds every planned value of `want` (a mapping may hold more: fields the plan
    leaves to the runtime's recipe or defaults, which the plan shows as null)."""
    if isinstance(want, dict) and isinstance(landed, dict):
        return all(v is None or (k in landed and covers(landed[k], v)) for k, v in want.items())
    return same(landed, want)


def mp_object_fields(value):
    """A planned `{_target_:...MixedPrecisionConfig,...}` as the fields the object gets: torch
    dtypes (`{_target_:torch.bfloat16,_call_:false}`) as the harness prints them."""
    out = {}
    for k, v in value.items():
        if k == "_target_":
            continue
        if isinstance(v, dict) and v.get("_call_") is False:
            v = v["_target_"]
        out[k] = v
    return out


def mixed_precision_base(plan, adapter, res):
    """The MixedPrecisionConfig the job would have without the recipe's mixed_precision keys:
    for the hydra adapter the named recipe of the plan's precision (it replaces the recipe's,
    as `mixed_precision=<name>` did), for megatron_bridge the flat perf recipe's own."""
    recipes = res.get("mixed_precision_recipes") or {}
    if adapter == "hydra":
        for src in plan.get("runtime_arg_sources") or []:
            m = re.search(r"mixed-precision recipe (\w+) with", src.get("reason") or "")
            if m:
                return recipes.get(m.group(1)), m.group(1)
        return None, "?"
    own = (res.get("defaults") or {}).get("mixed_precision")
    if isinstance(own, str):
        return recipes.get(own), own
    return own, "the perf recipe's object"


def check_mixed_precision(rid, adapter, plan, doc, e, res):
    """The object sent for mixed_precision is the base recipe with only the recipe's own
    mixed_precision keys changed: no other field differs from what the runtime would use."""
    if (res.get("base") or {}).get("instead_of_perf_recipe"):
        return []  # no perf recipe: the runtime stops before (release-refuses-no-perf-recipe)
    base, name = mixed_precision_base(plan, adapter, res)
    if not isinstance(base, dict):
        return [finding("mixed-precision-base-unknown", rid, adapter, key="mixed_precision",
                        message=f"no MixedPrecisionConfig for base {name!r}")]
    want = dict(base)
    for k, v in ((doc or {}).get("mixed_precision") or {}).items():
        want[k] = v
        if k == "fp8_param_gather":
            want["fp8_param"] = v
    got = e["landed"] if isinstance(e["landed"], dict) else {}
    diff = sorted(k for k in set(want) | set(got) if not same(got.get(k), want.get(k)))
    if not diff:
        return []
    return [finding("mixed-precision-not-the-recipes", rid, adapter, key="mixed_precision",
                    message=f"base {name}: " + ", ".join(
                        f"{k} sent {short(got.get(k))}, recipe {short(want.get(k))}"
                        for k in diff[:6]))]


def expected_value(override, plan):
    key, text = override.split("=", 1)
    key = key.lstrip("+~")
    value = parse_value(text)
    if key == "mixed_precision" and isinstance(value, dict):
        return key, mp_object_fields(value)
    if key == "comm_overlap" and value is None:
        return key, None  # the section cleared before it is set (the next override)
    if key == "comm_overlap" and isinstance(value, dict):
        expanded = ((plan or {}).get("comm_overlap") or {}).get("tp_comm_overlap_cfg") or {}
        return key, strip_targets(value, expanded.get("value"))
    if key == "comm_overlap.tp_comm_overlap_cfg" and isinstance(value, dict):
        return key, strip_targets(value)  # the layers as the dataclass the plan sends
    if key == "comm_overlap.tp_comm_overlap_cfg" and isinstance(value, str) and plan:
        expanded = ((plan.get("comm_overlap") or {}).get("tp_comm_overlap_cfg") or {}).get("value")
        if isinstance(expanded, dict):
            return key, expanded  # a preset name means the preset's layers
    return key, value


# ---------------------------------------------------------------------------------------------
# Checks


def finding(cls, rid, adapter, key="", message="", detail=""):
    return {"class": cls, "case": rid, "adapter": adapter, "key": key, "message": message,
            "detail": detail}


def check_case(item, plan, vrc, vout, res):
    rid, adapter, _path, _doc, _gen = item
    out = []
    if res is None:
        return [finding("harness-error", rid, adapter, message="no result")]
    if res.get("harness_error"):
        return [finding("harness-error", rid, adapter, message=res["harness_error"])]
    validate_ok = vrc == 0
    codes = sorted({d["code"] for d in (plan or {}).get("diagnostics", [])
                    if d.get("severity") == "error"})
    # (b) Release verdict: one finding per stage that refuses.
    reasons = []
    if res.get("import_error"):
        reasons.append(("release-refuses-no-te", "import", res["import_error"]))
    else:
        if res.get("base_error"):
            reasons.append(("release-refuses-no-perf-recipe", "recipe", res["base_error"]))
        refused = [e for e in res.get("overrides", []) if not e["accepted"]]
        if refused:
            reasons.append(("release-refuses-override", ",".join(e["key"] for e in refused),
                            refused[0]["error"]))
        if res.get("flag_error"):
            reasons.append(("release-refuses-run-script", "flags", res["flag_error"]))
        fin = res.get("finalize") or {}
        if fin and not fin.get("ok"):
            reasons.append(("release-refuses-finalisation", fin.get("stage", ""),
                            f"{fin.get('type')}: {fin.get('message')}"))
    release_ok = not reasons
    if validate_ok and not release_ok:
        for cls, key, msg in reasons:
            after = cls == "release-refuses-finalisation" and res.get("batch_error")
            out.append(finding(cls, rid, adapter, key=key, message=msg,
                               detail="after refused overrides" if after else ""))
    elif not validate_ok and release_ok and not res.get("import_error"):
        out.append(finding("release-accepts-refused-plan", rid, adapter, key=",".join(codes),
                           message="bridge-launch: " + "; ".join(
                               d["message"] for d in (plan or {}).get("diagnostics", [])
                               if d.get("severity") == "error")[:600]))
    if res.get("import_error") or res.get("derived") or not plan or not plan.get("argv"):
        return out
    if res.get("derived_from_recipe"):
        return out
    if not validate_ok:
        return out  # nothing is submitted: (a) and (c) only matter for plans that would run
    # (a) overrides
    resolved = res.get("resolved") or {}
    fin = res.get("finalize") or {}
    setup_done = fin.get("ok") or fin.get("stage") == "validate"
    for e in res.get("overrides", []):
        if not e["accepted"]:
            out.append(finding("override-refused", rid, adapter, key=e["key"], message=e["error"]))
            continue
        key, want = expected_value(e["override"], plan)
        if key == "comm_overlap" and want is None:
            continue  # `++comm_overlap=null` clears the section; the next override sets it
        landed_ok = covers(e["landed"], want) if key in (
            "comm_overlap", "mixed_precision", "comm_overlap.tp_comm_overlap_cfg") \
            else same(e["landed"], want)
        if not landed_ok:
            out.append(finding("override-landed-wrong", rid, adapter, key=key,
                               message=f"planned {short(want)}, landed {short(e['landed'])}"))
            continue
        if key == "mixed_precision" and isinstance(want, dict):
            out += check_mixed_precision(rid, adapter, plan, _doc, e, res)
            continue
        if key == "comm_overlap":
            continue  # the section's values after finalisation are check (c)
        if not same(e["before_finalize"], e["landed"]) and not equivalent(
                key, e["landed"], e["before_finalize"], res):
            out.append(finding("override-overwritten-by-flags", rid, adapter, key=key,
                               message=f"planned {short(want)}, run_script.py flags made it "
                                       f"{short(e['before_finalize'])}"))
            continue
        if key.startswith("comm_overlap."):
            continue  # survives finalisation as the resolved value: check (c)
        if fin.get("ok") and not same(e["after_finalize"], e["before_finalize"]):
            if equivalent(key, e["before_finalize"], e["after_finalize"], res):
                continue
            if overridden_as_planned(key, e["after_finalize"], plan):
                continue
            out.append(finding("override-changed-at-finalisation", rid, adapter, key=key,
                               message=f"planned {short(want)}, after runtime_config_update "
                                       f"{short(e['after_finalize'])}"))
    for f, v in (res.get("flags") or {}).items():
        if fin.get("ok") and not same(v["after_finalize"], v["given"]):
            out.append(finding("flag-changed", rid, adapter, key=f,
                               message=f"flag {v['given']!r}, {v['field']} after finalisation "
                                       f"{v['after_finalize']!r}"))
    # (c) resolved overlap values, unless an overlap override was refused (then (a) has it and
    # every value below it differs as a consequence)
    refused_overlap = any(not e["accepted"] and e["key"].split(".")[0] in
                          ("comm_overlap", "ddp", "optimizer") for e in res.get("overrides", []))
    if setup_done and plan.get("comm_overlap") and not refused_overlap:
        for f in OVERLAP_FIELDS:
            pv = (plan["comm_overlap"].get(f) or {}).get("value")
            rv = resolved.get(f)
            if not same(pv, rv):
                out.append(finding("overlap-value-mismatch", rid, adapter, key=f,
                                   message=f"plan {short(pv)} ({(plan['comm_overlap'].get(f) or {}).get('rule')}), "
                                           f"release {short(rv)}"))
    out += check_runtime_env(rid, adapter, plan, res)
    return out


def check_runtime_env(rid, adapter, plan, res):
    """(d) Every env variable of the performance recipe the release builds for the case: plan's
    runtime_env names it with the recipe's value and says which value the rank gets (the
    release applies env_vars with os.environ.setdefault, so a launch env value wins), and a
    launch env value that replaces the recipe's is named in the runtime-env-replaced warning."""
    base = res.get("base") or {}
    if base.get("kind") != "perf_recipes":
        return []
    recipe_env = res.get("env_vars") or {}
    runtime_env = plan.get("runtime_env") or {}
    listed = {v["name"]: v for v in runtime_env.get("vars", [])}
    launch = plan.get("env") or {}
    warning = " ".join(d["message"] for d in plan.get("diagnostics", [])
                       if d.get("code") == "runtime-env-replaced")
    if runtime_env.get("origin", "").split(" ")[-1] != base["function"]:
        return [finding("runtime-env-unnamed", rid, adapter, key="runtime_env",
                        message=f"the release builds {base['function']}, plan names "
                                f"{runtime_env.get('origin') or 'no recipe'}")]
    out = []
    for name, value in sorted(recipe_env.items()):
        v, mine = listed.get(name), launch.get(name)
        if v is None:
            out.append(finding("runtime-env-unnamed", rid, adapter, key=name,
                               message=f"the recipe sets {name}={value}"))
            continue
        if v["value"] != value:
            out.append(finding("runtime-env-wrong", rid, adapter, key=name,
                               message=f"release {value!r}, plan {v['value']!r}"))
        if mine is None:
            expect = "runtime"
        elif mine.get("secret"):
            expect = v["rank_gets"]  # the value is not in the plan's JSON; only names are
        else:
            expect = "same" if mine["value"] == value else "launch_env"
        if v["rank_gets"] != expect:
            out.append(finding("runtime-env-wrong", rid, adapter, key=name,
                               message=f"rank gets {expect}, plan says {v['rank_gets']}"))
        if expect == "launch_env" and f"{name}=" not in warning:
            out.append(finding("runtime-env-wrong", rid, adapter, key=name,
                               message="the launch env replaces the recipe's value without a "
                                       "runtime-env-replaced warning naming it"))
    for name in sorted(set(listed) - set(recipe_env)):
        out.append(finding("runtime-env-wrong", rid, adapter, key=name,
                           message="plan names a variable the release's recipe does not set"))
    return out


def load_known_gaps(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        doc = json.load(f)
    gaps = doc["gaps"] if isinstance(doc, dict) else doc
    for g in gaps:
        g["_re"] = {k: re.compile(v) for k, v in (g.get("match") or {}).items()}
    return gaps


def gap_for(f, gaps):
    for g in gaps:
        if g["class"] != f["class"]:
            continue
        if all(rx.search(str(f.get(k, ""))) for k, rx in g["_re"].items()):
            return g
    return None


# ---------------------------------------------------------------------------------------------


def venv_python(source, release):
    r = subprocess.run(["bash", os.path.join(source, "scripts", "conformance-env.sh"), release],
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        sys.exit(f"conformance-env.sh failed ({r.returncode}):\n{r.stderr[-3000:]}")
    return r.stdout.strip().splitlines()[-1]


def start_harness(python, jobs, te_absent, out_path):
    cmd = [python, os.path.join(HERE, "harness.py"), "--cases", "-", "--out", out_path,
           "--jobs", str(jobs)]
    if te_absent:
        cmd.append("--te-absent")
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def probe_cases():
    """Release facts behind the questions the suite answers (printed, not asserted)."""
    gpt = {"recipe_function": "gpt3_175b_pretrain_32gpu_h100_bf16_config"}
    qwen = {"recipe_function": "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"}
    none_co = {"recipe_function": "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config"}
    preset = "userbuffers_bf16_h100_h12288_tp4_mbs1_seqlen2048"
    target = "megatron.bridge.training.comm_overlap." + preset
    base = {"mode": "recipe", "world_size": 128, "gpu": "h100", "te_version": "2.9.0",
            "read": READS + ["model.tp_comm_overlap_cfg", "comm_overlap.tp_comm_overlap_cfg"]}
    tp = ["model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
          "comm_overlap.tp_comm_overlap=true"]
    probes = [
        ("ub-name-on-preset-recipe", gpt, tp + [f"comm_overlap.tp_comm_overlap_cfg={preset}"]),
        ("ub-name-on-none-cfg-recipe", qwen, tp + [f"comm_overlap.tp_comm_overlap_cfg={preset}"]),
        ("ub-target-call-false-on-preset-recipe", gpt,
         tp + [f"comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-target-call-false-on-none-cfg-recipe", qwen,
         tp + [f"comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-inline-mapping-on-preset-recipe", gpt,
         tp + ["comm_overlap.tp_comm_overlap_cfg={qkv_dgrad:{method:bulk,num_sm:8,cga_size:2,"
               "set_sm_margin:false}}"]),
        ("ub-inline-mapping-on-none-cfg-recipe", qwen,
         tp + ["comm_overlap.tp_comm_overlap_cfg={qkv_dgrad:{method:bulk,num_sm:8,cga_size:2,"
               "set_sm_margin:false}}"]),
        ("ub-null", gpt, tp + ["comm_overlap.tp_comm_overlap_cfg=null"]),
        ("ub-delete-then-add-target-on-preset-recipe", gpt,
         tp + ["~comm_overlap.tp_comm_overlap_cfg",
               f"+comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-delete-then-add-target-on-none-cfg-recipe", qwen,
         tp + ["~comm_overlap.tp_comm_overlap_cfg",
               f"+comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-null-then-target-on-preset-recipe", gpt,
         tp + ["comm_overlap.tp_comm_overlap_cfg=null",
               f"comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-null-then-target-on-none-cfg-recipe", qwen,
         tp + ["comm_overlap.tp_comm_overlap_cfg=null",
               f"comm_overlap.tp_comm_overlap_cfg={{_target_:{target},_call_:false}}"]),
        ("ub-full-inline-on-preset-recipe", gpt,
         tp + ["comm_overlap.tp_comm_overlap_cfg={qkv_dgrad:{method:bulk,num_sm:4,cga_size:2,"
               "set_sm_margin:false},proj_fprop:{method:pipeline,num_sm:24,cga_size:2,num_splits:4,"
               "set_sm_margin:true}}"]),
        ("names-precision", gpt, ["model.precision=bf16"]),
        ("names-compute-dtype", gpt, ["model.compute_dtype=bf16"]),
        ("names-max-steps", gpt, ["train.max_steps=8"]),
        ("names-train-iters", gpt, ["train.train_iters=8"]),
        ("names-mixed-precision-string", gpt, ["mixed_precision=bf16_mixed"]),
        ("names-mixed-precision-fp8", gpt, ["mixed_precision=bf16_with_fp8_current_scaling_mixed"]),
        ("names-model-bf16", gpt, ["model.bf16=true"]),
        ("names-plus-precision", gpt, ["+model.precision=bf16"]),
        ("none-co-field", none_co, ["comm_overlap.tp_comm_overlap=true"]),
        ("none-co-plus-field", none_co, ["+comm_overlap.tp_comm_overlap=true"]),
        ("none-co-plus-fields", none_co, ["+comm_overlap.tp_comm_overlap=false",
                                          "+comm_overlap.overlap_grad_reduce=true"]),
        ("none-co-target", none_co, [
            "comm_overlap={_target_:megatron.bridge.training.comm_overlap.CommOverlapConfig,"
            "tp_comm_overlap:false,overlap_grad_reduce:true}"]),
        ("none-co-plus-target", none_co, [
            "+comm_overlap={_target_:megatron.bridge.training.comm_overlap.CommOverlapConfig,"
            "tp_comm_overlap:false}"]),
        ("defaults-gpt", gpt, []),
        ("defaults-qwen-library-16gpu", qwen, []),
        ("defaults-qwen-library-8gpu", {"recipe_function": "qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config"}, []),
    ]
    cases = []
    for pid, rec, ovs in probes:
        c = dict(base, id="probe/" + pid, overrides=ovs, **rec)
        if "qwen" in str(rec):
            c["world_size"] = 16 if "16gpu" in str(rec) else 8
        cases.append(c)
    cases.append(dict(base, id="probe/defaults-qwen-perf-16gpu", mode="perf_script", world_size=16,
                      perf={"model_family_name": "qwen", "model_recipe_name": "qwen3_30b_a3b",
                            "task": "pretrain", "num_gpus": 16, "gpu": "h100",
                            "compute_dtype": "bf16"}, flags={}, overrides=[]))
    return cases


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("source")
    ap.add_argument("--release", default="0.6.2")
    ap.add_argument("--corpus", type=int, default=420)
    ap.add_argument("--seed", type=int, default=20250601)
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", help="write every finding and the release facts here")
    ap.add_argument("--keep", help="keep the generated recipes and harness I/O in this directory")
    ap.add_argument("--verbose", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    binary = os.path.abspath(args.binary)
    source = os.path.abspath(args.source)
    python = venv_python(source, args.release)
    tmp = args.keep or tempfile.mkdtemp(prefix="bridge-conformance-")
    os.makedirs(tmp, exist_ok=True)
    home = os.path.join(tmp, "home")
    os.makedirs(home, exist_ok=True)
    # The harness imports the release (~15 s) while the plans are made.
    main_out, absent_out = os.path.join(tmp, "harness.json"), os.path.join(tmp, "harness-no-te.json")
    harness = start_harness(python, args.jobs, False, main_out)
    absent = start_harness(python, 1, True, absent_out)
    # Every recipe of the release built, for the env and base tables (about 40 s of CPU).
    survey_out = os.path.join(tmp, "perf-survey.json")
    survey = subprocess.Popen([python, os.path.join(HERE, "harness.py"), "--perf-env", "--out",
                               survey_out, "--jobs", "1"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    bl = BridgeLaunch(binary, home)
    items = build_corpus(example_recipes(source), args.corpus, args.seed, tmp)

    def run_bl(item):
        _rid, _adapter, path, _doc, _gen = item
        prc, plan, perr = bl.plan(path)
        vrc, vout = bl.validate(path)
        return prc, plan, perr, vrc, vout

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        bl_results = list(ex.map(run_bl, items))
    fid_items, fid_left_out = fidelity.build(bl, source, tmp, parse_mb_argv, CONFIG_FLAGS)
    lib_items, lib_left_out = fidelity.build_library(source, tmp)
    fid_items += lib_items
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(lambda it: fidelity.plan_all(bl, [it]), fid_items))
    t_plans = time.time() - t0
    cases, absent_cases, by_id = [], [], {}
    for item, (prc, plan, perr, vrc, vout) in zip(items, bl_results):
        rid, adapter, _path, doc, _gen = item
        if plan is None:
            sys.exit(f"{rid}: plan printed no JSON (exit {prc}): {perr}")
        case = make_case(rid, adapter, doc, plan)
        by_id[rid] = case
        (absent_cases if case["te_version"] is None else cases).append(case)
    probes = probe_cases()
    cases += probes
    cases += fidelity.cases(fid_items, parse_mb_argv, CONFIG_FLAGS)
    guide_case, guide_facts = guide_command.build(bl, source, parse_mb_argv, CONFIG_FLAGS)
    if guide_case:
        cases.append(guide_case)
    stdout_main, err_main = harness.communicate(json.dumps({"cases": cases}))
    _, err_absent = absent.communicate(json.dumps({"cases": absent_cases}))
    if harness.returncode != 0:
        sys.exit(f"harness failed ({harness.returncode}):\n{err_main[-4000:]}")
    with open(main_out) as f:
        hout = json.load(f)
    with open(absent_out) as f:
        aout = json.load(f)
    results = {r["id"]: r for r in hout["results"]}
    results.update({r["id"]: r for r in aout["results"]})
    for c in cases + absent_cases:
        if c["id"] in results:
            results[c["id"]]["derived_from_recipe"] = c.get("derived_from_recipe")
            results[c["id"]]["mixed_precision_recipes"] = hout.get("mixed_precision_recipes")
    gaps = load_known_gaps(os.path.join(HERE, "known_gaps.json"))
    gap_hits = collections.Counter()
    per_class = collections.OrderedDict()
    passed = failed = known = 0
    verdicts = collections.Counter()
    failures = []
    all_findings = []
    for item, (prc, plan, perr, vrc, vout) in zip(items, bl_results):
        rid, adapter = item[0], item[1]
        res = results.get(rid)
        fs = check_case(item, plan, vrc, vout, res)
        release_ok = bool(res) and not res.get("import_error") and not res.get("base_error") \
            and not res.get("flag_error") \
            and all(e["accepted"] for e in res.get("overrides", [])) \
            and (res.get("finalize") or {}).get("ok")
        verdicts[("validate ok" if vrc == 0 else "validate refuses",
                  "release ok" if release_ok else "release refuses")] += 1
        unknown = []
        for f in fs:
            g = gap_for(f, gaps)
            f["known_gap"] = g["id"] if g else None
            if g:
                gap_hits[g["id"]] += 1
            else:
                unknown.append(f)
            pc = per_class.setdefault(f["class"], {"cases": set(), "findings": 0, "known": 0,
                                                   "example": f})
            pc["cases"].add(rid)
            pc["findings"] += 1
            pc["known"] += bool(g)
            all_findings.append(f)
        if not fs:
            passed += 1
        elif unknown:
            failed += 1
            failures.append((rid, unknown))
        else:
            known += 1
    # Fidelity to the named recipe (fidelity.py): every table row, and each knob alone.
    fid_findings, fid_counts = fidelity.check(fid_items, results)
    fid_failed = collections.defaultdict(list)
    for f in fid_findings:
        g = gap_for(f, gaps)
        f["known_gap"] = g["id"] if g else None
        if g:
            gap_hits[g["id"]] += 1
        else:
            fid_failed[f["case"]].append(f)
        all_findings.append(f)
    failed += len(fid_failed)
    passed += len(fid_items) - len(fid_failed)
    failures += list(fid_failed.items())
    # NVIDIA's whole smoke-test command as recipe keys (guide_command.py).
    guide_findings = guide_command.check(guide_facts, results)
    all_findings += guide_findings
    if guide_findings:
        failed += 1
        failures.append((guide_command.CASE_ID, guide_findings))
    else:
        passed += 1
    log(f"guide command as recipe keys: {'equal leaf for leaf' if not guide_findings else 'FAILED'}"
        f" ({' '.join(guide_facts['argv'][2:])})")
    stale = [g for g in gaps if gap_hits[g["id"]] == 0]
    failed += len(stale)
    # The performance-recipe table validate checks megatron_bridge plans against
    # (model/megatron_bridge_perf_recipes.cpp) must be exactly the release's.
    table_drift = perf_recipe_table.differences(
        perf_recipe_table.table_from_names(hout.get("perf_recipe_names") or []),
        perf_recipe_table.table_from_source(
            open(os.path.join(source, "model", "megatron_bridge_perf_recipes.cpp")).read()))
    # ... and so must the env rows of the recipes this run built
    # (model/megatron_bridge_perf_recipe_env.cpp, all recipes: perf_recipe_table.py --write-env).
    built_env = {r["base"]["function"]: r.get("env_vars") or {} for r in results.values()
                 if isinstance(r, dict) and (r.get("base") or {}).get("kind") == "perf_recipes"}
    table_drift += perf_recipe_table.env_differences(
        built_env, perf_recipe_table.env_from_source(
            open(os.path.join(source, "model", "megatron_bridge_perf_recipe_env.cpp")).read()))
    # ... and the recipe base table, every recipe's values (model/megatron_bridge_perf_recipe_base.cpp),
    # and every recipe's env, from building all of them.
    _, survey_err = survey.communicate()
    if survey.returncode != 0:
        table_drift.append(f"harness.py --perf-env failed: {survey_err[-1500:]}")
    else:
        with open(survey_out) as f:
            surveyed = json.load(f)
        table_drift += perf_recipe_table.base_differences(
            surveyed["perf_base"], perf_recipe_table.base_from_source(
                open(os.path.join(source, "model", "megatron_bridge_perf_recipe_base.cpp")).read()))
        table_drift += perf_recipe_table.base_differences(
            perf_recipe_table.library_base_as_table(surveyed["library_base"]),
            perf_recipe_table.base_from_source(open(os.path.join(
                source, "model", "megatron_bridge_library_recipe_base.cpp")).read()))
        table_drift += perf_recipe_table.env_differences(
            surveyed["perf_env"], perf_recipe_table.env_from_source(
                open(os.path.join(source, "model", "megatron_bridge_perf_recipe_env.cpp")).read()))
        built_env.update(surveyed["perf_env"])
    failed += 1 if table_drift else 0
    # Report
    n_cases = len(items)
    log(f"conformance: bridge-launch {binary} vs megatron-bridge "
        f"{(hout.get('versions') or {}).get('megatron.bridge')} / megatron-core "
        f"{(hout.get('versions') or {}).get('megatron.core')} / torch "
        f"{(hout.get('versions') or {}).get('torch')} (TE: stub), run_script.py flag layer "
        f"from {hout.get('upstream_scripts')}")
    log(f"cases: {n_cases} ({sum(1 for i in items if not i[4])} example, "
        f"{sum(1 for i in items if i[4])} generated from {args.corpus} recipes, seed "
        f"{args.seed}; {len(absent_cases)} with TE absent); harness: import "
        f"{hout.get('import_seconds')} s, {hout.get('seconds')} s in all")
    log("verdicts (validate x release): " + ", ".join(
        f"{a} & {b}: {n}" for (a, b), n in sorted(verdicts.items())))
    log("per class (cases / findings / of them known gaps):")
    for cls, pc in per_class.items():
        ex = pc["example"]
        log(f"  {cls:36s} {len(pc['cases']):4d} / {pc['findings']:5d} / {pc['known']:5d}  "
            f"{CLASS_TEXT.get(cls, '')}")
        log(f"      e.g. {ex['case']}: {ex['key']}: {short(ex['message'], 300)}")
    distinct = collections.Counter()
    for f in all_findings:
        if f["class"] == "release-refuses-finalisation":
            distinct[re.sub(r"\d+", "N", f["message"])[:240]] += 1
    if distinct:
        log("finalisation errors on plans validate accepts (message, digits as N: count):")
        for msg, n in distinct.most_common(25):
            log(f"  {n:4d}  {msg}")
    keys = collections.Counter((f["class"], f["key"]) for f in all_findings
                               if f["class"] in ("override-refused", "override-landed-wrong",
                                                 "override-overwritten-by-flags",
                                                 "overlap-value-mismatch",
                                                 "override-changed-at-finalisation"))
    if keys:
        log("by key:")
        for (cls, key), n in sorted(keys.items()):
            log(f"  {cls:36s} {key:50s} {n}")
    report_facts(hout, results)
    log(f"fidelity to the named recipe: {fid_counts['named']} table rows named with nothing else "
        f"set, {fid_counts['knob']} with one overlap knob changed; {fid_counts['equal']} built "
        f"leaf-for-leaf equal to the reference command, {len(fid_failed)} failed; the release "
        f"refuses {fid_counts['release_refuses_bare']} of its own recipes as named (validate "
        f"must refuse those too); {fid_counts['library']} library recipes named through the "
        f"hydra adapter with nothing else set, {fid_counts['library_equal']} built leaf-for-leaf "
        f"equal to the recipe function alone, the release refuses "
        f"{fid_counts['library_release_refuses']} of them as built; "
        f"{len(fid_left_out)} perf rows and {len(lib_left_out)} library rows left out:")
    for label, left in (("perf", fid_left_out), ("library", lib_left_out)):
        reasons = collections.Counter(re.sub(r"config of \S+", "config of <model>", why)
                                      for why in left.values())
        for why, n in reasons.most_common():
            log(f"  {n:4d}  {label}: {why}")
    for g in gaps:
        log(f"known gap {g['id']} ({g['class']}): {gap_hits[g['id']]} findings - {g['description']}")
    for g in stale:
        log(f"FAIL known gap {g['id']} no longer occurs: fixed: remove it from known_gaps.json")
    for d in table_drift[:20]:
        log(f"FAIL perf recipe table differs from the release: {d} (regenerate it with "
            f"tests/conformance/perf_recipe_table.py --write, or for env_vars and the recipe "
            f"base harness.py --perf-env and --write-env/--write-base: "
            f"tests/conformance/README.md)")
    if not table_drift:
        log(f"perf recipe tables: equal to the release's megatron.bridge.perf_recipes (names; "
            f"env_vars and recipe base values of the {len(built_env)} recipes built)")
    for rid, fs in failures[: (len(failures) if args.verbose else 15)]:
        log(f"FAIL {rid}")
        for f in fs[:8]:
            log(f"     [{f['class']}] {f['key']}: {short(f['message'], 400)}")
    if len(failures) > 15 and not args.verbose:
        log(f"... {len(failures) - 15} more failing cases (--verbose lists all)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"findings": all_findings, "probes": {k: v for k, v in results.items()
                                                            if k.startswith("probe/")},
                       "perf_recipe_names": hout.get("perf_recipe_names"),
                       "harness_stderr_tail": err_main[-2000:]}, f, indent=1, default=str)
    log(f"wall time: {time.time() - t0:.1f} s (plans {t_plans:.1f} s)")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"{known} known gap")
    print(f"{passed} passed, {failed} failed", flush=True)
    return 1 if failed else 0


def report_facts(hout, results):
    log("release facts (probes):")
    for rid in sorted(k for k in results if k.startswith("probe/")):
        r = results[rid]
        fin = r.get("finalize") or {}
        ovs = "; ".join(
            f"{e['override'][:110]} -> " + ("accepted, lands " + short(e["landed"], 90)
                                           if e["accepted"] else "REFUSED: " + short(e["error"], 160))
            for e in r.get("overrides", []))
        fin_s = "ok" if fin.get("ok") else f"{fin.get('type')}: {short(fin.get('message') or '', 200)}"
        batch = "refused" if r.get("batch_error") else "accepted"
        log(f"  {rid}: {ovs or '(no overrides)'}; batch {batch}; finalisation: {fin_s}")
        if rid.startswith("probe/ub-") and fin.get("ok"):
            cfg = (r.get("resolved") or {}).get("tp_comm_overlap_cfg")
            log(f"      resolved model.tp_comm_overlap={(r.get('resolved') or {}).get('tp_comm_overlap')}, "
                f"tp_comm_overlap_cfg={short(cfg, 160)}")
        if rid.startswith("probe/defaults"):
            d = r.get("defaults") or {}
            log("      defaults: " + ", ".join(
                f"{k}={short(d.get(k), 60)}" for k in
                ("ddp.use_distributed_optimizer", "model.gradient_accumulation_fusion",
                 "model.add_bias_linear", "model.add_qkv_bias", "model.sequence_parallel",
                 "model.moe_token_dispatcher_type", "model.moe_flex_dispatcher_backend")))
            log(f"      base {r.get('base')}, env_vars {short(r.get('env_vars'), 400)}")
            log(f"      comm_overlap {short(d.get('comm_overlap'), 300)}")
    names = hout.get("perf_recipe_names") or []
    combos = collections.defaultdict(set)
    for n in names:
        m = re.match(r"^(.*?)_(pretrain|sft|peft|lora)_(\d+)gpu_([a-z0-9]+)_([a-z0-9]+)(_.*)?_config$", n)
        if m:
            combos[(m.group(1), m.group(2))].add(f"{m.group(4)}/{m.group(5)}")
    log(f"megatron.bridge.perf_recipes: {len(names)} flat recipes, models: " + "; ".join(
        f"{mdl}/{task} [{','.join(sorted(v))}]" for (mdl, task), v in sorted(combos.items())))
    log("  gpt3_175b in perf_recipes: " + str(any(n.startswith("gpt3_175b") for n in names)))


if __name__ == "__main__":
    sys.exit(main())
