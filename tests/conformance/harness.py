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
   run_script.py's ``set_user_overrides`` does, after the Hydra overrides (FLAG_LAYER below);
4. finalises with the release's ``megatron.bridge.training.config.runtime_config_update``
   (environment, mixed precision, data-parallel size, ``CommOverlapConfig.setup``,
   ``ConfigContainer.validate``: Megatron-Core's TransformerConfig/DDP/optimizer checks), with
   WORLD_SIZE, the GPU's capability/properties and the TE stub version set for the case;
5. reports what landed where, the exception at finalisation, and the resolved overlap values.

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
import contextlib
import copy
import dataclasses
import enum
import importlib
import io
import json
import logging
import multiprocessing
import os
import pkgutil
import re
import sys
import time
import traceback
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")

# Upstream facts mirrored by FLAG_LAYER and the perf-recipe lookup: NVIDIA-NeMo/Megatron-Bridge
# branch r0.6.0 at 6124fbe38a68eea9c4f4be3aa5e084bd5d461d98 (2026-08-21, package_info 0.6.1, the
# newest release branch upstream has; the 0.6.2 wheel's src/ differs from it in 62 files, none
# of them under scripts/performance, which the wheel does not ship).
UPSTREAM_SCRIPTS = "NVIDIA-NeMo/Megatron-Bridge@6124fbe38a68 scripts/performance"

# The 14 overlap fields, where CommOverlapConfig.setup() puts each resolved value.
OVERLAP_FIELDS = [
    ("tp_comm_overlap", "model"), ("tp_comm_overlap_cfg", "model"),
    ("tp_comm_bootstrap_backend", "model"), ("overlap_p2p_comm", "model"),
    ("batch_p2p_comm", "model"), ("defer_embedding_wgrad_compute", "model"),
    ("wgrad_deferral_limit", "model"), ("overlap_moe_expert_parallel_comm", "model"),
    ("delay_wgrad_compute", "model"), ("overlap_grad_reduce", "ddp"),
    ("overlap_param_gather", "ddp"), ("overlap_param_gather_with_optimizer_step", "optimizer"),
    ("align_param_gather", "ddp"), ("bucket_size", "ddp"),
]

# GPU -> (capability, device name) as torch.cuda would report them on that GPU.
GPUS = {
    "a100": ((8, 0), "NVIDIA A100-SXM4-80GB"),
    "h100": ((9, 0), "NVIDIA H100 80GB HBM3"),
    "h200": ((9, 0), "NVIDIA H200"),
    "b200": ((10, 0), "NVIDIA B200"),
    "b300": ((10, 3), "NVIDIA B300 SXM6 AC"),
    "gb200": ((10, 0), "NVIDIA GB200"),
    "gb300": ((10, 3), "NVIDIA GB300"),
    # Rubin: not public at the time of writing; capability assumed.
    "vr200": ((11, 0), "NVIDIA VR200"),
    "r100": ((11, 0), "NVIDIA R100"),
}

# run_script.py's precision names (utils/utils.py _PRECISION_NAME_MAP) for recipe names.
PRECISION_NAMES = {"bf16": "bf16", "fp8_cs": "fp8cs", "fp8_mx": "fp8mx", "fp8_sc": "fp8sc",
                   "nvfp4": "nvfp4"}
# run_script.py picks these GPU counts when -ng names no exact flat recipe
# (utils/utils.py _DEFAULT_GPU_COUNT_OVERRIDES, the entries for the models the suite runs);
# otherwise the largest count.
DEFAULT_GPU_COUNT = {
    ("qwen3_30b_a3b", "pretrain", "h100", "bf16"): 16,
    ("qwen3_30b_a3b", "pretrain", "h100", "fp8cs"): 16,
    ("qwen3_30b_a3b", "pretrain", "b200", "bf16"): 8,
    ("qwen3_30b_a3b", "pretrain", "b200", "fp8cs"): 8,
    ("qwen3_30b_a3b", "pretrain", "gb200", "bf16"): 8,
    ("qwen3_30b_a3b", "pretrain", "gb200", "fp8cs"): 8,
    ("qwen3_30b_a3b", "pretrain", "gb300", "bf16"): 8,
    ("qwen3_30b_a3b", "pretrain", "gb300", "fp8cs"): 8,
    ("llama3_8b", "pretrain", "h100", "bf16"): 8,
    ("llama3_8b", "pretrain", "h100", "fp8cs"): 8,
    ("llama3_8b", "pretrain", "b200", "bf16"): 8,
    ("llama3_8b", "pretrain", "b200", "fp8cs"): 8,
}

R = None  # the release's modules, filled by import_release()


class Release:
    pass


def offline_hf_cache():
    """An offline Hugging Face cache holding only the config.json files of hf_configs/.

    Some release recipes build their model from a Hub config (``AutoBridge.from_hf_pretrained``
    of a pinned revision, e.g. Qwen/Qwen3-30B-A3B). The suite runs offline, so the harness lays
    out a private HF_HOME with those files at the revisions the recipes pin (hf_configs/
    index.json) and sets HF_HUB_OFFLINE: any other Hub access fails at once instead of retrying.
    """
    import tempfile

    index_path = os.path.join(HERE, "hf_configs", "index.json")
    with open(index_path) as f:
        index = json.load(f)
    home = tempfile.mkdtemp(prefix="bridge-conformance-hf-")
    for repo_id, entry in index.items():
        repo_dir = os.path.join(home, "hub", "models--" + repo_id.replace("/", "--"))
        snap = os.path.join(repo_dir, "snapshots", entry["revision"])
        os.makedirs(snap)
        os.makedirs(os.path.join(repo_dir, "refs"))
        with open(os.path.join(repo_dir, "refs", "main"), "w") as f:
            f.write(entry["revision"])
        for name in os.listdir(os.path.join(HERE, "hf_configs", entry["dir"])):
            with open(os.path.join(HERE, "hf_configs", entry["dir"], name)) as src, \
                    open(os.path.join(snap, name), "w") as dst:
                dst.write(src.read())
    os.environ["HF_HOME"] = home
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    return home


def import_release(te_absent):
    """Import the release once. Returns (Release, seconds, error or None)."""
    global R
    offline_hf_cache()
    if not te_absent and STUBS not in sys.path:
        sys.path.insert(0, STUBS)
    start = time.time()
    rel = Release()
    try:
        with quiet():
            import torch
            from omegaconf import DictConfig, OmegaConf, open_dict

            import megatron.bridge
            import megatron.core
            import megatron.core.utils as mcore_utils
            from megatron.bridge.training import comm_overlap, config
            from megatron.bridge.training.utils import omegaconf_utils
            from megatron.bridge.utils import cuda_graph

            rel.torch, rel.OmegaConf = torch, OmegaConf
            rel.DictConfig, rel.open_dict = DictConfig, open_dict
            rel.mcore_utils, rel.comm_overlap, rel.config = mcore_utils, comm_overlap, config
            rel.omegaconf_utils, rel.cuda_graph = omegaconf_utils, cuda_graph
            rel.recipes = importlib.import_module("megatron.bridge.recipes")
            rel.perf_recipes = importlib.import_module("megatron.bridge.perf_recipes")
            rel.perf_modules = [
                importlib.import_module(f"{rel.perf_recipes.__name__}.{m.name}")
                for m in pkgutil.iter_modules(rel.perf_recipes.__path__)
                if m.ispkg and not m.name.startswith("_")
            ]
            rel.perf_names = sorted({
                n for mod in rel.perf_modules for n in dir(mod)
                if n.endswith("_config") and callable(getattr(mod, n))
            })
            rel.versions = {
                "megatron.bridge": getattr(megatron.bridge, "__version__", "?"),
                "megatron.core": getattr(megatron.core, "__version__", "?"),
                "torch": torch.__version__,
                "transformer_engine": None if te_absent else "stub",
            }
    except BaseException as e:  # noqa: BLE001  (an import failure is a result)
        return None, time.time() - start, f"{type(e).__name__}: {e}"
    R = rel
    return rel, time.time() - start, None


@contextlib.contextmanager
def quiet():
    """Silence the release's stdout/stderr chatter (logging, warnings, prints)."""
    out, err = io.StringIO(), io.StringIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            yield


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []

    def emit(self, record):
        try:
            msg = record.getMessage()
        except Exception:  # noqa: BLE001
            msg = str(record.msg)
        if len(self.messages) < 40:
            self.messages.append(" ".join(msg.split())[:400])


@contextlib.contextmanager
def case_context(case):
    """Environment, GPU and TE version of one case; everything restored afterwards."""
    from unittest import mock

    saved_env = dict(os.environ)
    gpu = case.get("gpu") or "h100"
    cap, name = GPUS.get(gpu, ((9, 0), gpu))
    if case.get("capability"):
        cap = tuple(case["capability"])
    props = _DeviceProperties(name=name, major=cap[0], minor=cap[1])
    os.environ["WORLD_SIZE"] = str(case["world_size"])
    os.environ["RANK"] = "0"
    os.environ.pop("SLURM_NTASKS", None)
    os.environ.pop("SLURM_PROCID", None)
    if case.get("te_version"):
        os.environ["BRIDGE_TE_STUB_VERSION"] = str(case["te_version"])
    else:
        os.environ.pop("BRIDGE_TE_STUB_VERSION", None)
    R.mcore_utils._te_version = None  # the cache only; get_te_version re-reads the stub
    capture = _Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    old_level = root.level
    root.setLevel(logging.WARNING)
    try:
        with mock.patch("torch.cuda.get_device_capability", return_value=cap), \
                mock.patch("torch.cuda.get_device_properties", return_value=props), \
                warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("always")
            yield capture, caught
    finally:
        root.removeHandler(capture)
        root.setLevel(old_level)
        os.environ.clear()
        os.environ.update(saved_env)
        R.mcore_utils._te_version = None


@dataclasses.dataclass
class _DeviceProperties:
    """What torch.cuda.get_device_properties returns, for the fields the release reads."""
    name: str
    major: int
    minor: int
    total_memory: int = 80 * 1024 ** 3
    multi_processor_count: int = 132


# ---------------------------------------------------------------------------------------------
# Values


def jsonable(v, depth=0):
    """A JSON form of a config value, comparable with the plan's."""
    if depth > 8:
        return repr(v)
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, enum.Enum):
        return v.name if isinstance(v.name, str) else jsonable(v.value)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: jsonable(getattr(v, f.name), depth + 1) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {str(k): jsonable(x, depth + 1) for k, x in v.items()}
    if isinstance(v, (list, tuple, set)):
        return [jsonable(x, depth + 1) for x in v]
    if R is not None and isinstance(v, R.torch.dtype):
        return str(v)
    return f"<{type(v).__name__}>"


