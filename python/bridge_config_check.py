#!/usr/bin/env python3
"""bridge-launch's runtime check: a plan through the config code of the installed Megatron-Bridge.

bridge-launch runs this program with the Python the user names (`--runtime-check PYTHON`,
recipe key `runtime.check.python`), on the login node: no GPU, no distributed start, no
training. It reads one JSON object on stdin,

    {"adapter": "megatron_bridge" | "hydra",
     "argv": [...],               # exactly what the adapter hands to the runtime
     "world_size": 16, "gpu": "h100", "capability": [9, 0] | null,
     "recipe_lookup": {"model_recipe_name": ..., "task": ..., "num_gpus": ..., "gpu": ...,
                       "compute_dtype": ...},   # which library recipe the hydra adapter means
     "planned_overlap": {"tp_comm_overlap": false, ...}}   # the plan's 14 resolved values

builds the config as the runtime would from that argv (the perf recipe run_script.py picks
and its flags, or the library recipe, then the Hydra overrides through the release's own
omegaconf_utils), finalises it with the release's runtime_config_update at the plan's world
size and the GPU's capability, and writes one JSON object on stdout:

    {"ok": bool, "error": null | "what kept the check from running",
     "versions": {...}, "import_seconds": 3.1, "seconds": 4.0, "base": {...},
     "findings": [{"class": ..., "key": "model.x", "arg": 17, "planned": ..., "actual": ...,
                   "message": "..."}]}

`arg` is the index in argv of the word the finding is about (null when none is), `key` the
plan key it carries. Classes: no-recipe, override-refused, flags-refused,
finalisation-refused (the runtime would not start), value-changed, flag-changed and
overlap-differs (it would start with another value than the plan's).

The same config path is what bridge-launch's conformance suite runs against the pinned
release (tests/conformance/harness.py imports this file), so the check and the suite cannot
drift apart. Exits 0 whenever it could write its answer; what it found is in the answer.

The same file is the plan confirmation at start (`--confirm REQUEST -- SCRIPT ARGS...`, see
confirm_main below): bridge-launch ships it into the job's directory as bridge_plan_confirm.py
and every rank's runtime starts through it.
"""

import contextlib
import dataclasses
import enum
import importlib
import io
import json
import logging
import os
import pkgutil
import re
import socket
import sys
import time
import traceback
import warnings

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

R = None  # the release's modules, filled by load_release()


class Release:
    """The modules of the installed release that the config path uses."""


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
    # --config_variant: v1/v2 (legacy labels) or none is the canonical recipe.
    variant = (perf.get("config_variant") or "").lower()
    suffix = "" if variant in ("", "v1", "v2") else f"_{variant}"
    prec += suffix
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
        impl, scope = flags.get("cuda_graph_impl"), flags.get("cuda_graph_scope")
        if impl is not None:
            model.cuda_graph_impl = impl
            if impl != "none":
                cfg.rng.te_rng_tracker = model.use_te_rng_tracker = True
        if model.cuda_graph_impl == "none":
            cfg.rng.te_rng_tracker = model.use_te_rng_tracker = False
            R.cuda_graph.validate_cuda_graph_configuration(model, config_name="model")
        else:
            if scope is not None:
                cuda_graph_scope_flag(model, scope)
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
    # _set_moe_a2a_overlap_overrides: true turns EP overlap and delayed wgrad on.
    if flags.get("moe_a2a_overlap"):
        if cfg.comm_overlap is None:
            cfg.comm_overlap = R.comm_overlap.CommOverlapConfig(
                tp_comm_overlap=bool(model.tensor_model_parallel_size > 1))
        cfg.comm_overlap.overlap_moe_expert_parallel_comm = True
        cfg.comm_overlap.delay_wgrad_compute = True
        model.moe_shared_expert_overlap = False
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
    tokenizer_layer(cfg, flags)
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
    # --moe_flex_dispatcher_backend: absent (-1) keeps the recipe's backend, None is the
    # alltoall dispatcher, deepep/hybridep apply_flex_dispatcher_backend.
    backend = flags.get("moe_flex_dispatcher_backend", -1)
    if backend is None:
        model.moe_flex_dispatcher_backend = None
        model.moe_token_dispatcher_type = "alltoall"
    elif backend != -1:
        R.flex_dispatcher.apply_flex_dispatcher_backend(model, backend)
    if (perf.get("task") or "pretrain") == "peft" and (model.pipeline_model_parallel_size or 1) > 1 \
            and not cfg.ddp.use_megatron_fsdp:
        cfg.dist.use_tp_pp_dp_mapping = True
    return error


def cuda_graph_scope_flag(model, scope):
    """_set_cuda_graph_overrides' --cuda_graph_scope (a comma-separated list)."""
    if "full_iteration" in scope:
        if scope != ["full_iteration"]:
            raise ValueError("full_iteration CUDA graph scope cannot be combined with other "
                             "scopes.")
        if model.cuda_graph_impl == "transformer_engine":
            raise ValueError("full_iteration CUDA graph scope cannot use "
                             "cuda_graph_impl=transformer_engine.")
        R.cuda_graph.set_full_iteration_cuda_graph(model)
    else:
        R.cuda_graph.set_cuda_graph_modules(model, scope)


