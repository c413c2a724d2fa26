#!/usr/bin/env python3
"""Runs plans of bridge-launch through the released Megatron-Bridge's own config code.

Runs INSIDE the conformance venv (scripts/conformance-env.sh): Megatron-Bridge, Megatron-Core and
torch as released on PyPI, Transformer Engine replaced by tests/conformance/stubs/ (see its
docstring). The release is imported once; the cases then run in forked workers that share it.

For every case (JSON, see CASE below) the harness

1. builds the release's own config: a flat perf recipe of ``megatron.bridge.perf_recipes``
   chosen the way Megatron-Bridge's ``scripts/performance/run_script.py`` chooses it
   (``mode: perf_script``, the megatron_bridge adapter), or a recipe of
   ``megatron.bridge.recipes`` (``mode: recipe``, the hydra adapter);
2. applies the Hydra overrides with the release's machinery
   (``megatron.bridge.training.utils.omegaconf_utils``: ``create_omegaconf_dict_config``,
   ``parse_hydra_overrides``, ``apply_overrides``), all at once as the runtime does, and each one
   alone on a copy when the batch is refused, to name every refused override with its message;
3. for ``perf_script``, applies the run_script.py flags (-tp, -pp, -vp, ...) to the config as
   run_script.py's ``set_user_overrides`` does, after the Hydra overrides (FLAG_LAYER);
4. finalises with the release's ``megatron.bridge.training.config.runtime_config_update``
   (environment, mixed precision, data-parallel size, ``CommOverlapConfig.setup``,
   ``ConfigContainer.validate``: Megatron-Core's TransformerConfig/DDP/optimizer checks), with
   WORLD_SIZE, the GPU's capability/properties and the TE stub version set for the case;
5. reports what landed where, the exception at finalisation, and the resolved overlap values.

Steps 1-5 are bridge-launch's own runtime check (``python/bridge_config_check.py``, the
program `--runtime-check` runs in the user's Python), imported from there: the suite proves
the check's config path on the pinned release. This file adds what only the suite needs: the
offline Hub cache, the TE stub, the forked workers and the --perf-env survey.

Patched, as Megatron-Bridge's own unit tests patch them, and only for the duration of a case:
``torch.cuda.get_device_capability``, ``torch.cuda.get_device_properties`` (no GPU here), the
environment (WORLD_SIZE, RANK as run_script.py --dryrun sets them; BRIDGE_TE_STUB_VERSION). The
environment is restored after every case (``runtime_config_update`` installs a recipe's
env_vars with os.environ.setdefault). Megatron-Core caches the TE version on first use
(``megatron.core.utils._te_version``); the harness clears that cache before a case so the
release's own ``get_te_version`` reads the case's stub version; it replaces no function.

Usage (venv python): harness.py [--cases FILE|-] [--out FILE|-] [--jobs N] [--te-absent]
  --te-absent: run without the stub on sys.path (Transformer Engine not installed); every case
               then reports the release's import failure, if it has one.

CASE: {"id": str, "mode": "perf_script"|"recipe",
       "perf": {"model_family_name", "model_recipe_name", "task", "num_gpus", "gpu",
                "compute_dtype"},            # perf_script: run_script.py -m -mr --task -ng -g -c
       "recipe_function": str|null,          # recipe: a megatron.bridge.recipes name (or
       "recipe_lookup": {...}|null,          #   model_recipe_name/task/num_gpus/gpu/compute_dtype)
       "flags": {"tensor_model_parallel_size": 4, ..., "virtual_pipeline_model_parallel_size":
                 null|int (absent = -1 sentinel)},   # perf_script only, parsed run_script flags
       "overrides": ["section.key=value", ...], "world_size": int, "gpu": "h100",
       "capability": [9, 0], "te_version": "2.9.0"|null, "read": ["model.x", ...]}
"""