_MISSING = "<missing>"


def read_path(cfg, path):
    obj = cfg
    for part in path.split("."):
        if obj is None:
            return _MISSING
        if isinstance(obj, dict):
            if part not in obj:
                return _MISSING
            obj = obj[part]
        elif hasattr(obj, part):
            obj = getattr(obj, part)
        else:
            return _MISSING
    return obj


def override_key(ov):
    body = ov.split("=", 1)[0]
    return body.lstrip("+~")


def error_text(e):
    msg = " ".join(str(e).split())
    return f"{type(e).__name__}: {msg}"[:1500]


# ---------------------------------------------------------------------------------------------
# The release's config


def find_perf_recipe(name):
    for mod in R.perf_modules:
        fn = getattr(mod, name, None)
        if callable(fn):
            return fn
    return None


class RecipeNotFound(Exception):
    pass


def perf_recipe(perf):
    """Choose the flat perf recipe as run_script.py does. Returns (name, fn, exact)."""
    mr, task, gpu = perf["model_recipe_name"], perf.get("task") or "pretrain", perf["gpu"]
    prec = PRECISION_NAMES.get(perf.get("compute_dtype") or "bf16", perf.get("compute_dtype"))
    exact = f"{mr}_{task}_{perf['num_gpus']}gpu_{gpu}_{prec}_config"
    fn = find_perf_recipe(exact)
    if fn is not None:
        return exact, fn, True
    # get_perf_optimized_recipe: any GPU count for the same model/task/gpu/precision.
    pattern = re.compile(rf"^{re.escape(mr)}_{re.escape(task)}_(\d+)gpu_{re.escape(gpu)}_"
                         rf"{re.escape(prec)}_config$")
    matches = []
    for n in R.perf_names:
        m = pattern.match(n)
        if m:
            matches.append((int(m.group(1)), n))
    matches.sort()
    if not matches:
        raise RecipeNotFound(
            f"ValueError: No flat perf recipe found for {mr}/{task}/{gpu}/"
            f"{perf.get('compute_dtype') or 'bf16'}/default (run_script.py: neither "
            f"{exact!r} nor another GPU count of it is in megatron.bridge.perf_recipes)")
    want = DEFAULT_GPU_COUNT.get((mr, task, gpu, prec))
    if want is not None:
        chosen = [n for c, n in matches if c == want]
        if not chosen:
            raise RecipeNotFound(f"ValueError: Default GPU count {want} for {mr}/{task}/{gpu}/{prec} "
                                 "did not match available flat perf recipes")
        name = chosen[0]
    else:
        name = matches[-1][1]
    return name, find_perf_recipe(name), False


