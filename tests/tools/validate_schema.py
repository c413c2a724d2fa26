#!/usr/bin/env python3
"""`bridge-launch schema` checked with a standard JSON Schema validator (python3-jsonschema).

1. The schema is a valid draft-07 schema.
2. Every example recipe (examples/**/*.yaml, *.yml) validates against it.
3. Every recipe of the test corpora that `bridge-launch validate` accepts validates too: the
   schema never refuses what the loader accepts.
4. Recipes with a wrong type, an unknown key, a bad enum value, a number out of range, an
   unknown plugin or a bad env entry fail validation, and `bridge-launch validate` refuses
   them as well (so each negative case is a real error, not a schema invention).

YAML is read the way yaml-language-server reads it (YAML 1.2 core schema): only
true/True/TRUE/false/False/FALSE are booleans (PyYAML's YAML 1.1 would also take yes/no/on/off,
which the loader refuses as booleans and keeps as text), and dates stay text. The loader's own
boolean rules are parse_bool in model/recipe_loader.cpp.

Usage: validate_schema.py BRIDGE_LAUNCH_BIN SOURCE_DIR
"""
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

try:
    import jsonschema
    import yaml
except ImportError as e:  # a fresh machine: scripts/install-deps.sh installs both
    print(f"validate_schema: {e}; install python3-jsonschema and python3-yaml "
          "(scripts/install-deps.sh)", file=sys.stderr)
    sys.exit(1)


class Yaml12Loader(yaml.SafeLoader):
    """PyYAML's SafeLoader with the YAML 1.2 core schema's scalars."""


_REPLACED = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
             "tag:yaml.org,2002:timestamp"}
Yaml12Loader.yaml_implicit_resolvers = {
    first: [r for r in resolvers if r[0] not in _REPLACED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF"))
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:int", re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
    list("-+0123456789"))
Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
               r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"),
    list("-+0123456789."))


def _construct_int(loader, node):
    text = loader.construct_scalar(node)
    digits = text.lstrip("+-")
    value = int(digits[2:], 8 if digits[1] == "o" else 16) if digits[:2] in ("0o", "0x") \
        else int(digits, 10)
    return -value if text.startswith("-") else value


Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_yaml(text):
    def keys_as_text(node):  # JSON keys are strings, and so are the loader's
        if isinstance(node, dict):
            return {str(k): keys_as_text(v) for k, v in node.items()}
        if isinstance(node, list):
            return [keys_as_text(v) for v in node]
        return node
    return keys_as_text(yaml.load(text, Loader=Yaml12Loader))


def loader_accepts(binary, path):
    r = subprocess.run([binary, "validate", path], capture_output=True, timeout=60)
    return r.returncode == 0


def errors_of(validator, doc):
    return sorted(f"{'.'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
                  for e in validator.iter_errors(doc))


# Each must fail the schema (and the loader); the comment says why.
NEGATIVE = {
    "wrong-type-integer": "name: x\nmodel:\n  tensor_model_parallel_size: \"4\"\n",
    "wrong-type-boolean": "name: x\nmodel:\n  sequence_parallel: yes\n",
    "unknown-key": "name: x\nmodel:\n  tensor_parallel_size: 4\n",
    "unknown-top-level-key": "name: x\nmodle: {}\n",
    "bad-enum": "name: x\nmodel:\n  moe_token_dispatcher_type: all2all\n",
    "below-minimum": "name: x\ncluster:\n  num_gpus: 0\n",
    "above-maximum": "name: x\nexecutor:\n  slurm:\n    retries: 1001\n",
    "section-not-mapping": "name: x\ncomm_overlap: true\n",
    "list-not-list": "name: x\nmodel:\n  recompute_modules: core_attn\n",
    "unknown-executor": "name: x\nexecutor:\n  default: lsf\n",
    "unknown-plugin": "name: x\nplugins:\n  perf_envv: {}\n",
    "plugin-options-scalar": "name: x\nplugins:\n  perf_env: 5\n",
    "env-bad-name": "name: x\nenv:\n  1BAD: v\n",
    "env-null": "name: x\nenv:\n  FOO: null\n",
    "env-long-form-unknown-key": "name: x\nenv:\n  FOO: {value: a, secrett: true}\n",
    "env-long-form-no-value": "name: x\nenv:\n  FOO: {secret: true}\n",
    "no-name": "cluster: {num_gpus: 8}\n",
    "transformer-engine-true": "name: x\nruntime:\n  transformer_engine: true\n",
    "overlap-env-key": "name: x\ncomm_overlap:\n  NCCL_DEBUG: INFO\n",
}


def main():
    binary, source = sys.argv[1], sys.argv[2]
    out = subprocess.run([binary, "schema"], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        print(f"FAIL: bridge-launch schema exited {out.returncode}: {out.stderr}")
        return 1
    schema = json.loads(out.stdout)
    jsonschema.Draft7Validator.check_schema(schema)
    validator = jsonschema.Draft7Validator(schema)
    failures = []

    examples = sorted(set(glob.glob(os.path.join(source, "examples", "**", "*.yaml"),
                                    recursive=True) +
                          glob.glob(os.path.join(source, "examples", "**", "*.yml"),
                                    recursive=True)))
    if not examples:
        failures.append("no example recipes found under examples/")
    for path in examples:
        with open(path, encoding="utf-8") as f:
            errors = errors_of(validator, load_yaml(f.read()))
        if errors:
            failures.append(f"{os.path.relpath(path, source)} fails the schema: {errors}")
    print(f"{len(examples)} example recipes validate")

    # The loader accepts => the schema accepts, over the test corpora.
    corpus = sorted(glob.glob(os.path.join(source, "tests", "data", "**", "*.yaml"),
                              recursive=True) +
                    glob.glob(os.path.join(source, "tests", "fuzz", "corpus", "**", "*.yaml"),
                              recursive=True))
    accepted = 0
    for path in corpus:
        if not loader_accepts(binary, path):
            continue
        accepted += 1
        try:
            with open(path, encoding="utf-8") as f:
                doc = load_yaml(f.read())
        except (yaml.YAMLError, UnicodeDecodeError) as e:
            failures.append(f"{os.path.relpath(path, source)}: the loader accepts it, PyYAML "
                            f"cannot read it: {e}")
            continue
        errors = errors_of(validator, doc)
        if errors:
            failures.append(f"{os.path.relpath(path, source)}: the loader accepts it, the "
                            f"schema refuses it: {errors}")
    print(f"{accepted} recipes of the test corpora that validate also pass the schema")

    with tempfile.TemporaryDirectory() as tmp:
        for name, text in NEGATIVE.items():
            if not errors_of(validator, load_yaml(text)):
                failures.append(f"negative case {name} passes the schema:\n{text}")
            path = os.path.join(tmp, name + ".yaml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
            if loader_accepts(binary, path):
                failures.append(f"negative case {name} is accepted by bridge-launch validate "
                                f"(not a real error):\n{text}")
    print(f"{len(NEGATIVE)} wrong recipes fail the schema")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