import argparse
import atexit
import contextlib
import importlib
import io
import json
import multiprocessing
import os
import re
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")
# The config path itself is bridge-launch's runtime check (python/bridge_config_check.py):
# the suite runs the very code `--runtime-check` runs, on the pinned release.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))
import bridge_config_check as core  # noqa: E402
from bridge_config_check import (  # noqa: E402
    UPSTREAM_SCRIPTS, _run_case, case_context, env_text, error_text, find_perf_recipe, jsonable,
    run_case)


def write_offline_hub(home):
    """Lays out a Hugging Face cache under `home` holding only the config.json files of
    hf_configs/, at the revisions the release's recipes pin (hf_configs/index.json)."""
    with open(os.path.join(HERE, "hf_configs", "index.json")) as f:
        index = json.load(f)
    for repo_id, entry in index.items():
        repo_dir = os.path.join(home, "hub", "models--" + repo_id.replace("/", "--"))
        snap = os.path.join(repo_dir, "snapshots", entry["revision"])
        os.makedirs(snap)
        os.makedirs(os.path.join(repo_dir, "refs"))
        with open(os.path.join(repo_dir, "refs", "main"), "w") as f:
            f.write(entry["revision"])
        for name in os.listdir(os.path.join(HERE, "hf_configs", entry["dir"])):
            shutil.copy(os.path.join(HERE, "hf_configs", entry["dir"], name), snap)


def offline_hf_cache():
    """An offline Hugging Face cache holding only the config.json files of hf_configs/.

    Some release recipes build their model from a Hub config (``AutoBridge.from_hf_pretrained``
    of a pinned revision, e.g. Qwen/Qwen3-30B-A3B). The suite runs offline, so the harness lays
    out a private HF_HOME with those files (write_offline_hub) and sets HF_HUB_OFFLINE: any
    other Hub access fails at once instead of retrying.
    """
    import tempfile

    home = tempfile.mkdtemp(prefix="bridge-conformance-hf-")
    atexit.register(shutil.rmtree, home, True)  # forked workers exit with os._exit: no removal
    write_offline_hub(home)
    os.environ["HF_HOME"] = home
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return home


def import_release(te_absent):
    """Import the release once (offline Hub cache, the TE stub unless te_absent).
    Returns (Release, seconds, error or None)."""
    offline_hf_cache()
    if not te_absent and STUBS not in sys.path:
        sys.path.insert(0, STUBS)
    seconds, error = core.load_release()
    if error:
        return None, seconds, error
    if te_absent:
        core.R.versions["transformer_engine"] = None
    else:
        core.R.versions["transformer_engine"] = "stub"
    return core.R, seconds, None


PERF_NAME = re.compile(r"^(?P<mr>.+)_(?P<task>pretrain|sft|peft)_(?P<n>\d+)gpu_(?P<gpu>[a-z0-9]+)_"
                       r"(?:bf16|fp8cs|fp8mx|fp8sc|nvfp4)_config$")


class _HubConfigStandIn:
    """What ``AutoBridge.from_hf_pretrained`` returns in --perf-env where a recipe needs a
    Hugging Face Hub config that this offline machine does not have (hf_configs/index.json
    lists those it has): its provider is the library's own GPTModelProvider with its
    defaults, on which the recipe then sets its fields. Only the recipe's ``env_vars`` are
    read from such a build. (Asking the release for a missing config is no quicker way to
    fail: its loader retries with exponential back-off.)"""

    def __init__(self, *args, **kwargs):
        self.args = args

    def to_megatron_provider(self, *args, **kwargs):
        from megatron.bridge.models import GPTModelProvider

        # A Hub config always has a vocabulary size, and some recipes refuse a provider
        # without one (Qwen-VL's synthetic tokenizer is sized from it).
        return GPTModelProvider(vocab_size=32000)


def _offline_hub_ids():
    with open(os.path.join(HERE, "hf_configs", "index.json")) as f:
        return set(json.load(f))