def library_recipe(case):
    """A megatron.bridge.recipes function: by name, or the closest to the lookup."""
    name = case.get("recipe_function")
    if name:
        fn = getattr(R.recipes, name, None)
        if fn is None:
            raise RecipeNotFound(f"megatron.bridge.recipes has no {name!r}")
        return name, fn
    lk = case.get("recipe_lookup") or case.get("perf") or {}
    mr, task, gpu = lk["model_recipe_name"], lk.get("task") or "pretrain", lk.get("gpu") or "h100"
    prec = PRECISION_NAMES.get(lk.get("compute_dtype") or "bf16", "bf16")
    names = [f"{mr}_{task}_{lk.get('num_gpus')}gpu_{gpu}_{prec}_config"]
    pattern = re.compile(rf"^{re.escape(mr)}_{re.escape(task)}_(\d+)gpu_{re.escape(gpu)}_"
                         rf"{re.escape(prec)}_config$")
    counted = []
    for n in dir(R.recipes):
        m = pattern.match(n)
        if m:
            counted.append((int(m.group(1)), n))
    names += [n for _, n in sorted(counted)]
    pattern_any_gpu = re.compile(rf"^{re.escape(mr)}_{re.escape(task)}_(\d+)gpu_\w+_config$")
    names += sorted(n for n in dir(R.recipes) if pattern_any_gpu.match(n))
    names += [f"{mr}_{task}_config"]
    for n in names:
        fn = getattr(R.recipes, n, None)
        if callable(fn):
            return n, fn
    raise RecipeNotFound(f"megatron.bridge.recipes has no recipe for {mr}/{task}/{gpu}/{prec}")


