// The plan confirmation at start: the job's own runtime checks that it builds the planned
// config, before training (recipe key runtime.confirm).
//
// The runtime check (plan/runtime_check.h) asks a Megatron-Bridge on the login node; the job
// may run another one (its container's), or a wrapper may change a value on the way. So,
// with the megatron_bridge and hydra adapters, the executor ships two files into the job's
// directory: kConfirmProgramFile (the program embedded from python/bridge_config_check.py)
// and kConfirmRequestFile (the planned values: the runtime check's request). Every rank's
// runtime starts through the program (`python PROGRAM --confirm REQUEST -- SCRIPT ARGS`),
// which runs SCRIPT unchanged except for one hook: when the runtime has finalised its config
// (Megatron-Bridge's runtime_config_update, the first thing pretrain does) each rank compares
// it with the planned values. Rank 0 writes kConfirmVerdictFile beside the request; on a
// difference every rank writes it (the scheduler may kill rank 0 once another rank exited),
// names the fields on stderr and exits kConfirmExitCode, so the job fails within seconds of
// start and `why` names the field.
//
// On Kubernetes the executor ships the two files in a ConfigMap mounted into the pods, and
// the verdict goes to the submission's directory under the job dir (`--verdict`) and, as one
// line (kConfirmVerdictLine), to rank 0's stderr, where `status` finds it in the pod log when
// the job dir is not visible from the submitting host.
//
// Contract: decide_plan_confirmation sets Plan::confirm, or warns by name why the job will
// not confirm its plan (a runtime command that is not `python SCRIPT`); runtime.confirm:
// false turns it off without a warning. confirmed_argv and plan_confirmation_files are pure; the
// executors write the files with their other job files. read_plan_confirmation reads a verdict back
// for status and why, which show it only for a job whose recorded plan confirms
// (recorded_plan_confirms).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/diagnostics.h"
#include "plan/plan.h"

namespace bridge {

inline constexpr const char* kConfirmProgramFile = "bridge_plan_confirm.py";
inline constexpr const char* kConfirmRequestFile = "plan_confirm.json";
inline constexpr const char* kConfirmVerdictFile = "plan_confirmation.json";
inline constexpr int kConfirmExitCode = 3;
// VERDICT_LINE of the program: followed by one space and the verdict as JSON.
inline constexpr const char* kConfirmVerdictLine = "bridge-launch: plan confirmation verdict";

void decide_plan_confirmation(Plan& plan, Diagnostics& diags);

// `argv` (runtime.command first) with the confirmation program put in front of the script:
// [python, DIR/PROGRAM, --confirm, DIR/REQUEST, --, script, args...], with
// `--verdict FILE` before `--` when the verdict goes elsewhere than beside the request (a
// Kubernetes ConfigMap is read-only). Unchanged when the plan does not confirm or `files_dir`
// is empty.
std::vector<std::string> confirmed_argv(const Plan& plan, std::vector<std::string> argv,
                                        const std::string& files_dir,
                                        const std::string& verdict_file = "");

// (file name, contents) of the files the executor writes into the job's directory; empty when
// the plan does not confirm.
std::vector<std::pair<std::string, std::string>> plan_confirmation_files(const Plan& plan);

// One field the runtime holds differently from the plan.
struct ConfirmDifference {
  std::string field;  // the config path, e.g. "train.train_iters"
  std::string key;    // the plan key that set it, e.g. "train.max_steps"
  std::string planned;
  std::string actual;
};

// What rank 0 wrote. `confirmed` is nullopt when the runtime ended without finalising a
// config (the hook never ran), with `note` saying so.
struct PlanConfirmationVerdict {
  std::optional<bool> confirmed;
  size_t compared = 0;
  size_t env_compared = 0;  // launch env variables every rank compared before its runtime started
  std::vector<ConfirmDifference> differences;
  std::string versions;  // "megatron.bridge 0.6.2, megatron.core 0.19.2"
  std::string note;
  double seconds = 0;
  std::optional<int> rank = 0;  // the rank that wrote it; nullopt: not a rank number
  // Planned fields not compared: planned null (the runtime derives them) or not in the config.
  std::vector<std::string> not_compared;
};

// The verdict in `job_dir`, nullopt when there is none (yet) or it cannot be read (not a
// regular file, a symlink, over 4 MiB: system/file_read.h). The file is the job's (any bytes):
// every text in the verdict is escaped and cut, `versions` holds at most 8 entries, and a rank
// beyond int is unknown, never cut to another number.
std::optional<PlanConfirmationVerdict> read_plan_confirmation(const std::string& job_dir);
// The same for the file's text (any bytes): nullopt when it is not a JSON object (or nests
// deeper than base/json_limits.h allows).
std::optional<PlanConfirmationVerdict> parse_plan_confirmation(const std::string& text);

// The verdict a rank printed (kConfirmVerdictLine at the start of a line of at most 64 KiB)
// in `log_text` (a log's head, any bytes): a difference when any such line holds one, else
// the first line's verdict; nullopt when no line is a verdict.
std::optional<PlanConfirmationVerdict> find_plan_confirmation_line(const std::string& log_text);

// Whether a job's recorded plan (`plan --format json`, the registry's `plan`) started its
// ranks through the confirmation: only then is a verdict in its job dir the job's own.
bool recorded_plan_confirms(const nlohmann::json& plan_json);

nlohmann::ordered_json plan_confirmation_to_json(const PlanConfirmationVerdict& verdict);

// "plan confirmed by rank 0 (40 values, megatron.bridge 0.6.2)" or
// "plan differs on rank 3: train.train_iters is 9, planned 8 (train.max_steps)".
std::string plan_confirmation_line(const PlanConfirmationVerdict& verdict);

}  // namespace bridge
