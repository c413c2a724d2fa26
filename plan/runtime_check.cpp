#include "plan/runtime_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <vector>

#include "base/utf8.h"
#include "model/gpu_table.h"
#include "plan/plan_output.h"
#include "system/templates.h"

namespace bridge {

namespace {

using nlohmann::json;

constexpr const char* kProgram = "bridge_config_check.py";
constexpr const char* kDocs = "docs/runtime-check.md";

// The compute capability torch.cuda reports on a GPU type the check program does not know by
// name (it knows the names of the GPU table).
json capability_of(const Plan& plan) {
  const Recipe& r = *plan.recipe;
  GpuArch arch = GpuArch::kHopper;
  if (const GpuType* t = find_gpu(plan.topology->gpu)) {
    arch = t->arch;
  } else if (!r.cluster.gpu_arch.is_set() || !parse_arch(*r.cluster.gpu_arch.value, arch)) {
    return nullptr;
  }
  switch (arch) {
    case GpuArch::kAmpere:
      return json::array({8, 0});
    case GpuArch::kHopper:
      return json::array({9, 0});
    case GpuArch::kBlackwell:
      return json::array({10, 0});
    case GpuArch::kRubin:
      return json::array({11, 0});
  }
  return nullptr;
}

// The plan's resolved overlap values; null where the plan leaves a field to the runtime.
json planned_overlap(const Plan& plan) {
  json out = json::object();
  if (!plan.overlap) return out;
  const nlohmann::ordered_json values = overlap_values_json(plan.overlap->overlap);
  for (auto it = values.begin(); it != values.end(); ++it) out[it.key()] = it.value();
  return out;
}

// Where the value of plan key `key` was written: its recipe line or override; empty when the
// plan chose it.
SourceLoc location_of(const Recipe& r, const std::string& key) {
  // Runtime keys the plan derives from another recipe key: the overlap resolution sends the
  // distributed optimizer to both configs and comm_overlap's DP fields to ddp and optimizer.
  static const std::map<std::string, std::string> kRecipeKey{
      {"train.train_iters", "train.max_steps"},
      {"mixed_precision", "model.precision"},
      {"optimizer.use_distributed_optimizer", "ddp.use_distributed_optimizer"}};
  std::vector<std::string> candidates{key};
  if (kRecipeKey.count(key)) candidates.push_back(kRecipeKey.at(key));
  for (const char* section : {"ddp.", "optimizer."})
    if (key.rfind(section, 0) == 0)
      candidates.push_back("comm_overlap." + key.substr(std::string(section).size()));
  for (const std::string& k : candidates) {
    auto it = r.input_locations.find(k);
    if (it != r.input_locations.end()) return it->second;
  }
  return {};
}

bool is_name_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

// Whether `message` holds `name` as a whole word: `precision` is not in
// `--use-precision-aware-optimizer`. A plain search, never a pattern built from the name (a
// recipe key such as `example.com/owner[x` is text, not a regular expression).
bool mentions_word(std::string_view message, std::string_view name) {
  if (name.empty()) return false;
  for (size_t at = message.find(name); at != std::string_view::npos;
       at = message.find(name, at + 1)) {
    size_t end = at + name.size();
    if ((at == 0 || !is_name_char(message[at - 1])) &&
        (end == message.size() || !is_name_char(message[end])))
      return true;
  }
  return false;
}

// A refusal that names no argument (Megatron-Core's checks at finalisation): the first recipe
// key, in file order, whose name the message mentions.
SourceLoc location_in_message(const Recipe& r, const std::string& message, std::string& key) {
  std::optional<std::pair<std::string, SourceLoc>> best;
  for (const auto& [k, loc] : r.input_locations) {
    std::string name = k.substr(k.rfind('.') + 1);
    if (name.size() < 6 || !loc.has_position()) continue;
    if (!mentions_word(message, name)) continue;
    if (!best || loc.line < best->second.line) best.emplace(k, loc);
  }
  if (!best) return {};
  key = best->first;
  return best->second;
}

std::string text_of(const json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string versions_text(const json& answer) {
  std::string out;
  if (!answer.contains("versions") || !answer["versions"].is_object()) return out;
  for (const auto& [name, v] : answer["versions"].items()) {
    if (v.is_null()) continue;
    out += fmt::format("{}{} {}", out.empty() ? "" : ", ", name, text_of(v));
  }
  return out;
}

bool is_refusal(const std::string& cls) {
  return cls == "no-recipe" || cls == "override-refused" || cls == "flags-refused" ||
         cls == "finalisation-refused" || cls == "hub-config-missing";
}

void report_finding(const Plan& plan, const RuntimeCheckOutcome& outcome, const json& f,
                    Diagnostics& diags) {
  const Recipe& r = *plan.recipe;
  std::string cls = f.value("class", "");
  std::string key = f.contains("key") && f["key"].is_string() ? f["key"].get<std::string>() : "";
  std::string message = f.contains("message") ? printable_text(text_of(f["message"]), 1500) : "";
  SourceLoc loc = key.empty() ? location_in_message(r, message, key) : location_of(r, key);
  if (loc.file.empty() && !loc.from_override()) loc.file = r.file;
  std::string who = fmt::format("Megatron-Bridge in {}", outcome.python);
  if (cls == "hub-config-missing") {
    diags.error("runtime-check-refused", key, loc, fmt::format("{}: {}", who, message),
                "cache the config where the job's ranks read it (their HF_HOME), as the message "
                "shows; every rank would otherwise need the Hub at start");
    return;
  }
  if (is_refusal(cls)) {
    diags.error(
        "runtime-check-refused", key, loc,
        fmt::format("{} refuses the plan{}: {}", who, key.empty() ? "" : " at " + key, message),
        fmt::format("the job would fail at start with this message; change the value "
                    "the runtime refuses, or check that {} is the Megatron-Bridge the "
                    "job runs ({})",
                    outcome.python, kDocs));
    return;
  }
  diags.error("runtime-check-differs", key, loc,
              fmt::format("{} would not run the planned value of {}: {}", who, key, message),
              fmt::format("the job would run another value than the one bridge-launch checked; "
                          "set it so that the runtime keeps it, or tell bridge-launch about this "
                          "Megatron-Bridge ({})",
                          kDocs));
}

}  // namespace

bool runtime_check_asked(const Plan& plan) {
  return plan.recipe && plan.recipe->runtime.check.python.is_set() &&
         !plan.recipe->runtime.check.python.value->empty();
}

bool is_python_script_command(const std::vector<std::string>& argv) {
  if (argv.size() < 2 || argv[1].empty() || argv[1][0] == '-') return false;
  std::string program = std::filesystem::path(argv[0]).filename().string();
  return program.rfind("python", 0) == 0;
}

std::string runtime_check_request(const Plan& plan) {
  return runtime_check_request_json(plan).dump(-1, ' ', false, json::error_handler_t::replace);
}

json runtime_check_request_json(const Plan& plan) {
  const Recipe& r = *plan.recipe;
  const Topology& t = *plan.topology;
  json argv = json::array();
  // The script's own arguments in runtime.command (run_recipe.py --recipe NAME): the job runs
  // them, so the check builds from them too.
  const std::vector<std::string> command = r.runtime.command.get_or({});
  if (is_python_script_command(command))
    for (size_t i = 2; i < command.size(); ++i) argv.push_back(command[i]);
  for (const auto& a : plan.user_args) argv.push_back(a);
  for (const auto& a : plan.runtime_args) argv.push_back(a.text);
  json lookup{{"model_family_name", r.model.family.get_or("")},
              {"model_recipe_name", r.model.recipe.get_or("")},
              {"task", r.train.task.get_or("pretrain")},
              {"num_gpus", t.num_gpus},
              {"gpu", t.gpu},
              {"compute_dtype", r.model.compute_dtype.get_or("bf16")}};
  json request{{"adapter", plan.adapter},
               {"argv", argv},
               {"world_size", t.num_gpus},
               {"gpu", t.gpu},
               {"capability", capability_of(plan)},
               {"recipe_lookup", lookup},
               {"planned_overlap", planned_overlap(plan)}};
  return request;
}

RuntimeCheckOutcome read_runtime_check_answer(const Plan& plan, const std::string& answer_text,
                                              Diagnostics& diags) {
  RuntimeCheckOutcome outcome;
  outcome.ran = true;
  outcome.python = *plan.recipe->runtime.check.python.value;
  const SourceLoc& python_loc = plan.recipe->runtime.check.python.loc;
  // The answer is the last line: the release may print on stdout while it imports.
  std::string last = answer_text.substr(0, answer_text.find_last_not_of('\n') + 1);
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  json answer = json::parse(last, nullptr, false);
  if (answer.is_discarded() || !answer.is_object()) {
    diags.error("runtime-check-failed", "runtime.check.python", python_loc,
                fmt::format("the runtime check in {} gave no answer bridge-launch can read: {}",
                            outcome.python, printable_text(last, 300)),
                "run the same Python by hand: it must import megatron.bridge");
    return outcome;
  }
  outcome.versions = versions_text(answer);
  if (answer.contains("seconds") && answer["seconds"].is_number())
    outcome.seconds = answer["seconds"].get<double>();
  if (answer.contains("base") && answer["base"].is_object())
    outcome.recipe = answer["base"].value("function", "");
  if (answer.contains("error") && answer["error"].is_string()) {
    diags.error("runtime-check-failed", "runtime.check.python", python_loc,
                printable_text(answer["error"].get<std::string>(), 1500),
                "give --runtime-check the Python the job's Megatron-Bridge runs in (where "
                "`python -c 'import megatron.bridge'` works)");
    return outcome;
  }
  if (answer.contains("findings") && answer["findings"].is_array())
    for (const auto& f : answer["findings"])
      if (f.is_object()) {
        report_finding(plan, outcome, f, diags);
        ++outcome.findings;
      }
  outcome.passed = outcome.findings == 0;
  if (outcome.passed)
    diags.info("runtime-check-passed", "runtime.check.python", python_loc,
               fmt::format("Megatron-Bridge in {} ({}) builds and finalises the planned config "
                           "from {} with every planned value ({:.1f} s)",
                           outcome.python, outcome.versions, outcome.recipe, outcome.seconds));
  return outcome;
}

void run_runtime_check(Plan& plan, CommandRunner& runner, const Clock& clock, Diagnostics& diags) {
  if (plan.recipe && plan.recipe->runtime.check.python.is_set() &&
      plan.recipe->runtime.check.python.value->empty()) {
    diags.error("bad-value", "runtime.check.python", plan.recipe->runtime.check.python.loc,
                "`runtime.check.python` (`--runtime-check`) is empty: it names the Python "
                "whose Megatron-Bridge checks the plan, and an empty one would check nothing",
                "name that Python, e.g. --runtime-check /opt/venv/bin/python, or leave the "
                "option out");
    return;
  }
  if (!runtime_check_asked(plan) || !plan.complete || diags.has_errors()) return;
  const RuntimeCheckSpec& spec = plan.recipe->runtime.check;
  if (plan.adapter != "megatron_bridge" && plan.adapter != "hydra") {
    diags.warning("runtime-check-skipped", "runtime.check.python", spec.python.loc,
                  fmt::format("runtime.adapter {} forwards nothing Megatron-Bridge reads, so "
                              "the runtime check did not run",
                              plan.adapter),
                  "use the megatron_bridge or hydra adapter, or drop the check");
    return;
  }
  Diagnostics unused;
  std::optional<std::string> program = template_text(kProgram, "", unused);
  CommandSpec command;
  command.argv = {*spec.python.value, "-c", program.value_or(""), "--"};
  command.stdin_text = runtime_check_request(plan);
  int64_t limit = spec.timeout.get_or(kDefaultRuntimeCheckSeconds);
  command.timeout = std::chrono::seconds(limit);
  auto start = clock.steady_now();
  CommandResult result = runner.run(command);
  double seconds = std::chrono::duration<double>(clock.steady_now() - start).count();
  if (!result.started || result.timed_out || result.cancelled || result.out.empty()) {
    std::string why =
        !result.started ? "could not start: " + result.err
        : result.timed_out
            ? fmt::format("did not answer within {} s", limit)
            : "ended without an answer: " +
                  result.err.substr(result.err.size() > 600 ? result.err.size() - 600 : 0);
    diags.error(
        "runtime-check-failed", "runtime.check.python", spec.python.loc,
        fmt::format("the runtime check with {} {}", *spec.python.value, printable_text(why, 800)),
        result.timed_out ? "raise runtime.check.timeout (seconds), or check that this "
                           "Python imports megatron.bridge quickly"
                         : "give --runtime-check a Python that runs here and imports "
                           "megatron.bridge");
    plan.runtime_check.ran = true;
    plan.runtime_check.python = *spec.python.value;
    plan.runtime_check.seconds = seconds;
    plan.complete = false;
    return;
  }
  // The answer is the last line, which the runner keeps with the end of the output.
  if (result.out_cut > 0)
    diags.warning(
        "runtime-check-output-cut", "runtime.check.python", spec.python.loc,
        fmt::format("the runtime check with {} printed {} bytes on stdout: output cut "
                    "at {} bytes, its first and last part read",
                    *spec.python.value, kMaxCapturedOutput + result.out_cut, kMaxCapturedOutput),
        "check what this Python prints while it imports megatron.bridge");
  plan.runtime_check = read_runtime_check_answer(plan, result.out, diags);
  plan.runtime_check.seconds = seconds;
  plan.complete = !diags.has_errors();
}

}  // namespace bridge