# ---------------------------------------------------------------------------------------------
# Overrides, through megatron.bridge.training.utils.omegaconf_utils


def _parent_state(omega, key):
    """(holder, name, value) of the first section on the key's path that is not a mapping
    (None or a scalar such as mixed_precision: bf16_mixed), or (None, None, None). A refused
    override below such a section can leave it half-updated."""
    node = omega
    for part in key.split(".")[:-1]:
        if not isinstance(node, R.DictConfig) or part not in node:
            return None, None, None
        value = node[part]
        if not isinstance(value, R.DictConfig):
            return node, part, value
        node = node[part]
    return None, None, None


def apply_hydra(cfg, overrides):
    """Apply the overrides as run_script.py's set_cli_overrides does: one
    parse_hydra_overrides call for all of them (the runtime's verdict), then
    OmegaConf.to_container and apply_overrides back onto the ConfigContainer.

    When the batch is refused, the runtime stops there. To name every refused override with its
    own message, the overrides are then applied one at a time, in order; after a refusal the
    conversion is rebuilt from the accepted ones (a refused override can leave OmegaConf
    half-updated, e.g. an empty mapping where a None section was), so the other checks run on
    everything the release does accept.
    Returns (batch_error, {override: error})."""
    ou = R.omegaconf_utils
    if not overrides:
        return None, {}
    omega, excluded = ou.create_omegaconf_dict_config(cfg)
    batch_error, per = None, {}
    try:
        omega = ou.parse_hydra_overrides(omega, list(overrides))
    except Exception as e:  # noqa: BLE001
        batch_error = error_text(e.__cause__ or e)
        accepted = []
        omega, excluded = ou.create_omegaconf_dict_config(cfg)
        for ov in overrides:
            holder, name, before = _parent_state(omega, override_key(ov))
            try:
                omega = ou.parse_hydra_overrides(omega, [ov])
                accepted.append(ov)
            except Exception as e1:  # noqa: BLE001
                per[ov] = error_text(e1.__cause__ or e1)
                if holder is None:
                    continue  # refused at a mapping that exists: nothing was changed
                # Refused below a None/scalar section: put the section back as it was.
                try:
                    with R.open_dict(holder):
                        holder[name] = before
                except Exception:  # noqa: BLE001  (fall back to a rebuild)
                    omega, excluded = ou.create_omegaconf_dict_config(cfg)
                    if accepted:
                        omega = ou.parse_hydra_overrides(omega, accepted)
    final = R.OmegaConf.to_container(omega, resolve=True)
    ou.apply_overrides(cfg, final, excluded)
    return batch_error, per