def tokenizer_layer(cfg, flags):
    """set_user_overrides' --tokenizer_type: a fresh TokenizerConfig replaces the recipe's."""
    kind, model_path = flags.get("tokenizer_type"), flags.get("tokenizer_model")
    if kind == "NullTokenizer":
        cfg.tokenizer = R.config.TokenizerConfig(
            tokenizer_type="NullTokenizer", vocab_size=flags.get("vocab_size") or 32000)
    elif kind in ("HuggingFaceTokenizer", "SentencePieceTokenizer"):
        if not model_path:
            raise ValueError(f"--tokenizer_model is required for {kind}")
        cfg.tokenizer = R.config.TokenizerConfig(tokenizer_type=kind, tokenizer_model=model_path)


def env_coupling(cfg, flags, perf, base_backend, base_a2a):
    """_apply_flat_cli_environment_compatibility: the env values the legacy flags -tp, -cp,
    --moe_a2a_overlap, -ep and -pp still change in the recipe's env_vars (an env_vars Hydra
    override stays final)."""
    model, env = cfg.model, cfg.env_vars
    gpu = (perf.get("gpu") or "").lower()
    tp = model.tensor_model_parallel_size or 1
    cp = model.context_parallel_size or 1
    if any(flags.get(f) is not None for f in ("tensor_model_parallel_size",
                                              "context_parallel_size", "moe_a2a_overlap")):
        a2a = flags["moe_a2a_overlap"] if flags.get("moe_a2a_overlap") is not None else base_a2a
        connections = 32 if base_backend in ("deepep", "hybridep") else 8
        if gpu in ("b200", "b300", "gb200", "gb300", "vr200"):
            connections = 32
        elif (tp > 1 or cp > 1) and not a2a:
            connections = 1
        env["CUDA_DEVICE_MAX_CONNECTIONS"] = connections
    ep = model.expert_model_parallel_size or 1
    if flags.get("expert_model_parallel_size") is not None and base_backend == "hybridep" \
            and ep > 0:
        if gpu in ("h100", "b200", "b300"):
            env["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"] = min(ep, 8)
        elif gpu in ("gb200", "gb300", "vr200", "r100") and ep <= 72:
            env["NUM_OF_HYBRID_EP_RANKS_PER_NVLINK_DOMAIN"] = ep
    if flags.get("pipeline_model_parallel_size") is not None:
        pp = model.pipeline_model_parallel_size or 1
        llama = perf.get("model_family_name") == "llama"
        task = perf.get("task") or "pretrain"
        if pp > 1 and llama and (task == "sft" or (
                task == "pretrain" and perf.get("model_recipe_name") in ("llama3_70b",
                                                                          "llama31_405b"))):
            env["NCCL_P2P_NET_CHUNKSIZE"] = 2097152
        else:
            env.pop("NCCL_P2P_NET_CHUNKSIZE", None)


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
    """The config path of one case into `res`; returns the finalised config (None when the
    runtime stops before it has one)."""
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
    # run_script.py reads these off the recipe before any override (its env coupling).
    base_backend = getattr(cfg.model, "moe_flex_dispatcher_backend", None)
    base_a2a = bool(getattr(cfg, "comm_overlap", None) is not None
                    and getattr(cfg.comm_overlap, "overlap_moe_expert_parallel_comm", False))
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
            kept = {override_key(ov) for ov in overrides}
            saved = {k: v for k, v in (cfg.env_vars or {}).items() if f"env_vars.{k}" in kept}
            env_coupling(cfg, flags, perf, base_backend, base_a2a)
            for k in [k for k in cfg.env_vars if f"env_vars.{k}" in kept and k not in saved]:
                cfg.env_vars.pop(k)
            cfg.env_vars.update(saved)
            if fallback_name:
                post_overrides(cfg, perf, fallback_name, flags.get("global_batch_size"))
        except Exception as e:  # noqa: BLE001  (run_script.py itself stops here)
            res["flag_error"] = error_text(e)
        # run_script.py _run_training: bf16 with Adam turns on the precision-aware optimizer.
        if (perf.get("compute_dtype") or "bf16") == "bf16" and cfg.optimizer.optimizer == "adam":
            cfg.optimizer.use_precision_aware_optimizer = True
    before_final = {ov: jsonable(read_path(cfg, override_key(ov))) for ov in overrides}
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
    for f, path in FLAG_FIELDS.items():
        if f in flags:
            res["flags"][f] = {"given": flags[f], "field": path,
                               "after_finalize": jsonable(read_path(cfg, path))}
    res["resolved"] = resolved_overlap(cfg)
    res["values"] = {p: jsonable(read_path(cfg, p)) for p in case.get("read", [])}
    return cfg


# ---------------------------------------------------------------------------------------------


def env_text(env_vars):
    """ConfigContainer.env_vars as the release puts them into each rank's environment
    (``apply_environment_variables``: ``os.environ.setdefault(name, str(value))``)."""
    return {str(k): str(v) for k, v in (env_vars or {}).items()}


# ---------------------------------------------------------------------------------------------
# run_script.py's command line, as far as the flags bridge-launch emits (argument_parser.py
# of UPSTREAM_SCRIPTS), by destination.

