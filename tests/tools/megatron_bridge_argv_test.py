#!/usr/bin/env python3
"""The megatron_bridge adapter's argv, parsed as Megatron-Bridge's run_script.py parses it.

A replica of the run_script.py flags bridge-launch emits (scripts/performance/argument_parser.py:
names, types, choices, required flags; the real parser has many more flags that bridge-launch
never emits) parses `argv` from `bridge-launch plan --format json`; the positional KEY=VALUE
words left over are the Hydra overrides run_script.py applies to its ConfigContainer. For every
example recipe that targets Megatron-Bridge, and for command-line variations of them, the
parsed values must equal the plan's topology, sizes and every user-set overlap field.

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
    # The comm_overlap section arrives as one CommOverlapConfig object: its fields.
    section = hydra.get("++comm_overlap", "")
    assert section.startswith("{_target_:megatron.bridge.training.comm_overlap.CommOverlapConfig,"), (
        f"{recipe}: comm_overlap section is {section!r}")
    for field, value in top_level_fields(section):
        hydra["comm_overlap." + field] = value
    t = plan["topology"]
    expected = {
        "tensor_model_parallel_size": t["tp"], "pipeline_model_parallel_size": t["pp"],
        "virtual_pipeline_model_parallel_size": t["vpp"], "context_parallel_size": t["cp"],
        "expert_model_parallel_size": t["ep"], "expert_tensor_parallel_size": t["etp"],
        "num_gpus": t["num_gpus"], "gpus_per_node": t["gpus_per_node"], "gpu": t["gpu"],
    }
    with open(recipe) as f:
        doc = yaml.safe_load(f)
    for key in extra:  # trailing overrides win over the file, as in bridge-launch
        path, value = key.split("=", 1)
        section, field = path.split(".", 1)
        doc.setdefault(section, {})[field] = yaml.safe_load(value)
    train = doc.get("train", {})
    for name, key in [("global_batch_size", "global_batch_size"),
                      ("micro_batch_size", "micro_batch_size"), ("max_steps", "max_steps")]:
        if train.get(key) is not None:
            expected[name] = train[key]
    if doc.get("model", {}).get("seq_length") is not None:
        expected["seq_length"] = doc["model"]["seq_length"]
    for name, want in expected.items():
        got = getattr(args, name)
        assert got == want, f"{recipe} {extra}: {name} parsed as {got!r}, plan has {want!r}"
    for field, value in (doc.get("comm_overlap") or {}).items():
        if value is None:
            continue
        want = plan["comm_overlap"][field]["value"]
        if field == "tp_comm_overlap_cfg" and isinstance(value, str):
            # A preset travels as a reference to the release's own object.
            want = "{_target_:megatron.bridge.training.comm_overlap." + value + ",_call_:false}"
        got = hydra.get("comm_overlap." + field)
        assert got == hydra_value(want), (
            f"{recipe}: comm_overlap.{field} reaches the runtime as {got!r}, plan has {want!r}")
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