# ---------------------------------------------------------------------------------------------
# run_script.py's flag layer (FLAG_LAYER), mirrored from UPSTREAM_SCRIPTS: run_script.py
# _prepare_perf_recipe / _apply_perf_recipe_overrides, utils/overrides.py set_user_overrides
# (the parts the flags bridge-launch emits reach, plus what runs with every flag at its default)
# and set_post_overrides (only on the fallback path, when -ng names no exact flat recipe).


def flag_layer(cfg, flags, perf):
    model, train = cfg.model, cfg.train
    # _set_megatron_fsdp_overrides(None), _set_recompute_overrides(None...) and
    # _set_moe_a2a_overlap_overrides(None) do nothing without their flags.
    # _set_nccl_ub_overrides(nccl_ub=None):
    if cfg.ddp.use_megatron_fsdp and cfg.ddp.nccl_ub:
        cfg.ddp.fsdp_manual_registration = True
    # _set_cuda_graph_overrides(impl=None, scope=None). run_script.py stops when this raises;
    # the harness records it and applies the remaining flags, so the later checks still see
    # the layout the flags ask for.
    error = None
    try:
        if model.cuda_graph_impl == "none":
            cfg.rng.te_rng_tracker = model.use_te_rng_tracker = False
            R.cuda_graph.validate_cuda_graph_configuration(model, config_name="model")
        else:
            if model.cuda_graph_impl == "transformer_engine":
                valid = ["attn", "mlp", "moe", "moe_router", "moe_preprocess", "mamba"]
                scope = R.cuda_graph.cuda_graph_module_names(model)
                assert all(s in valid for s in scope), (
                    f"Invalid cuda graph scope: {scope}. Valid options are: {valid}")
            R.cuda_graph.validate_cuda_graph_configuration(model, config_name="model")
            if R.cuda_graph.is_full_iteration_cuda_graph(model):
                cfg.rerun_state_machine.check_for_nan_in_loss = False
    except Exception as e:  # noqa: BLE001
        error = error_text(e)
    if flags.get("max_steps") is not None:
        train.train_iters = flags["max_steps"]
    if flags.get("tensor_model_parallel_size") is not None:
        model.tensor_model_parallel_size = flags["tensor_model_parallel_size"]
        model.sequence_parallel = bool(flags["tensor_model_parallel_size"] > 1)
    for f in ("pipeline_model_parallel_size", "context_parallel_size"):
        if flags.get(f) is not None:
            setattr(model, f, flags[f])
    if "virtual_pipeline_model_parallel_size" in flags:  # absent = run_script's -1 sentinel
        model.virtual_pipeline_model_parallel_size = flags["virtual_pipeline_model_parallel_size"]
    for f in ("expert_model_parallel_size", "expert_tensor_parallel_size"):
        if flags.get(f) is not None:
            setattr(model, f, flags[f])
    if flags.get("global_batch_size") is not None:
        train.global_batch_size = flags["global_batch_size"]
    if flags.get("micro_batch_size") is not None:
        train.micro_batch_size = flags["micro_batch_size"]
    if flags.get("seq_length") is not None:
        model.seq_length = flags["seq_length"]
    # --data mock (default) with --domain llm (default): a fresh mock dataset of the model's
    # sequence length (utils/datasets.py create_mock_dataset_config).
    ds = cfg.dataset
    cfg.dataset = R.config.MockGPTDatasetConfig(
        seq_length=model.seq_length, random_seed=1234, reset_attention_mask=False,
        reset_position_ids=False, eod_mask_loss=False, num_dataset_builder_threads=1,
        split="99990,8,2", data_sharding=True, dataloader_type="single",
        num_workers=ds.num_workers, pin_memory=ds.pin_memory,
        persistent_workers=ds.persistent_workers)
    # --moe_flex_dispatcher_backend absent (-1): the recipe's backend is kept.
    if (perf.get("task") or "pretrain") == "peft" and (model.pipeline_model_parallel_size or 1) > 1 \
            and not cfg.ddp.use_megatron_fsdp:
        cfg.dist.use_tp_pp_dp_mapping = True
    return error