FLAGS = {
    "-m": "model_family_name", "--model_family_name": "model_family_name",
    "-mr": "model_recipe_name", "--model_recipe_name": "model_recipe_name",
    "-g": "gpu", "--gpu": "gpu", "-ng": "num_gpus", "--num_gpus": "num_gpus",
    "-gn": "gpus_per_node", "--gpus_per_node": "gpus_per_node",
    "-tp": "tensor_model_parallel_size", "--tensor_model_parallel_size": "tensor_model_parallel_size",
    "-pp": "pipeline_model_parallel_size",
    "--pipeline_model_parallel_size": "pipeline_model_parallel_size",
    "-vp": "virtual_pipeline_model_parallel_size",
    "--virtual_pipeline_model_parallel_size": "virtual_pipeline_model_parallel_size",
    "-cp": "context_parallel_size", "--context_parallel_size": "context_parallel_size",
    "-ep": "expert_model_parallel_size", "--expert_model_parallel_size": "expert_model_parallel_size",
    "-et": "expert_tensor_parallel_size",
    "--expert_tensor_parallel_size": "expert_tensor_parallel_size",
    "-gb": "global_batch_size", "--global_batch_size": "global_batch_size",
    "-mb": "micro_batch_size", "--micro_batch_size": "micro_batch_size",
    "-sl": "seq_length", "--seq_length": "seq_length",
    "-ms": "max_steps", "--max_steps": "max_steps",
    "-c": "compute_dtype", "--compute_dtype": "compute_dtype", "--task": "task",
    "--config_variant": "config_variant", "--cuda_graph_impl": "cuda_graph_impl",
    "--cuda_graph_scope": "cuda_graph_scope", "--moe_a2a_overlap": "moe_a2a_overlap",
    "--moe_flex_dispatcher_backend": "moe_flex_dispatcher_backend",
    "--tokenizer_type": "tokenizer_type", "--tokenizer_model": "tokenizer_model",
    "--vocab_size": "vocab_size",
}
INT_FLAGS = {"num_gpus", "gpus_per_node", "tensor_model_parallel_size",
             "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
             "expert_tensor_parallel_size", "global_batch_size", "micro_batch_size", "seq_length",
             "max_steps", "virtual_pipeline_model_parallel_size", "vocab_size"}
# The config field each of them sets, as run_script.py's flag layer does.
FLAG_FIELDS = {
    "tensor_model_parallel_size": "model.tensor_model_parallel_size",
    "pipeline_model_parallel_size": "model.pipeline_model_parallel_size",
    "virtual_pipeline_model_parallel_size": "model.virtual_pipeline_model_parallel_size",
    "context_parallel_size": "model.context_parallel_size",
    "expert_model_parallel_size": "model.expert_model_parallel_size",
    "expert_tensor_parallel_size": "model.expert_tensor_parallel_size",
    "global_batch_size": "train.global_batch_size", "micro_batch_size": "train.micro_batch_size",
    "seq_length": "model.seq_length", "max_steps": "train.train_iters",
}
# The flags that set config fields (the others choose the recipe): those above, and the ones
# whose effect is more than one field (flag_layer applies them as run_script.py does).
CONFIG_FLAGS = list(FLAG_FIELDS) + [
    "cuda_graph_impl", "cuda_graph_scope", "moe_a2a_overlap", "moe_flex_dispatcher_backend",
    "tokenizer_type", "tokenizer_model", "vocab_size"]
# The plan key each flag carries (what the recipe or an override sets).
FLAG_PLAN_KEYS = {
    "model_family_name": "model.family", "model_recipe_name": "model.recipe",
    "gpu": "cluster.gpu", "num_gpus": "cluster.num_gpus", "gpus_per_node": "cluster.gpus_per_node",
    "compute_dtype": "model.compute_dtype", "task": "train.task", "max_steps": "train.max_steps",
    "global_batch_size": "train.global_batch_size", "micro_batch_size": "train.micro_batch_size",
}


def flag_value(dest, val):
    """A flag's word as run_script.py's argparse types it (argument_parser.py)."""
    if dest in INT_FLAGS:
        return None if val == "None" else int(val)
    if dest == "moe_a2a_overlap":  # bool_arg
        low = (val or "").lower()
        if low in ("true", "1", "t", "yes", "y"):
            return True
        if low in ("false", "0", "f", "no", "n"):
            return False
        raise ValueError(f"--moe_a2a_overlap: {val!r} is not a boolean")
    if dest == "moe_flex_dispatcher_backend":
        return None if val == "None" else val
    if dest == "cuda_graph_scope" and val is not None:
        return [x for x in val.split(",") if x]
    return val


def parse_mb_argv(words):
    """(flags by destination, the other words, index in `words` of each flag) of run_script.py's
    command line. "None" is how the -vp flag spells an unset value."""
    flags, rest, where, i = {}, [], {}, 0
    while i < len(words):
        w = words[i]
        key, val = (w.split("=", 1) + [None])[:2] if w.startswith("--") and "=" in w else (w, None)
        if key in FLAGS:
            dest = FLAGS[key]
            where[dest] = i
            if val is None:
                val = words[i + 1] if i + 1 < len(words) else None
                i += 1
            flags[dest] = flag_value(dest, val)
        else:
            rest.append(w)
        i += 1
    return flags, rest, where


def flag_plan_key(dest):
    return FLAG_PLAN_KEYS.get(dest) or f"model.{dest}"


# ---------------------------------------------------------------------------------------------
# The runtime check


