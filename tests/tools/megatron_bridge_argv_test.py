#!/usr/bin/env python3
"""The megatron_bridge adapter's argv, parsed as Megatron-Bridge's run_script.py parses it.

A replica of the run_script.py flags bridge-launch emits (scripts/performance/argument_parser.py:
names, types, choices, required flags; the real parser has many more flags that bridge-launch
never emits) parses `argv` from `bridge-launch plan --format json`; the positional KEY=VALUE
words left over are the Hydra overrides run_script.py applies to its ConfigContainer. For every
example recipe that targets Megatron-Bridge, and for command-line variations of them, the
parsed values must equal the plan's topology and sizes for the keys the recipe sets, flags
for keys it leaves unset must be absent (the recipe base decides them), and every user-set
overlap field must arrive as written, with no other comm_overlap field.

The replica mirrors NVIDIA-NeMo/Megatron-Bridge scripts/performance/argument_parser.py of the
release branch r0.6.0 at commit 6124fbe38a68eea9c4f4be3aa5e084bd5d461d98 (the newest release
branch; the wheel of 0.6.2 does not ship scripts/). Whether the values then land in the
release's config is the conformance suite's job (tests/conformance/).

Usage: megatron_bridge_argv_test.py BRIDGE_LAUNCH_BIN SOURCE_DIR
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml


def replica_parser():
    p = argparse.ArgumentParser(prog="run_script.py", allow_abbrev=False)
    p.add_argument("-m", "--model_family_name", type=str.lower, required=True)
    p.add_argument("-mr", "--model_recipe_name", type=str.lower, required=True)
    p.add_argument("-g", "--gpu", type=str.lower, required=True,
                   choices=["h100", "b200", "b300", "gb200", "gb300", "vr200", "r100"])
    p.add_argument("-c", "--compute_dtype", type=str.lower,
                   choices=["bf16", "fp8_cs", "fp8_mx", "fp8_sc", "nvfp4"])
    p.add_argument("-ng", "--num_gpus", type=int, required=True)
    p.add_argument("-gn", "--gpus_per_node", type=int)
    p.add_argument("-tp", "--tensor_model_parallel_size", type=int)
    p.add_argument("-pp", "--pipeline_model_parallel_size", type=int)
    p.add_argument("-cp", "--context_parallel_size", type=int)
    p.add_argument("-vp", "--virtual_pipeline_model_parallel_size",
                   type=lambda x: None if x == "None" else int(x), default=-1)
    p.add_argument("-ep", "--expert_model_parallel_size", type=int)
    p.add_argument("-et", "--expert_tensor_parallel_size", type=int, nargs="?", const=None)
    p.add_argument("-gb", "--global_batch_size", type=int)
    p.add_argument("-mb", "--micro_batch_size", type=int)
    p.add_argument("-sl", "--seq_length", type=int)
    p.add_argument("-ms", "--max_steps", type=int)
    p.add_argument("--task", choices=["pretrain", "sft", "peft", "lora"], default="pretrain")
    p.add_argument("--config_variant", type=str)
    p.add_argument("--cuda_graph_impl", choices=["none", "local", "transformer_engine"])
    p.add_argument("--tokenizer_type",
                   choices=["NullTokenizer", "HuggingFaceTokenizer", "SentencePieceTokenizer"])
    p.add_argument("--tokenizer_model", type=str)
    p.add_argument("--vocab_size", type=int, default=32000)
    p.add_argument("--moe_flex_dispatcher_backend", type=lambda x: None if x == "None" else x,
                   choices=["deepep", "hybridep", None], default=-1)
    return p


def plan_json(binary, recipe, extra, home):
    env = dict(os.environ, HOME=home)
    r = subprocess.run([binary, "plan", "--format", "json", recipe, *extra],
                       capture_output=True, text=True, env=env, check=False)
    if r.returncode != 0:
        raise AssertionError(f"plan {recipe} {extra} exited {r.returncode}: {r.stdout}{r.stderr}")
    return json.loads(r.stdout)


def hydra_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    return str(v)


def top_level_fields(obj):
    """The key:value pairs of a Hydra object `{k:v,k:{...},...}`, nested braces kept whole."""
    inner, depth, start, out = obj[1:-1], 0, 0, []
    for i, c in enumerate(inner + ","):
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        elif c == "," and depth == 0:
            key, value = inner[start:i].split(":", 1)
            out.append((key, value))
            start = i + 1
    return out


def check(binary, recipe, extra, home):
    plan = plan_json(binary, recipe, extra, home)
    argv = plan["argv"]
    script = next(i for i, w in enumerate(argv) if w.endswith("run_script.py"))
    args, rest = replica_parser().parse_known_args(argv[script + 1:])
    hydra = {}
    for word in rest:
        assert "=" in word and not word.startswith("-"), f"{recipe}: not a Hydra override: {word}"
        key, value = word.split("=", 1)
        if key == "++comm_overlap" and hydra.get(key) == "null":
            hydra[key] = value  # the section is cleared, then set (docs/recipe.md)
            continue
        assert key not in hydra or hydra[key] == value, f"{recipe}: {key} given twice"
        hydra[key] = value
    # A base recipe without a comm_overlap section gets one new CommOverlapConfig holding the
    # user's fields; otherwise each field the user set is one override.
    section = hydra.pop("++comm_overlap", "")
    if section:
        assert section.startswith(
            "{_target_:megatron.bridge.training.comm_overlap.CommOverlapConfig,"), section
        for field, value in top_level_fields(section):
            hydra["comm_overlap." + field] = value
    with open(recipe) as f:
        doc = yaml.safe_load(f)
    for key in extra:  # trailing overrides win over the file, as in bridge-launch
        path, value = key.split("=", 1)
        section_name, field = path.split(".", 1)
        doc.setdefault(section_name, {})[field] = yaml.safe_load(value)
    model, train, cluster = doc.get("model") or {}, doc.get("train") or {}, doc.get("cluster") or {}
    t = plan["topology"]
    # Always given: what run_script.py needs to pick the recipe and lay out the job.
    expected = {"num_gpus": t["num_gpus"], "gpus_per_node": t["gpus_per_node"], "gpu": t["gpu"]}
    # A key the recipe sets is given with the plan's value; one it leaves unset is not given at
    # all (the recipe base decides it in the runtime as in the plan).
    for name, section_doc, key, planned in [
            ("tensor_model_parallel_size", model, "tensor_model_parallel_size", t["tp"]),
            ("pipeline_model_parallel_size", model, "pipeline_model_parallel_size", t["pp"]),
            ("context_parallel_size", model, "context_parallel_size", t["cp"]),
            ("expert_model_parallel_size", model, "expert_model_parallel_size", t["ep"]),
            ("expert_tensor_parallel_size", model, "expert_tensor_parallel_size", t["etp"]),
            ("seq_length", model, "seq_length", model.get("seq_length")),
            ("global_batch_size", train, "global_batch_size", train.get("global_batch_size")),
            ("micro_batch_size", train, "micro_batch_size", train.get("micro_batch_size")),
            ("max_steps", train, "max_steps", train.get("max_steps"))]:
        expected[name] = planned if section_doc.get(key) is not None else None
    # The keys only run_script.py's flags carry (or whose flag does more than the override).
    for name, section_doc, key in [("config_variant", model, "config_variant"),
                                   ("cuda_graph_impl", model, "cuda_graph_impl"),
                                   ("tokenizer_type", train, "tokenizer_type"),
                                   ("tokenizer_model", train, "tokenizer_model")]:
        expected[name] = section_doc.get(key)
    assert not any(k.endswith((".config_variant", ".tokenizer_type", ".cuda_graph_impl"))
                   for k in hydra), f"{recipe}: a flag-only key sent as an override: {hydra}"
    # `--moe_flex_dispatcher_backend None` is sent only for an alltoall dispatcher the recipe
    # sets over a base with a flex backend (the flag clears it).
    if args.moe_flex_dispatcher_backend != -1:
        assert args.moe_flex_dispatcher_backend is None, args.moe_flex_dispatcher_backend
        assert model.get("moe_token_dispatcher_type") == "alltoall", recipe
        assert "model.moe_token_dispatcher_type" not in hydra, f"{recipe}: sent twice"
    vpp = model.get("virtual_pipeline_model_parallel_size")
    expected["virtual_pipeline_model_parallel_size"] = -1 if vpp is None else t["vpp"]  # -1: absent
    assert cluster.get("gpu") is None or cluster["gpu"] == t["gpu"]
    for name, want in expected.items():
        got = getattr(args, name)
        assert got == want, f"{recipe} {extra}: {name} parsed as {got!r}, plan has {want!r}"
    for field, value in (doc.get("comm_overlap") or {}).items():
        if value is None or field == "tp_comm_overlap_cfg":
            continue
        got = hydra.get("comm_overlap." + field)
        assert got == hydra_value(value), (
            f"{recipe}: comm_overlap.{field} reaches the runtime as {got!r}, the recipe has "
            f"{value!r}")
    sent = {k.split(".", 1)[1] for k in hydra if k.startswith("comm_overlap.")}
    written = {k for k, v in (doc.get("comm_overlap") or {}).items() if v is not None}
    assert sent <= written | {"tp_comm_overlap"}, (
        f"{recipe}: comm_overlap fields the recipe does not set are sent: {sent - written}")
    return plan


def main():
    binary, source = sys.argv[1], sys.argv[2]
    recipes = []
    for path in sorted(glob.glob(os.path.join(source, "examples", "recipes", "*.yaml"))):
        with open(path) as f:
            doc = yaml.safe_load(f)
        if (doc.get("runtime") or {}).get("adapter") == "megatron_bridge":
            recipes.append(path)
    assert len(recipes) >= 2, f"expected Megatron-Bridge examples, found {recipes}"
    variations = [
        [],
        ["cluster.num_gpus=256", "model.tensor_model_parallel_size=8"],
        ["model.virtual_pipeline_model_parallel_size=null", "train.max_steps=20"],
    ]
    checked = 0
    with tempfile.TemporaryDirectory() as home:
        for recipe in recipes:
            for extra in variations:
                try:
                    check(binary, recipe, extra, home)
                    checked += 1
                except AssertionError as e:
                    if "exited 2" in str(e) and extra:
                        continue  # a variation that is invalid for this recipe's layout
                    raise
    assert checked >= len(recipes), f"only {checked} argv vectors checked"
    print(f"megatron_bridge argv: {checked} plans parsed by the run_script.py replica, all match")


if __name__ == "__main__":
    main()