def post_overrides(cfg, perf, base_name, user_gbs):
    """set_post_overrides: only when run_script.py fell back to another GPU count's recipe."""
    base = find_perf_recipe(base_name)()
    compute_dtype = perf.get("compute_dtype") or "bf16"
    if compute_dtype == "bf16" and cfg.optimizer.optimizer == "adam":
        cfg.optimizer.use_precision_aware_optimizer = True
    m = cfg.model
    tp, pp, cp = m.tensor_model_parallel_size, m.pipeline_model_parallel_size, m.context_parallel_size
    vp = m.virtual_pipeline_model_parallel_size or 1
    dp = perf["num_gpus"] // (tp * pp * cp)
    bm = base.model
    base_gpus = int(re.search(r"_(\d+)gpu_", base_name).group(1))
    base_dp = base_gpus // (bm.tensor_model_parallel_size * bm.pipeline_model_parallel_size
                            * bm.context_parallel_size)
    if dp > 1 and pp > 1 and vp > 1 and compute_dtype not in ("fp8_mx", "nvfp4"):
        if cfg.optimizer.optimizer != "dist_muon":
            cfg.optimizer.overlap_param_gather_with_optimizer_step = True
            if isinstance(cfg.comm_overlap, R.comm_overlap.CommOverlapConfig):
                cfg.comm_overlap.overlap_param_gather_with_optimizer_step = True
    if user_gbs is None and cfg.train.global_batch_size == base.train.global_batch_size \
            and dp != base_dp:
        cfg.train.global_batch_size = base.train.global_batch_size * dp // base_dp


# ---------------------------------------------------------------------------------------------
# One case


def resolved_overlap(cfg):
    out = {}
    for field, where in OVERLAP_FIELDS:
        holder = getattr(cfg, where)
        v = getattr(holder, field, _MISSING)
        if field == "tp_comm_overlap_cfg" and isinstance(v, dict):
            v = {k: x for k, x in v.items() if x is not None}
        out[field] = jsonable(v)
    return out


