"""NVIDIA's whole EP-overlap smoke-test command as recipe keys (run_conformance.py runs it).

The guide tells users to run run_script.py with a set of flags and three Hydra overrides.
examples/named/qwen3-30b-a3b-guide-command.yaml writes that command as recipe keys. This
check plans the example and asks the release to build two ConfigContainers through the whole
config path: one from the plan's argv, one from the guide's literal command. Every leaf must
be equal (fidelity-config-differs otherwise), and validate must accept the example.
"""
import os

EXAMPLE = os.path.join("examples", "named", "qwen3-30b-a3b-guide-command.yaml")
CASE_ID = "guide-command"

# The guide's command after `python run_script.py`, word for word.
GUIDE_ARGV = (
    "-m qwen -mr qwen3_30b_a3b --task pretrain -g h100 -c bf16 -ng 16 -gn 8 --max_steps 8 "
    "--config_variant v1 --cuda_graph_impl none --moe_flex_dispatcher_backend None "
    "--moe_a2a_overlap false --tokenizer_type NullTokenizer "
    "comm_overlap.overlap_moe_expert_parallel_comm=true comm_overlap.delay_wgrad_compute=true "
    "model.moe_shared_expert_overlap=false").split()


def _case(case_id, words, parse_mb_argv, config_flags):
    flags, rest, _ = parse_mb_argv(words)
    perf = {k: flags.get(k) for k in ("model_family_name", "model_recipe_name", "gpu",
                                      "compute_dtype")}
    perf.update(task=flags.get("task") or "pretrain", num_gpus=flags.get("num_gpus"),
                config_variant=flags.get("config_variant"))
    return {"id": case_id, "mode": "perf_script", "world_size": perf["num_gpus"],
            "gpu": perf["gpu"], "te_version": "2.9.0", "read": [], "perf": perf,
            "flags": {k: v for k, v in flags.items() if k in config_flags}, "overrides": rest}


def build(bl, source, parse_mb_argv, config_flags):
    """(the harness case, the plan's facts) of the example against the guide's command."""
    path = os.path.join(source, EXAMPLE)
    rc, plan, err = bl.plan(path, [])
    vrc, vout = bl.validate(path, [])
    facts = {"plan_rc": rc, "plan_err": err, "validate_rc": vrc, "validate_out": vout,
             "argv": (plan or {}).get("argv") or []}
    if plan is None:
        return None, facts
    case = _case(CASE_ID, facts["argv"][2:], parse_mb_argv, config_flags)
    case["reference"] = _case(CASE_ID + "/reference", GUIDE_ARGV, parse_mb_argv, config_flags)
    return case, facts


def check(facts, results):
    """Findings of the guide-command case (dicts with class, case, key, message)."""
    out = []
    res = results.get(CASE_ID)
    if facts["validate_rc"] != 0 or not res:
        out.append({"class": "fidelity-validate-refuses", "case": CASE_ID, "key": "",
                    "message": f"validate exit {facts['validate_rc']} (plan exit "
                               f"{facts['plan_rc']}): {facts['validate_out'][-400:]}"})
        return out
    for side in ("plan", "reference"):
        summary = res[side]
        why = (summary.get("base_error") or summary.get("flag_error")
               or summary.get("batch_error") or summary.get("harness_error")
               or (None if (summary.get("finalize") or {}).get("ok")
                   else (summary.get("finalize") or {}).get("message")))
        if why or summary.get("refused_overrides"):
            out.append({"class": "fidelity-plan-argv-refused", "case": CASE_ID, "key": side,
                        "message": f"the release refuses the {side} command line: "
                                   f"{why or summary['refused_overrides']}"[:600]})
    if res["n_differs"]:
        shown = "; ".join(f"{p}: plan {a!r}, guide {b!r}" for p, a, b in res["differs"][:6])
        out.append({"class": "fidelity-config-differs", "case": CASE_ID,
                    "key": res["differs"][0][0],
                    "message": f"{res['n_differs']} leaves differ: {shown}"[:900]})
    return out