def load_release():
    """Imports the release once into R. Returns (seconds, error text or None)."""
    global R
    start = time.time()
    rel = Release()
    try:
        with quiet():
            import torch
            from omegaconf import DictConfig, OmegaConf, open_dict

            import megatron.bridge
            import megatron.core
            import megatron.core.utils as mcore_utils
            from megatron.bridge.training import comm_overlap, config, flex_dispatcher_backend
            from megatron.bridge.training.utils import omegaconf_utils
            from megatron.bridge.utils import cuda_graph

            rel.torch, rel.OmegaConf = torch, OmegaConf
            rel.DictConfig, rel.open_dict = DictConfig, open_dict
            rel.mcore_utils, rel.comm_overlap, rel.config = mcore_utils, comm_overlap, config
            rel.omegaconf_utils, rel.cuda_graph = omegaconf_utils, cuda_graph
            rel.flex_dispatcher = flex_dispatcher_backend
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
            te = sys.modules.get("transformer_engine")
            rel.versions = {
                "megatron.bridge": getattr(megatron.bridge, "__version__", "?"),
                "megatron.core": getattr(megatron.core, "__version__", "?"),
                "torch": torch.__version__,
                "transformer_engine": getattr(te, "__version__", None) if te else None,
            }
    except BaseException as e:  # noqa: BLE001  (an import failure is the answer)
        return time.time() - start, f"{type(e).__name__}: {' '.join(str(e).split())[:1500]}"
    R = rel
    return time.time() - start, None


def case_of(request):
    """The config path's case for a check request (see the module's docstring)."""
    argv = list(request.get("argv") or [])
    case = {"id": "runtime-check", "world_size": int(request["world_size"]),
            "gpu": request.get("gpu") or "h100", "capability": request.get("capability"),
            "te_version": None}
    where = {}
    if request.get("adapter") == "megatron_bridge":
        flags, overrides, where = parse_mb_argv(argv)
        lookup = dict(request.get("recipe_lookup") or {})
        perf = {"model_family_name": lookup.get("model_family_name"),
                "model_recipe_name": lookup.get("model_recipe_name"),
                "task": lookup.get("task") or "pretrain", "num_gpus": case["world_size"],
                "gpu": case["gpu"], "compute_dtype": lookup.get("compute_dtype") or "bf16"}
        perf.update({k: flags[k] for k in ("model_family_name", "model_recipe_name", "gpu",
                                           "num_gpus", "compute_dtype", "task", "config_variant")
                     if k in flags})
        case.update(mode="perf_script", perf=perf, overrides=overrides,
                    flags={k: v for k, v in flags.items() if k in CONFIG_FLAGS})
    else:
        case.update(mode="recipe", recipe_lookup=request.get("recipe_lookup") or {},
                    overrides=[w for w in argv if "=" in w and not w.startswith("-")])
        # A recipe-driven script's `--recipe NAME` (run_recipe.py): the recipe the job builds.
        for i, w in enumerate(argv):
            if w == "--recipe" and i + 1 < len(argv):
                case["recipe_function"] = argv[i + 1]
            elif w.startswith("--recipe="):
                case["recipe_function"] = w.split("=", 1)[1]
    return case, where


def _same(a, b):
    if a in ([], None) and b in ([], None):
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b or (a == b and type(a) is type(b))
    # Python compares an int with an int or a float exactly (never through float(), which
    # makes 2**53 + 1 equal to 2**53).
    return a == b


def _word_value(text):
    """A scalar as Hydra reads it from a command line, for the spellings bridge-launch sends
    (true/false, null, whole and decimal numbers); anything else is not compared here."""
    if text in ("true", "false"):
        return True, text == "true"
    if text == "null":
        return True, None
    if re.fullmatch(r"-?\d+", text):
        return True, int(text)
    if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?", text):
        return True, float(text)
    return False, None


def _finding(cls, key, arg, message, planned=None, actual=None):
    return {"class": cls, "key": key, "arg": arg, "message": message, "planned": planned,
            "actual": actual}


def _blame(case, argv):
    """The overrides without which the release finalises the config: a refusal at finalisation
    names no argument, so each override is left out once (at most 60; one build and
    finalisation is a fraction of a second once the release is imported)."""
    overrides = case.get("overrides") or []
    if len(overrides) > 60:
        return []
    blamed = []
    for ov in overrides:
        trial = dict(case, overrides=[o for o in overrides if o != ov])
        fin = run_case(trial).get("finalize") or {}
        if fin.get("ok") and ov in argv:
            blamed.append(ov)
    return blamed


def _refusals(res, argv, where, case):
    """What keeps the runtime from starting, each with the argv word it is about."""
    out = []
    if res.get("base_error"):
        arg = where.get("model_recipe_name")
        out.append(_finding("no-recipe", "model.recipe", arg, res["base_error"]))
        return out
    for e in res.get("overrides", []):
        if not e["accepted"]:
            out.append(_finding("override-refused", e["key"], argv.index(e["override"]),
                                e["error"]))
    if res.get("flag_error"):
        out.append(_finding("flags-refused", "", None, res["flag_error"]))
    fin = res.get("finalize") or {}
    if fin and not fin.get("ok") and not out:
        message = (f"{fin.get('type')}: {fin.get('message')} "
                   f"(runtime_config_update, step {fin.get('stage')})")
        blamed = _blame(case, argv)
        for ov in blamed:
            out.append(_finding("finalisation-refused", override_key(ov), argv.index(ov),
                                f"{message}; it finalises the config without {ov}"))
        if not blamed:
            out.append(_finding("finalisation-refused", "", None, message))
    return out