def run_case(case):
    t0 = time.time()
    res = {"id": case["id"], "mode": case.get("mode"), "base": None, "base_error": None,
           "overrides": [], "batch_error": None, "flags": {}, "finalize": None,
           "resolved": None, "env_vars": None, "warnings": [], "values": {}}
    try:
        with case_context(case) as (capture, caught):
            _run_case(case, res)
        res["warnings"] = capture.messages + [
            " ".join(str(w.message).split())[:300] for w in caught[:20]
            if "overlap" in str(w.message).lower() or "disabl" in str(w.message).lower()]
    except Exception as e:  # noqa: BLE001  (a harness bug must not hide the other cases)
        res["harness_error"] = error_text(e) + " | " + traceback.format_exc(limit=4)[-800:]
    res["seconds"] = round(time.time() - t0, 3)
    return res


def _run_case(case, res):
    mode = case.get("mode") or "recipe"
    perf = case.get("perf") or {}
    fallback_name = None
    try:
        if mode == "perf_script":
            name, fn, exact = perf_recipe(perf)
            if not exact:
                fallback_name = name
            res["base"] = {"kind": "perf_recipes", "function": name, "exact": exact}
        else:
            name, fn = library_recipe(case)
            res["base"] = {"kind": "recipes", "function": name}
    except RecipeNotFound as e:
        res["base_error"] = str(e)
        if mode != "perf_script":
            return
        # The runtime stops here. Keep checking the overrides against the library recipe the
        # perf recipe would be built from, so that the other classes still get data.
        try:
            name, fn = library_recipe({"recipe_lookup": perf})
        except RecipeNotFound as e2:
            res["base_error"] += f"; {e2}"
            return
        res["base"] = {"kind": "recipes", "function": name, "exact": False,
                       "instead_of_perf_recipe": True}
    cfg = fn()
    res["env_vars"] = env_text(getattr(cfg, "env_vars", None))
    reads = sorted({override_key(ov) for ov in case.get("overrides", [])} | set(case.get("read", [])))
    res["defaults"] = {p: jsonable(read_path(cfg, p)) for p in reads}
    overrides = list(case.get("overrides", []))
    batch_error, per = apply_hydra(cfg, overrides)
    res["batch_error"] = batch_error
    after_overrides = {}
    for ov in overrides:
        key = override_key(ov)
        after_overrides[ov] = jsonable(read_path(cfg, key))
    flags = case.get("flags") or {}
    if mode == "perf_script":
        try:
            flag_error = flag_layer(cfg, flags, perf)
            if flag_error:
                res["flag_error"] = flag_error
            if fallback_name:
                post_overrides(cfg, perf, fallback_name, flags.get("global_batch_size"))
        except Exception as e:  # noqa: BLE001  (run_script.py itself stops here)
            res["flag_error"] = error_text(e)
        # run_script.py _run_training: bf16 with Adam turns on the precision-aware optimizer.
        if (perf.get("compute_dtype") or "bf16") == "bf16" and cfg.optimizer.optimizer == "adam":
            cfg.optimizer.use_precision_aware_optimizer = True
    before_final = {ov: jsonable(read_path(cfg, override_key(ov))) for ov in overrides}
    flag_fields = {"tensor_model_parallel_size": "model", "pipeline_model_parallel_size": "model",
                   "virtual_pipeline_model_parallel_size": "model",
                   "context_parallel_size": "model", "expert_model_parallel_size": "model",
                   "expert_tensor_parallel_size": "model", "global_batch_size": "train",
                   "micro_batch_size": "train", "seq_length": "model", "max_steps": "train"}
    try:
        R.config.runtime_config_update(cfg)
        res["finalize"] = {"ok": True}
    except BaseException as e:  # noqa: BLE001  (AssertionError, ValueError, ... are results)
        tb = traceback.extract_tb(e.__traceback__)
        where = [f"{os.path.basename(f.filename)}:{f.lineno}:{f.name}" for f in tb[-3:]]
        names = [f.name for f in tb]
        # The step of runtime_config_update that raised: validate (after CommOverlapConfig.setup
        # applied the resolved values) or an earlier one (setup, finalize, ...).
        stage = names[names.index("runtime_config_update") + 1] \
            if "runtime_config_update" in names[:-1] else "?"
        res["finalize"] = {"ok": False, "type": type(e).__name__, "stage": stage,
                           "message": " ".join(str(e).split())[:1500], "where": where}
    for ov in overrides:
        key = override_key(ov)
        entry = {"override": ov, "key": key, "accepted": ov not in per,
                 "error": per.get(ov), "landed": after_overrides[ov],
                 "before_finalize": before_final[ov],
                 "after_finalize": jsonable(read_path(cfg, key))}
        res["overrides"].append(entry)
    for f, where in flag_fields.items():
        if f in flags:
            field = "train_iters" if f == "max_steps" else f
            res["flags"][f] = {"given": flags[f], "field": f"{where}.{field}",
                               "after_finalize": jsonable(getattr(getattr(cfg, where), field, None))}
    res["resolved"] = resolved_overlap(cfg)
    res["values"] = {p: jsonable(read_path(cfg, p)) for p in case.get("read", [])}