def _hub_lookup(stand_in_for_all, used):
    """A from_hf_pretrained that calls the release's own for a config hf_configs/ holds (unless
    stand_in_for_all) and the stand-in otherwise; `used` records whether a stand-in was made."""
    from megatron.bridge import AutoBridge

    released = AutoBridge.from_hf_pretrained
    have = _offline_hub_ids()

    def lookup(path, *args, **kwargs):
        if not stand_in_for_all and str(path) in have:
            used.append("hub-config")
            return released(path, *args, **kwargs)
        used.append("hub-stand-in:" + str(path))
        return _HubConfigStandIn(path)

    return lookup


def perf_env_of(name, stand_in_for_all=False, base=None):
    """(name, env_vars, how) of one flat performance recipe: how is "release" when the recipe
    built as released without the Hub, "hub-config" when it built as released with a Hub
    config of hf_configs/, "hub-stand-in" when it needed a Hub config this machine lacks (see
    _HubConfigStandIn); (name, None, error) when it did not build. With `base` (a dict), the
    recipe's own values of bridge-launch's recipe keys go there (recipe_base_values), unless a
    stand-in was used: then base["needs_hub_config"] names the model id."""
    from unittest import mock

    from megatron.bridge import AutoBridge

    m = PERF_NAME.match(name)
    case = {"world_size": int(m["n"]), "gpu": m["gpu"]}
    used = []
    try:
        with case_context(case), mock.patch.object(
                AutoBridge, "from_hf_pretrained", _hub_lookup(stand_in_for_all, used)):
            cfg = find_perf_recipe(name)()
            env = env_text(cfg.env_vars)
            if base is not None:
                read_base(cfg, used, base)
    except Exception as e:  # noqa: BLE001
        return name, None, error_text(e)
    stand_in = any(u.startswith("hub-stand-in") for u in used)
    how = "hub-stand-in" if stand_in else "hub-config" if used else "release"
    return name, env, how


# bridge-launch's recipe keys that a recipe of the release decides when the user leaves them
# unset (model/recipe_base.h), with where the release's ConfigContainer holds each. The recipe
# base table (model/megatron_bridge_perf_recipe_base.cpp) is these values of every recipe.
BASE_KEYS = [(f"model.{k}", f"model.{k}") for k in (
    "tensor_model_parallel_size", "pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
    "expert_tensor_parallel_size", "sequence_parallel", "seq_length", "num_layers", "hidden_size",
    "num_attention_heads", "num_moe_experts", "moe_token_dispatcher_type",
    "moe_flex_dispatcher_backend", "moe_shared_expert_overlap",
    "moe_shared_expert_intermediate_size", "moe_permute_fusion", "mtp_num_layers",
    "recompute_granularity", "recompute_method", "recompute_num_layers", "recompute_modules",
    "gradient_accumulation_fusion", "add_bias_linear", "add_qkv_bias", "cuda_graph_impl",
    "cuda_graph_scope")] + [
    ("train.global_batch_size", "train.global_batch_size"),
    ("train.micro_batch_size", "train.micro_batch_size"),
    ("train.max_steps", "train.train_iters"),
] + [(f"ddp.{k}", f"ddp.{k}") for k in (
    "use_distributed_optimizer", "overlap_grad_reduce", "overlap_param_gather",
    "align_param_gather", "bucket_size")] + [
    ("optimizer.overlap_param_gather_with_optimizer_step",
     "optimizer.overlap_param_gather_with_optimizer_step"),
] + [(f"mixed_precision.{k}", f"mixed_precision.{k}") for k in (
    "grad_reduce_in_fp32", "fp8_param_gather")]


def _base_text(v):
    """A config value as a recipe writes it: null, true/false, numbers, names, [a,b]."""
    v = jsonable(v)
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ",".join(_base_text(x) for x in v) + "]"
    if isinstance(v, (int, float, str)):
        return str(v)
    return None  # a mapping: not a recipe key's value


def _preset_name(cfg_value):
    """The name under which megatron.bridge.training.comm_overlap exports this userbuffers
    preset object, or None."""
    mod = core.R.comm_overlap
    for n in sorted(dir(mod)):
        if n.startswith("userbuffers_") and getattr(mod, n) == cfg_value:
            return n
    return None


