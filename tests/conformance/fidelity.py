"""Fidelity to the named recipe (run_conformance.py runs it; tests/conformance/README.md).

A user names one of NVIDIA's tuned performance recipes and changes one knob at a time. The job
that runs must be that recipe plus the knob, nothing else. For every row of the perf-recipe
table (model/megatron_bridge_perf_recipes.cpp: model recipe, task, GPU, dtype, GPU count) this
module writes a recipe that names it and sets nothing else, plans it with bridge-launch, and
asks the release to build two ConfigContainers through the whole config path (the recipe
function, the Hydra overrides, run_script.py's flag layer, runtime_config_update):

  (a) from the plan's argv, and from the bare run_script.py command for the same intent
      (-m -mr -g -c -ng -gn --task): every leaf must be equal, and `validate` must accept the
      plan exactly when the release builds the bare command;
  (b) for one row per model recipe, each overlap knob and two layout keys (context
      parallelism off, half the expert parallelism) changed alone: the plan's argv against the
      bare command plus that one override or run_script.py flag as a careful engineer would
      type it. Equal leaves mean the plan changed that knob and what the release derives from
      it, nothing else. The plan side is planned exactly as `ablate --vary KNOB=VALUE` plans
      its variant (launcher/cli_job_commands.cpp plan_variants): the named recipe with the
      knob as one more command-line override, so these cases check ablate's variants too.

  (c) for every row of the library-recipe table (model/megatron_bridge_library_recipe_base.cpp,
      the hydra adapter's base), a recipe that names the function as run_recipe.py's
      `--recipe NAME` with the hydra adapter and sets nothing else, on as many GPUs as the
      recipe's own layout needs: the config the function builds with the plan's Hydra
      overrides against the one it builds with none. Equal leaves mean the hydra adapter
      sends no key the user did not set, or sends it equal to the recipe's.

Rows the release cannot build offline (a Hub config the suite's cache lacks, a file the wheel
does not package) are counted with the reason, not failed.
"""
import math
import os
import re
import subprocess

import perf_recipe_table

DTYPE_FLAG = {"bf16": "bf16", "fp8cs": "fp8_cs", "fp8mx": "fp8_mx", "fp8sc": "fp8_sc",
              "nvfp4": "nvfp4"}

# (b): knob -> the value written, where the base recipe's own value is not already that value.
KNOBS = [
    ("comm_overlap.overlap_grad_reduce", False),
    ("comm_overlap.overlap_param_gather", False),
    ("comm_overlap.delay_wgrad_compute", True),
    ("comm_overlap.overlap_moe_expert_parallel_comm", True),
    ("comm_overlap.tp_comm_overlap", False),
    ("comm_overlap.overlap_p2p_comm", False),
]