# ---------------------------------------------------------------------------------------------


def env_text(env_vars):
    """ConfigContainer.env_vars as the release puts them into each rank's environment
    (``apply_environment_variables``: ``os.environ.setdefault(name, str(value))``)."""
    return {str(k): str(v) for k, v in (env_vars or {}).items()}


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
        used.append("hub-stand-in")
        return _HubConfigStandIn(path)

    return lookup


def perf_env_of(name, stand_in_for_all=False):
    """(name, env_vars, how) of one flat performance recipe: how is "release" when the recipe
    built as released without the Hub, "hub-config" when it built as released with a Hub
    config of hf_configs/, "hub-stand-in" when it needed a Hub config this machine lacks (see
    _HubConfigStandIn); (name, None, error) when it did not build."""
    from unittest import mock

    from megatron.bridge import AutoBridge

    m = PERF_NAME.match(name)
    case = {"world_size": int(m["n"]), "gpu": m["gpu"]}
    used = []
    try:
        with case_context(case), mock.patch.object(
                AutoBridge, "from_hf_pretrained", _hub_lookup(stand_in_for_all, used)):
            env = env_text(find_perf_recipe(name)().env_vars)
    except Exception as e:  # noqa: BLE001
        return name, None, error_text(e)
    how = "hub-stand-in" if "hub-stand-in" in used else "hub-config" if used else "release"
    return name, env, how


def perf_env_cross_check(names):
    """The stand-in must not change env_vars: every recipe built as released with a Hub config
    of hf_configs/ is built again with the stand-in instead; returns the names whose env_vars
    then differ."""
    return [n for n in names
            if perf_env_of(n)[1] != perf_env_of(n, stand_in_for_all=True)[1]]


def perf_env_main(rel, jobs):
    """--perf-env: the env_vars of every default-variant flat performance recipe."""
    names = [n for n in rel.perf_names if PERF_NAME.match(n)]
    if jobs > 1:
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(jobs, initializer=_worker_init) as pool:
            built = list(pool.imap(perf_env_of, names, chunksize=4))
    else:
        built = [perf_env_of(n) for n in names]
    env = {n: e for n, e, _ in built if e is not None}
    # The recipes built with a real Hub config are the ones that show the stand-in's effect.
    mismatch = perf_env_cross_check(sorted(n for n, _, how in built if how == "hub-config"))
    return {"perf_env": env,
            "perf_env_how": {n: how for n, _, how in built},
            "perf_env_failed": {n: how for n, e, how in built if e is None},
            "perf_env_stand_in_mismatch": mismatch}


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
                out["results"] = list(pool.imap(run_case, cases, chunksize=4))
        else:
            out["results"] = [run_case(c) for c in cases]
    out["seconds"] = round(time.time() - t0, 2)
    write_output(args.out, json.dumps(out, sort_keys=False))


if __name__ == "__main__":
    main()