def _has_dense_layers(moe_layer_freq):
    """Whether an MoE model's moe_layer_freq leaves some layers dense: Megatron-Core refuses an
    `mlp` CUDA graph when every layer is MoE (freq 1, or a pattern without a 0)."""
    freq = jsonable(moe_layer_freq)
    if isinstance(freq, list):
        return 0 in freq
    return isinstance(freq, int) and not isinstance(freq, bool) and freq != 1


def recipe_base_values(cfg):
    """{recipe key: text} of one built recipe, before the runtime finalises it."""
    out = {}
    mp = cfg.mixed_precision
    if isinstance(mp, str):
        mp = importlib.import_module(
            "megatron.bridge.training.mixed_precision").get_mixed_precision_config(mp)
    out["model.precision"] = ("bf16" if getattr(mp, "bf16", False)
                              else "fp16" if getattr(mp, "fp16", False) else "fp32")
    for key, path in BASE_KEYS:
        holder_name, field = path.split(".", 1)
        holder = mp if holder_name == "mixed_precision" else getattr(cfg, holder_name, None)
        v = getattr(holder, field, _MISSING_FIELD) if holder is not None else _MISSING_FIELD
        if v is _MISSING_FIELD:
            continue
        text = _base_text(v)
        if text is not None:
            out[key] = text
    m = cfg.model
    modules = getattr(m, "cuda_graph_modules", None)
    if modules is not None:  # Megatron-Bridge reads cuda_graph_modules and _scope as one list
        def listed(v):
            v = jsonable(v)
            return [] if v is None else [str(v)] if isinstance(v, str) else [str(x) for x in v]
        names = listed(modules) + listed(getattr(m, "cuda_graph_scope", None))
        out["model.cuda_graph_scope"] = _base_text(list(dict.fromkeys(names)))
    uneven = [f for f, on in (
        ("pipeline_model_parallel_layout", getattr(m, "pipeline_model_parallel_layout", None)),
        ("account_for_embedding_in_pipeline_split",
         getattr(m, "account_for_embedding_in_pipeline_split", False)),
        ("account_for_loss_in_pipeline_split",
         getattr(m, "account_for_loss_in_pipeline_split", False)),
        ("num_layers_in_first_pipeline_stage",
         getattr(m, "num_layers_in_first_pipeline_stage", None)),
        ("num_layers_in_last_pipeline_stage",
         getattr(m, "num_layers_in_last_pipeline_stage", None))) if on]
    if uneven:
        out["pipeline_split"] = ",".join(uneven)
    if getattr(cfg.optimizer, "use_precision_aware_optimizer", False):
        out["precision_aware_optimizer"] = "true"
    if _has_dense_layers(getattr(m, "moe_layer_freq", 1)):
        out["moe_dense_layers"] = "true"
    co = cfg.comm_overlap
    if co is None:
        out["comm_overlap"] = "null"
        return out
    for field, _ in core.OVERLAP_FIELDS:
        v = getattr(co, field, _MISSING_FIELD)
        if v is _MISSING_FIELD:
            continue
        if field == "tp_comm_overlap_cfg" and v is not None:
            name = _preset_name(v)
            out[f"comm_overlap.{field}"] = name if name else "<unnamed mapping>"
            continue
        text = _base_text(v)
        if text is not None:
            out[f"comm_overlap.{field}"] = text
    return out


_MISSING_FIELD = object()


def perf_env_cross_check(names):
    """The stand-in must not change env_vars: every recipe built as released with a Hub config
    of hf_configs/ is built again with the stand-in instead; returns the names whose env_vars
    then differ."""
    return [n for n in names
            if perf_env_of(n)[1] != perf_env_of(n, stand_in_for_all=True)[1]]


def read_base(cfg, used, base):
    """A built recipe's base values into `base`, or the Hub model id it needed a stand-in for
    (`used` as _hub_lookup records it): those values would be the stand-in's, not the model's."""
    stand_ins = [u for u in used if u.startswith("hub-stand-in:")]
    if stand_ins:
        base["needs_hub_config"] = stand_ins[-1].split(":", 1)[1]
    else:
        base.update(recipe_base_values(cfg))