def _changes(res, argv, where, planned_overlap):
    """Planned values the finalised config holds differently."""
    out = []
    for e in res.get("overrides", []):
        key, text = e["override"].split("=", 1)
        key = key.lstrip("+~")
        if key in ("comm_overlap", "mixed_precision") or key.startswith("comm_overlap."):
            continue  # objects the runtime expands; the overlap values are compared below
        arg = argv.index(e["override"])
        known, want = _word_value(text)
        if known and not _same(e["landed"], want):
            out.append(_finding("value-changed", key, arg,
                                f"{key}={text} landed as {json.dumps(e['landed'])}", want,
                                e["landed"]))
        elif not _same(e["after_finalize"], e["landed"]):
            out.append(_finding("value-changed", key, arg,
                                f"{key} is {json.dumps(e['after_finalize'])} after "
                                f"run_script.py's flags and runtime_config_update, planned "
                                f"{json.dumps(e['landed'])}", e["landed"], e["after_finalize"]))
    for dest, v in (res.get("flags") or {}).items():
        if not _same(v["after_finalize"], v["given"]):
            out.append(_finding("flag-changed", flag_plan_key(dest), where.get(dest),
                                f"{v['field']} is {json.dumps(v['after_finalize'])} after "
                                f"runtime_config_update, the flag gave {json.dumps(v['given'])}",
                                v["given"], v["after_finalize"]))
    resolved = res.get("resolved") or {}
    for field, holder in OVERLAP_FIELDS:
        if field not in (planned_overlap or {}):
            continue
        want, got = planned_overlap[field], resolved.get(field)
        if isinstance(want, dict) or isinstance(got, dict):
            continue  # a userbuffers mapping: the preset's layers, compared by the suite
        if not _same(want, got):
            out.append(_finding("overlap-differs", f"comm_overlap.{field}", None,
                                f"{holder}.{field} is {json.dumps(got)} after "
                                f"CommOverlapConfig.setup, the plan resolved {json.dumps(want)}",
                                want, got))
    return out


# The Hugging Face Hub ids the recipe asked AutoBridge for, in order (the runtime check only).
HUB_LOOKUPS = []
# What the Hub libraries say when a file is neither cached nor fetchable offline.
HUB_MISSING_MARKS = ("offline", "LocalEntryNotFound", "cached files", "local cache",
                     "couldn't connect", "HF_HUB_OFFLINE")


def _record_hub_lookups():
    """Wraps AutoBridge.from_hf_pretrained so that a recipe that fails to build can be told
    apart: one that needs a Hub config the cache lacks."""
    try:
        from megatron.bridge import AutoBridge
    except Exception:  # noqa: BLE001  (an older release: nothing to record)
        return
    original = AutoBridge.from_hf_pretrained

    def from_hf_pretrained(path, *args, **kwargs):
        HUB_LOOKUPS.append(str(path))
        return original(path, *args, **kwargs)

    AutoBridge.from_hf_pretrained = from_hf_pretrained


def _hub_config_missing(res):
    """A finding when the recipe needs a Hub config the cache (HF_HOME) does not hold."""
    error = res.get("harness_error") or ""
    if not HUB_LOOKUPS or not any(m in error for m in HUB_MISSING_MARKS):
        return None
    model_id = HUB_LOOKUPS[-1]
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "huggingface")
    function = (res.get("base") or {}).get("function") or "the recipe"
    how = (f"HF_HOME={home} python -c \"from huggingface_hub import snapshot_download; "
           f"snapshot_download('{model_id}', allow_patterns=['*.json', '*.py'])\"")
    return _finding("hub-config-missing", "model.recipe", None,
                    f"{function} reads the Hugging Face config of {model_id}, which is not in "
                    f"the Hub cache {home} (the check runs offline and answers at once instead "
                    f"of retrying the Hub; the job's ranks need the same files); cache it where "
                    f"the job reads it with: {how}")


def check(request):
    t0 = time.time()
    answer = {"ok": False, "error": None, "versions": None, "import_seconds": None,
              "seconds": None, "base": None, "findings": []}
    # Offline: a config the cache lacks is an answer in seconds, not minutes of retries.
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import_s, error = load_release()
    if not error:
        _record_hub_lookups()
    answer["import_seconds"] = round(import_s, 2)
    if error:
        answer["error"] = f"Megatron-Bridge does not import in {sys.executable}: {error}"
    else:
        answer["versions"] = R.versions
        case, where = case_of(request)
        res = run_case(case)
        missing = _hub_config_missing(res)
        if missing:
            answer["base"] = res.get("base")
            answer["findings"] = [missing]
        elif res.get("harness_error"):
            answer["error"] = "the check itself failed: " + res["harness_error"]
        else:
            argv = list(request.get("argv") or [])
            answer["base"] = res.get("base")
            answer["findings"] = _refusals(res, argv, where, case)
            if not answer["findings"]:
                answer["findings"] = _changes(res, argv, where, request.get("planned_overlap"))
            answer["ok"] = not answer["findings"]
    answer["seconds"] = round(time.time() - t0, 2)
    return answer