def topology_knobs(base):
    """(key, value, run_script.py flag) of the layout changes tried alone on a row: context
    parallelism off where the recipe has it, half the expert parallelism where it has some.
    A careful engineer types them as run_script.py flags."""
    out = []
    cp = int(base.get("model.context_parallel_size", "1") or 1)
    if cp > 1:
        out.append(("model.context_parallel_size", 1, "context_parallel_size"))
    ep = int(base.get("model.expert_model_parallel_size", "1") or 1)
    if ep > 1 and ep % 2 == 0:
        out.append(("model.expert_model_parallel_size", ep // 2, "expert_model_parallel_size"))
    return out


def _text(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def rows(source):
    """(model recipe, task, gpu, dtype, count, function) of every perf-recipe table row."""
    with open(os.path.join(source, "model", "megatron_bridge_perf_recipes.cpp")) as f:
        table = perf_recipe_table.table_from_source(f.read())
    for (mr, task, gpu, dtype), counts in sorted(table.items()):
        for n in counts:
            yield mr, task, gpu, dtype, n, f"{mr}_{task}_{n}gpu_{gpu}_{dtype}_config"


def bases(source):
    with open(os.path.join(source, "model", "megatron_bridge_perf_recipe_base.cpp")) as f:
        return perf_recipe_table.base_from_source(f.read())


def recipe_text(mr, task, gpu, dtype, n):
    family = re.split(r"[_\d]", mr)[0] or mr
    return (f"name: fidelity\n"
            f"cluster: {{gpu: {gpu}, num_gpus: {n}}}\n"
            f"model: {{family: {family}, recipe: {mr}, compute_dtype: {DTYPE_FLAG[dtype]}}}\n"
            f"train: {{task: {task}}}\n"
            f"runtime: {{adapter: megatron_bridge, command: [python, run_script.py], "
            f"transformer_engine: '2.9.0'}}\n"
            f"executor: {{default: slurm}}\n")


def bare_case(rid, mr, task, gpu, dtype, n, overrides=()):
    return {"id": rid + "/reference", "mode": "perf_script", "world_size": n, "gpu": gpu,
            "te_version": "2.9.0", "read": [],
            "perf": {"model_family_name": mr, "model_recipe_name": mr, "task": task,
                     "num_gpus": n, "gpu": gpu, "compute_dtype": DTYPE_FLAG[dtype]},
            "flags": {}, "overrides": list(overrides)}


def plan_case(rid, row, plan, parse_mb_argv, config_flags):
    mr, task, gpu, dtype, n, _ = row
    payload = (plan or {}).get("argv") or []
    payload = payload[2:]  # runtime.command: python run_script.py
    flags, rest, _ = parse_mb_argv(payload)
    case = bare_case(rid, mr, task, gpu, dtype, n)
    case["id"] = rid
    case["flags"] = {k: v for k, v in flags.items() if k in config_flags}
    case["overrides"] = rest
    case["planned_base"] = ((plan or {}).get("recipe_base") or {}).get("values") or {}
    return case


def build(binary_plan, source, tmp, parse_mb_argv, config_flags):
    """The fidelity items: [(rid, kind, row, knob, plan json, plan exit, case)] and the rows
    left out with why."""
    known = bases(source)
    items, left_out = [], {}
    seen_models = set()
    os.makedirs(os.path.join(tmp, "fidelity"), exist_ok=True)
    for row in rows(source):
        mr, task, gpu, dtype, n, fn = row
        base = known.get(fn)
        if base is None or "needs_hub_config" in base:
            left_out[fn] = ("needs the Hugging Face config of " + base["needs_hub_config"]
                            if base else "does not build from the release's package")
            continue
        variants = [("named", None)]
        model_key = (mr, task)
        if model_key not in seen_models and base.get("comm_overlap") != "null":
            seen_models.add(model_key)
            for knob, value in KNOBS:
                if base.get(knob) != _text(value):
                    variants.append(("knob", (knob, value)))
            variants += [("knob", k) for k in topology_knobs(base)]
        path = os.path.join(tmp, "fidelity", re.sub(r"[^A-Za-z0-9_.=-]", "_", fn) + ".yaml")
        with open(path, "w") as f:
            f.write(recipe_text(mr, task, gpu, dtype, n))
        for kind, knob in variants:
            rid = f"fidelity/{fn}" + (f"/{knob[0]}={_text(knob[1])}" if knob else "")
            # As ablate plans a variant: the knob as one more override of the named recipe.
            overrides = [f"{knob[0]}={_text(knob[1])}"] if knob else []
            items.append({"rid": rid, "kind": kind, "row": row, "knob": knob, "path": path,
                          "overrides": overrides})
    return items, left_out


# (c) The library recipes of the hydra adapter ------------------------------------------------

LIBRARY_COMMAND = ["python", "run_recipe.py", "--recipe"]


def library_bases(source):
    with open(os.path.join(source, "model", "megatron_bridge_library_recipe_base.cpp")) as f:
        return perf_recipe_table.base_from_source(f.read())


def _lcm(a, b):
    return a * b // math.gcd(a, b)


def _size(base, key, default=1):
    text = base.get(key) or ""
    return int(text) if text.isdigit() else default


def library_cluster(fn, base):
    """(gpu, num_gpus, gpus_per_node) that fit the recipe's own layout (topology checks T1-T3,
    T7): the count its name says where that fits, else the least multiple of tp*pp*cp and
    etp*ep*pp (etp unset is tp, as in Megatron-Core) whose data-parallel size divides the
    global batch in micro batches."""
    tp, pp, cp = (_size(base, f"model.{k}_parallel_size") for k in
                  ("tensor_model", "pipeline_model", "context"))
    moe = base.get("model.num_moe_experts", "null") not in ("null", "0")
    ep = _size(base, "model.expert_model_parallel_size")
    etp = _size(base, "model.expert_tensor_parallel_size", tp)
    step = _lcm(tp * pp * cp, ep * etp * pp if moe else 1)
    gbs, mbs = _size(base, "train.global_batch_size", 0), _size(base, "train.micro_batch_size")

    def fits(n):
        return n % step == 0 and (not gbs or gbs % (mbs * (n // (tp * pp * cp))) == 0)

    named = re.search(r"_(\d+)gpu_([a-z]+\d*)_", fn)
    gpu = named.group(2) if named else "h100"
    counts = ([int(named.group(1))] if named else []) + [step * k for k in range(1, 65)]
    n = next((c for c in counts if fits(c)), step)
    node = 4 if gpu.startswith("gb") else 8
    return gpu, n, max(d for d in range(1, node + 1) if n % d == 0)


def library_recipe_text(fn, gpu, n, gn):
    return (f"name: fidelity-library\n"
            f"cluster: {{gpu: {gpu}, num_gpus: {n}, gpus_per_node: {gn}}}\n"
            f"runtime: {{adapter: hydra, command: [{', '.join(LIBRARY_COMMAND)}, {fn}], "
            f"transformer_engine: '2.9.0'}}\n"
            f"executor: {{default: slurm}}\n")


def build_library(source, tmp):
    """The library items (kind "library", row (fn, gpu, n)) and the rows left out with why."""
    items, left_out = [], {}
    os.makedirs(os.path.join(tmp, "fidelity-library"), exist_ok=True)
    for fn, base in sorted(library_bases(source).items()):
        hub = base.get("needs_hub_config")
        if hub:
            left_out[fn] = ("does not build from the release's package" if hub == "-"
                            else "needs the Hugging Face config of " + hub)
            continue
        gpu, n, gn = library_cluster(fn, base)
        path = os.path.join(tmp, "fidelity-library", re.sub(r"[^A-Za-z0-9_.=-]", "_", fn) + ".yaml")
        with open(path, "w") as f:
            f.write(library_recipe_text(fn, gpu, n, gn))
        items.append({"rid": f"fidelity-library/{fn}", "kind": "library", "row": (fn, gpu, n),
                      "knob": None, "path": path, "overrides": []})
    return items, left_out


def library_case(rid, fn, gpu, n, overrides):
    return {"id": rid, "mode": "recipe", "recipe_function": fn, "world_size": n, "gpu": gpu,
            "te_version": "2.9.0", "read": [], "flags": {}, "overrides": list(overrides)}


def library_pair(it):
    """The plan's Hydra overrides (its argv after runtime.command) against none."""
    fn, gpu, n = it["row"]
    plan = it["plan"] or {}
    case = library_case(it["rid"], fn, gpu, n, (plan.get("argv") or [])[len(LIBRARY_COMMAND) + 1:])
    case["planned_base"] = (plan.get("recipe_base") or {}).get("values") or {}
    case["reference"] = library_case(it["rid"] + "/reference", fn, gpu, n, [])
    return case


def plan_all(bl, items):
    for it in items:
        rc, plan, err = bl.plan(it["path"], it["overrides"])
        vrc, vout = bl.validate(it["path"], it["overrides"])
        it.update(plan_rc=rc, plan=plan, plan_err=err, validate_rc=vrc, validate_out=vout)


def cases(items, parse_mb_argv, config_flags):
    out = []
    for it in items:
        if it["kind"] == "library":
            out.append(library_pair(it))
            continue
        mr, task, gpu, dtype, n, _ = it["row"]
        case = plan_case(it["rid"], it["row"], it["plan"], parse_mb_argv, config_flags)
        knob = it["knob"]
        flag = knob[2] if knob and len(knob) > 2 else None
        overrides = [f"{knob[0]}={_text(knob[1])}"] if knob and not flag else []
        case["reference"] = bare_case(it["rid"], mr, task, gpu, dtype, n, overrides)
        if flag:
            case["reference"]["flags"] = {flag: knob[1]}
        out.append(case)
    return out


def _refused(summary):
    fin = summary.get("finalize") or {}
    why = (summary.get("base_error") or summary.get("harness_error") or summary.get("flag_error")
           or summary.get("batch_error") or (None if fin.get("ok") else fin.get("message")))
    if summary.get("refused_overrides"):
        why = why or "refused overrides: " + "; ".join(
            f"{k}: {v}" for k, v in summary["refused_overrides"].items())
    return why


def check(items, results):
    """Findings (dicts with class, case, key, message) and counts for the report."""
    findings, counts = [], {"named": 0, "knob": 0, "library": 0, "equal": 0,
                                "library_equal": 0, "release_refuses_bare": 0,
                                "library_release_refuses": 0}
    for it in items:
        rid = it["rid"]
        counts[it["kind"]] += 1
        res = results.get(rid)
        if it["plan"] is None or not res:
            findings.append({"class": "fidelity-no-result", "case": rid, "key": "",
                             "message": f"plan exit {it['plan_rc']}: {it['plan_err'][-300:]}"})
            continue
        ref_why = _refused(res["reference"])
        plan_ok = it["validate_rc"] == 0
        if ref_why and it["kind"] in ("named", "library"):
            counts["library_release_refuses" if it["kind"] == "library"
                   else "release_refuses_bare"] += 1
        if plan_ok and ref_why:
            findings.append({"class": "fidelity-validate-accepts-refused", "case": rid, "key": "",
                             "message": f"validate accepts, the release refuses: {ref_why[:400]}"})
        elif not plan_ok and not ref_why:
            lines = [ln for ln in it["validate_out"].splitlines() if "error" in ln][:3]
            codes = sorted(set(re.findall(r"error: .*\[([a-z0-9-]+)\]$",
                                          it["validate_out"], re.M)))
            findings.append({"class": "fidelity-validate-refuses", "case": rid,
                             "key": ",".join(codes),
                             "message": "validate refuses what the release builds: "
                                        + " | ".join(lines)[:600]})
        plan_why = _refused(res["plan"])
        if plan_ok and plan_why and not ref_why:
            findings.append({"class": "fidelity-plan-argv-refused", "case": rid, "key": "",
                             "message": f"the release refuses the plan's argv: {plan_why[:400]}"})
        # A refused plan has no argv to compare, and a build the release stopped before it
        # finalised compares configs that no job runs.
        stopped = any(s.get(k) for s in (res["plan"], res["reference"])
                      for k in ("base_error", "flag_error", "batch_error", "harness_error"))
        if plan_ok and not stopped and res["n_differs"]:
            shown = "; ".join(f"{p}: plan {a!r}, reference {b!r}" for p, a, b in res["differs"][:6])
            findings.append({"class": "fidelity-config-differs", "case": rid,
                             "key": res["differs"][0][0],
                             "message": f"{res['n_differs']} leaves differ: {shown}"[:900]})
        elif not plan_why and not ref_why:
            counts["library_equal" if it["kind"] == "library" else "equal"] += 1
        if plan_ok and not stopped and res.get("base_differs"):
            shown = "; ".join(f"{d['field']}: planned {d['planned']!r}, finalised {d['actual']!r}"
                              for d in res["base_differs"][:6])
            findings.append({"class": "fidelity-base-not-confirmed", "case": rid,
                             "key": res["base_differs"][0]["field"],
                             "message": "the confirmation at start would stop the job: "
                                        + shown[:900]})
    return findings, counts