def library_base_of(name):
    """(name, base values) of one library recipe of megatron.bridge.recipes (the hydra adapter's
    recipe base): {"needs_hub_config": id} where it reads a Hub config hf_configs/ lacks,
    {"does_not_build": error} where it fails otherwise."""
    from unittest import mock

    from megatron.bridge import AutoBridge

    m = re.search(r"_(\d+)gpu_([a-z0-9]+)_", name)
    case = {"world_size": int(m.group(1)) if m else 8, "gpu": m.group(2) if m else "h100"}
    used, base = [], {}
    try:
        with case_context(case), mock.patch.object(
                AutoBridge, "from_hf_pretrained", _hub_lookup(False, used)):
            read_base(getattr(core.R.recipes, name)(), used, base)
    except Exception as e:  # noqa: BLE001
        return name, {"does_not_build": error_text(e)[:200]}
    return name, base


def library_names(rel):
    return sorted(n for n in dir(rel.recipes)
                  if n.endswith("_config") and callable(getattr(rel.recipes, n)))


def perf_survey_of(name):
    """perf_env_of with the recipe's base values: (name, env_vars, how, base)."""
    base = {}
    name, env, how = perf_env_of(name, base=base)
    return name, env, how, base


def perf_env_main(rel, jobs):
    """--perf-env: the env_vars and base values of every default-variant flat performance
    recipe."""
    names = [n for n in rel.perf_names if PERF_NAME.match(n)]
    if jobs > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(jobs, initializer=_worker_init) as pool:
            surveyed = list(pool.imap(perf_survey_of, names, chunksize=4))
    else:
        surveyed = [perf_survey_of(n) for n in names]
    if jobs > 1:
        with ctx.Pool(jobs, initializer=_worker_init) as pool:
            library = dict(pool.imap(library_base_of, library_names(rel), chunksize=8))
    else:
        library = dict(library_base_of(n) for n in library_names(rel))
    built = [(n, e, how) for n, e, how, _ in surveyed]
    bases = {n: b for n, e, _, b in surveyed if e is not None}
    env = {n: e for n, e, _ in built if e is not None}
    # The recipes built with a real Hub config are the ones that show the stand-in's effect.
    mismatch = perf_env_cross_check(sorted(n for n, _, how in built if how == "hub-config"))
    return {"perf_env": env,
            "perf_base": bases,
            "library_base": library,
            "perf_env_how": {n: how for n, _, how in built},
            "perf_env_failed": {n: how for n, e, how in built if e is None},
            "perf_env_stand_in_mismatch": mismatch}


def config_leaves(cfg):
    """Every leaf of a ConfigContainer as {dotted path: JSON value} (lists of scalars are one
    leaf)."""
    out = {}

    def walk(v, path):
        if isinstance(v, dict) and v:
            for k, x in v.items():
                walk(x, f"{path}.{k}" if path else str(k))
        elif isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]")
        else:
            out[path] = v

    walk(jsonable(cfg), "")
    return out


def _built(case, cfg_out=None):
    """(summary, leaves or None) of one case's config path; the finalised config itself goes
    to cfg_out[0] when given."""
    res = {"id": case["id"], "overrides": [], "flags": {}, "values": {}}
    cfg = None
    try:
        with case_context(case):
            cfg = _run_case(case, res)
    except Exception as e:  # noqa: BLE001
        res["harness_error"] = error_text(e)
    if cfg_out is not None:
        cfg_out.append(cfg)
    summary = {k: res.get(k) for k in ("base", "base_error", "batch_error", "flag_error",
                                        "finalize", "harness_error")}
    summary["refused_overrides"] = {o["override"]: o["error"] for o in res["overrides"]
                                    if not o["accepted"]}
    return summary, (config_leaves(cfg) if cfg is not None else None)