# ---------------------------------------------------------------------------------------------
# The plan confirmation at start: `python bridge_plan_confirm.py --confirm REQUEST -- SCRIPT ARGS`
#
# bridge-launch ships this file and REQUEST (the check's request, above) into the job's
# directory and starts every rank's runtime through it. It runs SCRIPT as `python SCRIPT ARGS`
# would, with one hook: right after the release's runtime_config_update has finalised the config
# the runtime built (pretrain calls it before anything else), every rank compares that config
# with the planned values. Rank 0 writes the verdict next to REQUEST (CONFIRM_VERDICT). On a
# difference every rank writes it, says which fields differ on stderr and exits
# CONFIRM_EXIT_CODE, before distributed start or training. Nothing else about the runtime
# changes. Before SCRIPT starts, every rank also compares its environment with the plan's
# launch env (REQUEST's planned_env), byte for byte, so a value a wrapper, a prolog or the
# container changed on the way stops the rank at once (ENV_LINE), before the runtime's own
# set-if-unset can hide it.

CONFIRM_HOOK_MODULE = "megatron.bridge.training.config"
CONFIRM_HOOK_FUNCTION = "runtime_config_update"
CONFIRM_VERDICT = "plan_confirmation.json"
CONFIRM_EXIT_CODE = 3
CONFIRM_LINE = "bridge-launch: the runtime built a config that differs from the plan"
ENV_LINE = "bridge-launch: the rank's environment differs from the planned launch env"
ENV_SHOWN_BYTES = 120
VERDICT_LINE = "bridge-launch: plan confirmation verdict"
VERDICT_LINE_DIFFS = 8
VERDICT_LINE_VALUE = 200  # characters of a planned or actual value on the line