def run_pair(case):
    """A fidelity case (tests/conformance/fidelity.py): the config the plan's argv builds and
    the one the reference command line builds, compared leaf by leaf."""
    t0 = time.time()
    plan_cfg = []
    plan_summary, plan_leaves = _built(case, plan_cfg)
    # The plan confirmation at start compares the recipe base's values with the config the
    # runtime finalised: each must hold there, or a clean job would stop at start.
    base_differs = []
    if case.get("planned_base") and plan_cfg and plan_cfg[0] is not None:
        base_differs = core.config_differences(
            plan_cfg[0], core.base_values(case["planned_base"]))[0]
    ref_summary, ref_leaves = _built(case["reference"])
    differs = []
    if plan_leaves is not None and ref_leaves is not None:
        for path in sorted(set(plan_leaves) | set(ref_leaves)):
            a, b = plan_leaves.get(path, "<missing>"), ref_leaves.get(path, "<missing>")
            if a != b:
                differs.append([path, a, b])
    return {"id": case["id"], "pair": True, "plan": plan_summary, "reference": ref_summary,
            "differs": differs[:40], "n_differs": len(differs), "base_differs": base_differs,
            "seconds": round(time.time() - t0, 3)}


def run_any(case):
    return run_pair(case) if case.get("reference") else run_case(case)


def _worker_init():
    sys.stdout = io.StringIO()  # the release prints; the result goes back through the pipe


def write_output(path, text):
    """The result, to stdout for "-" (the real one: workers' prints went to a buffer)."""
    if path == "-":
        sys.__stdout__.write(text + "\n")
    else:
        with open(path, "w") as f:
            f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="-")
    ap.add_argument("--out", default="-")
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--te-absent", action="store_true")
    ap.add_argument("--perf-env", action="store_true",
                    help="print the env_vars of every flat performance recipe (no cases)")
    args = ap.parse_args()
    t0 = time.time()
    if args.perf_env:
        rel, _, import_error = import_release(False)
        if import_error:
            sys.exit(f"harness: the release does not import: {import_error}")
        out = perf_env_main(rel, args.jobs)
        out["seconds"] = round(time.time() - t0, 2)
        write_output(args.out, json.dumps(out, sort_keys=True))
        return
    # Import first: the caller may still be writing the cases while the release imports.
    rel, import_s, import_error = import_release(args.te_absent)
    data = json.load(sys.stdin if args.cases == "-" else open(args.cases))
    cases = data["cases"] if isinstance(data, dict) else data
    out = {"import_seconds": round(import_s, 2), "import_error": import_error,
           "te_stub": not args.te_absent, "upstream_scripts": UPSTREAM_SCRIPTS,
           "versions": rel.versions if rel else None, "results": []}
    if import_error:
        out["results"] = [{"id": c["id"], "import_error": import_error} for c in cases]
    else:
        out["perf_recipe_names"] = rel.perf_names
        # What each mixed-precision recipe name means in this release, so that the runner can
        # check `mixed_precision=<name>` (the hydra adapter's precision) field by field.
        mp = importlib.import_module("megatron.bridge.training.mixed_precision")
        out["mixed_precision_recipes"] = {}
        for name in ("bf16_mixed", "fp16_mixed", "bf16_with_fp8_current_scaling_mixed",
                     "fp16_with_fp8_current_scaling_mixed", "bf16_with_mxfp8_mixed",
                     "fp16_with_mxfp8_mixed", "bf16_with_fp8_subchannel_scaling_mixed",
                     "fp16_with_fp8_subchannel_scaling_mixed", "bf16_with_nvfp4_mixed"):
            with contextlib.suppress(Exception):
                out["mixed_precision_recipes"][name] = jsonable(mp.get_mixed_precision_config(name))
        if args.jobs > 1 and len(cases) > 8:
            ctx = multiprocessing.get_context("fork")
            with ctx.Pool(args.jobs, initializer=_worker_init) as pool:
                out["results"] = list(pool.imap(run_any, cases, chunksize=4))
        else:
            out["results"] = [run_any(c) for c in cases]
    out["seconds"] = round(time.time() - t0, 2)
    write_output(args.out, json.dumps(out, sort_keys=False))


if __name__ == "__main__":
    main()