def _shown_env_value(raw):
    """An env value for a message: escaped (any bytes), cut to ENV_SHOWN_BYTES."""
    text = raw[:ENV_SHOWN_BYTES].decode("utf-8", "backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text + ("..." if len(raw) > ENV_SHOWN_BYTES else "")


def env_differences(planned_env, environ):
    """(differences, variables compared): the plan's launch env against `environ` (bytes to
    bytes). An entry with `hex` must hold exactly those bytes; one without (a secret, or a value
    the rank expands) must only be set, and its value is never shown."""
    diffs, compared = [], 0
    for entry in planned_env or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"]
        got = environ.get(name.encode("utf-8", "surrogateescape"))
        compared += 1
        want_hex = entry.get("hex")
        if not isinstance(want_hex, str):
            if got is None:
                diffs.append({"field": f"env {name}", "key": f"env.{name}",
                              "planned": "set", "actual": "unset"})
            continue
        try:
            want = bytes.fromhex(want_hex)
        except ValueError:
            continue
        if got != want:
            diffs.append({"field": f"env {name}", "key": f"env.{name}",
                          "planned": _shown_env_value(want),
                          "actual": "unset" if got is None else _shown_env_value(got)})
    return diffs, compared
CONFIG_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


# The recipe base's keys (request "planned_base": {table key: text}, the generated tables of
# model/recipe_base.h) at the config path the finalised config holds them, where that is not
# the key itself. Not compared as base values: the comm_overlap fields and the ddp/optimizer
# overlap fields, which the CommOverlapConfig sets at finalisation (the resolved overlap values
# cover them), model.precision (a mixed-precision recipe, not one field), and the CUDA-graph
# pair, which finalisation rewrites (the scope moves into cuda_graph_modules, and `local` with a
# full_iteration scope becomes cuda_graph_impl full_iteration).
BASE_CONFIG_PATHS = {"train.max_steps": "train.train_iters"}
BASE_NOT_COMPARED = {"model.precision", "model.cuda_graph_scope", "model.cuda_graph_impl"} | {
    f"{holder}.{field}" for field, holder in OVERLAP_FIELDS}


def _base_value(text):
    """A base table value (true/false, null, numbers, names, [a,b]) as the config holds it."""
    known, value = _word_value(text)
    if known:
        return value
    if text.startswith("[") and text.endswith("]"):
        return [x for x in text[1:-1].split(",") if x]
    return text


def base_values(planned_base):
    """(config path, value, plan key, None) of the recipe base's values to compare."""
    out = []
    for key, text in (planned_base or {}).items():
        if key in BASE_NOT_COMPARED or key.startswith("comm_overlap.") or "." not in key:
            continue
        if not isinstance(text, str) or not CONFIG_KEY.fullmatch(key):
            continue
        out.append((BASE_CONFIG_PATHS.get(key, key), _base_value(text),
                    f"recipe base {key}", None))
    return out


def planned_values(request):
    """(config path, planned value, plan key, argv word) for each value the plan sets that the
    finalised config must hold: the recipe base's values, run_script.py's config flags, the
    Hydra overrides bridge-launch can read back (booleans, numbers, null) and the resolved
    overlap fields. A later entry for the same path wins (config_differences)."""
    argv = list(request.get("argv") or [])
    out = base_values(request.get("planned_base"))
    words = argv
    if request.get("adapter") == "megatron_bridge":
        flags, words, _ = parse_mb_argv(argv)
        for dest in FLAG_FIELDS:  # the one-field flags (the others set several fields)
            if flags.get(dest) is not None:
                out.append((FLAG_FIELDS[dest], flags[dest], flag_plan_key(dest), None))
    for w in words:
        if "=" not in w:
            continue
        key, text = w.split("=", 1)
        key = key.lstrip("+~")
        if not CONFIG_KEY.fullmatch(key):
            continue  # a flag of the user's script (--lr=0.1), not a config field
        if key in ("comm_overlap", "mixed_precision") or key.startswith("comm_overlap."):
            continue  # objects the runtime expands; their fields are compared below
        known, want = _word_value(text)
        if known:
            out.append((key, want, key, w))
    planned_overlap = request.get("planned_overlap") or {}
    for field, holder in OVERLAP_FIELDS:
        want = planned_overlap.get(field)
        if field in planned_overlap and not isinstance(want, dict):
            out.append((f"{holder}.{field}", want, f"comm_overlap.{field}", None))
    return out


def _confirm_same(want, got):
    """Whether the runtime holds the planned value: as the check compares, and also the same
    number as a bool or an int, or the value's own text (a field typed str)."""
    if _same(want, got):
        return True
    if isinstance(want, (bool, int, float)) and isinstance(got, (bool, int, float)):
        return want == got  # exact: True == 1 == 1.0, but 2**53 + 1 != 2**53
    return isinstance(got, str) and not isinstance(want, str) and \
        got == json.dumps(want).strip('"')


def config_differences(cfg, planned):
    """(differences, values compared, fields not compared): the planned values the finalised
    config holds differently. A field planned twice (an override and a resolved overlap field)
    is compared once, as the later entry names it. Not compared, as the runtime fills them in
    itself or does not have them: a planned null (finalisation derives it, e.g. lr_decay_iters)
    and a path the config does not have (a key of the script's own, not Megatron-Bridge's)."""
    out, compared, skipped = [], 0, []
    last = {path: i for i, (path, _, _, _) in enumerate(planned)}
    for i, (path, want, key, word) in enumerate(planned):
        if last[path] != i:
            continue
        got = jsonable(read_path(cfg, path))
        if want is None or got == _MISSING:
            skipped.append(path)
            continue
        compared += 1
        if not _confirm_same(want, got):
            out.append({"field": path, "key": key, "arg": word, "planned": want, "actual": got})
    return out, compared, skipped


def _rank():
    for name in ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"):
        if os.environ.get(name, "").isdigit():
            return int(os.environ[name])
    return 0


class _Confirmation:
    """One process's confirmation: the hook, the verdict, the exit on a difference."""

    def __init__(self, request_path, verdict_path=None):
        with open(request_path, encoding="utf-8") as f:
            self.request = json.load(f)
        self.verdict_path = verdict_path or os.path.join(
            os.path.dirname(os.path.abspath(request_path)), CONFIRM_VERDICT)
        self.host = socket.gethostname()
        self.rank = _rank()
        self.start = time.time()
        self.done = False
        self.env_diffs, self.env_compared = env_differences(self.request.get("planned_env"),
                                                            getattr(os, "environb", {}))

    def write_verdict(self, verdict, every_rank=False):
        """Rank 0 writes the verdict; on a difference every rank does (the same fields, its own
        rank number), because the scheduler may kill rank 0 once another rank has exited."""
        if self.rank != 0 and not every_rank:
            return
        verdict.update(rank=self.rank, host=self.host,
                       seconds=round(time.time() - self.start, 2),
                       hook=f"{CONFIRM_HOOK_MODULE}.{CONFIRM_HOOK_FUNCTION}")
        # In the rank's own log whatever the file holds: where only the log is read back
        # (Kubernetes), each pod's ranks say it themselves.
        self.say_verdict(verdict)
        # A difference already on record stays: a rank that confirmed (configs may differ by
        # rank) or the at-exit note must not replace it, nor need 4096 ranks write it again.
        with contextlib.suppress(OSError, ValueError):
            with open(self.verdict_path, encoding="utf-8") as f:
                if json.load(f).get("confirmed") is False:
                    return
        tmp = f"{self.verdict_path}.{self.host}.{self.rank}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(verdict, f)
                f.write("\n")
            os.replace(tmp, self.verdict_path)
        except OSError as e:
            sys.stderr.write(f"bridge-launch: cannot write {self.verdict_path}: {e}\n")

    @staticmethod
    def say_verdict(verdict):
        """The verdict as one line on stderr (VERDICT_LINE, then JSON), for where the job dir
        cannot be read from the submitting host: `status` finds it at the head of the log
        (Kubernetes pod logs). The lists are cut so the line stays short."""
        def cut(value):
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            return text if len(text) <= VERDICT_LINE_VALUE else text[:VERDICT_LINE_VALUE] + "..."

        shown = dict(verdict)
        shown["differences"] = [
            {k: cut(v) if k in ("planned", "actual") else v for k, v in d.items()}
            for d in list(verdict.get("differences") or [])[:VERDICT_LINE_DIFFS]
            if isinstance(d, dict)]
        shown.pop("not_compared", None)
        try:
            text = json.dumps(shown, allow_nan=False, default=str)
        except ValueError:  # a NaN or infinity among the values: as text
            text = json.dumps(json.loads(json.dumps(shown, default=str), parse_constant=str))
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        with contextlib.suppress(OSError):
            os.write(2, (VERDICT_LINE + " " + text + "\n").encode("utf-8", "replace"))

    def confirm(self, cfg):
        if self.done:
            return
        self.done = True
        planned = planned_values(self.request)
        diffs, compared, skipped = config_differences(cfg, planned)
        versions = {}
        for name in ("megatron.bridge", "megatron.core"):
            mod = sys.modules.get(name)
            if mod is not None:
                versions[name] = getattr(mod, "__version__", "?")
        self.write_verdict({"confirmed": not diffs, "compared": compared,
                            "env_compared": self.env_compared,
                            "not_compared": skipped, "differences": diffs,
                            "versions": versions}, every_rank=bool(diffs))
        if not diffs:
            return
        lines = [f"{CONFIRM_LINE}: {d['field']} is {json.dumps(d['actual'])}, "
                 f"planned {json.dumps(d['planned'])} (plan key {d['key']})" for d in diffs]
        lines.append(f"bridge-launch: rank {self.rank} stops before training "
                     f"(exit {CONFIRM_EXIT_CODE}); see `bridge-launch why`")
        # To the process's own stderr: the runtime may have redirected sys.stderr meanwhile.
        with contextlib.suppress(Exception):
            sys.stdout.flush()
        os.write(2, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
        os._exit(CONFIRM_EXIT_CODE)

    def check_env(self):
        """Stops the rank before SCRIPT starts when its environment is not the planned one."""
        if not self.env_diffs:
            return
        self.done = True
        self.write_verdict({"confirmed": False, "compared": 0, "env_compared": self.env_compared,
                            "differences": self.env_diffs}, every_rank=True)
        lines = [f"{ENV_LINE}: {d['field']} is {d['actual']}, planned {d['planned']}"
                 for d in self.env_diffs]
        lines.append(f"bridge-launch: rank {self.rank} stops before its runtime starts "
                     f"(exit {CONFIRM_EXIT_CODE}); see `bridge-launch why`")
        os.write(2, ("\n".join(lines) + "\n").encode("utf-8", "replace"))
        os._exit(CONFIRM_EXIT_CODE)

    def hook(self, module):
        """Wraps the finalisation of the module that was just imported."""
        original = getattr(module, CONFIRM_HOOK_FUNCTION, None)
        if not callable(original):
            return

        def runtime_config_update(config, *args, **kwargs):
            result = original(config, *args, **kwargs)
            try:
                self.confirm(config)
            except Exception as e:  # noqa: BLE001  (the check's own failure must not stop training)
                self.done = True
                self.write_verdict({"confirmed": None, "compared": 0, "differences": [],
                                    "note": f"the confirmation itself failed: {error_text(e)}"})
            return result

        runtime_config_update.__wrapped__ = original
        setattr(module, CONFIRM_HOOK_FUNCTION, runtime_config_update)

    def at_exit(self):
        if not self.done:
            self.write_verdict({"confirmed": None, "compared": 0, "differences": [],
                                "note": "the runtime ended without finalising a config through "
                                        f"{CONFIRM_HOOK_MODULE}.{CONFIRM_HOOK_FUNCTION}"})


class _HookFinder:
    """A meta path finder that wraps CONFIRM_HOOK_MODULE's loader once: the module is patched
    right after it ran, before any other module can import the function from it, and nothing
    is imported earlier than the runtime itself imports it."""

    def __init__(self, on_loaded):
        self.on_loaded = on_loaded

    def find_spec(self, name, path=None, target=None):
        if name != CONFIRM_HOOK_MODULE:
            return None
        sys.meta_path.remove(self)
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            self.on_loaded(module)

        spec.loader.exec_module = exec_module
        return spec


def confirm_main(args):
    """`--confirm REQUEST [--verdict FILE] -- SCRIPT ARGS...`: runs SCRIPT under the
    confirmation hook. FILE (default: CONFIRM_VERDICT beside REQUEST) is where the verdict goes
    when REQUEST is on a read-only volume (a Kubernetes ConfigMap)."""
    verdict_path = None
    if len(args) >= 4 and args[0] == "--confirm" and args[2] == "--verdict":
        verdict_path = args[3]
        args = args[:2] + args[4:]
    if len(args) < 4 or args[0] != "--confirm" or args[2] != "--":
        sys.stderr.write("usage: bridge_plan_confirm.py --confirm REQUEST [--verdict FILE] "
                         "-- SCRIPT [ARGS...]\n")
        return 2
    import atexit
    import runpy
    confirmation = _Confirmation(args[1], verdict_path)
    confirmation.check_env()
    if CONFIRM_HOOK_MODULE in sys.modules:
        confirmation.hook(sys.modules[CONFIRM_HOOK_MODULE])
    else:
        sys.meta_path.insert(0, _HookFinder(confirmation.hook))
    atexit.register(confirmation.at_exit)
    script = args[3]
    sys.argv = [script] + args[4:]
    # As `python SCRIPT`: the script's own directory first on the path (run_script.py imports
    # its sibling modules), not this file's (which is not there under PYTHONSAFEPATH).
    here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path.pop(0)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    runpy.run_path(script, run_name="__main__")
    return 0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--confirm":
        sys.exit(confirm_main(sys.argv[1:]))
    try:
        request = json.load(sys.stdin)
    except ValueError as e:
        sys.stdout.write(json.dumps({"ok": False, "error": f"bad request: {e}"}) + "\n")
        return
    sys.stdout.write(json.dumps(check(request)) + "\n")


if __name__ == "__main__":
    main()
