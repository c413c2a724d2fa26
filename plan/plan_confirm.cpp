#include "plan/plan_confirm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/json_limits.h"
#include "base/json_text.h"
#include "base/utf8.h"
#include "plan/runtime_check.h"
#include "system/file_read.h"
#include "system/templates.h"

namespace bridge {

namespace {

using nlohmann::json;

constexpr const char* kProgramTemplate = "bridge_config_check.py";

// Why the job will not confirm its plan: an info line when the user left runtime.confirm
// unset (the default), a warning when they asked for it.
void not_confirmed(const Plan& plan, const std::string& why, Diagnostics& diags) {
  const Field<bool>& asked = plan.recipe->runtime.confirm;
  std::string message = "the job will not confirm its plan at start: " + why;
  std::string help = "see \"The plan confirmed at start\" in docs/runtime-check.md";
  if (asked.is_set())
    diags.warning("plan-confirm-off", "runtime.confirm", asked.loc, message, help);
  else
    diags.info("plan-confirm-off", "runtime.confirm", {}, message, help);
}

std::string text_of(const json& v) {
  return v.is_string() ? v.get<std::string>()
                       : v.dump(-1, ' ', false, json::error_handler_t::replace);
}

// "megatron.bridge 0.6.2, megatron.core 0.19.2": names and versions escaped and cut (the file
// is written by the job, so any bytes), at most kShownVersions of them and a count of the rest.
std::string versions_text(const json& versions) {
  constexpr size_t kShownVersions = 8;
  std::string out;
  size_t shown = 0, more = 0;
  for (const auto& [name, version] : versions.items()) {
    if (version.is_null()) continue;
    if (shown == kShownVersions) {
      ++more;
      continue;
    }
    out += fmt::format("{}{} {}", shown++ == 0 ? "" : ", ", printable_text(name, 64),
                       printable_text(text_of(version), 40));
  }
  if (more > 0) out += fmt::format(" and {} more", more);
  return out;
}

// The rank that wrote the verdict: a whole number a rank can be, else unknown (a number
// beyond int, such as 99999999999, is not cut to another rank's).
std::optional<int> rank_of(const json& rank) {
  if (!rank.is_number_unsigned()) return std::nullopt;
  std::uint64_t n = rank.get<std::uint64_t>();
  if (n > static_cast<std::uint64_t>(std::numeric_limits<int>::max())) return std::nullopt;
  return static_cast<int>(n);
}

// The launch env every rank must start with: each value as the hex of its bytes (any byte
// reaches the rank's comparison unchanged); a secret or a value the rank expands by name only
// (a secret's bytes are never written to a file, and only the rank knows an expanded one).
json planned_env(const LaunchEnv& env) {
  static constexpr char kHex[] = "0123456789abcdef";
  json out = json::array();
  for (const EnvVar& v : env.vars) {
    if (v.secret || v.expand) {
      out.push_back({{"name", v.name}});
      continue;
    }
    std::string hex;
    for (unsigned char c : v.value) {
      hex += kHex[c >> 4];
      hex += kHex[c & 15];
    }
    out.push_back({{"name", v.name}, {"hex", hex}});
  }
  return out;
}

}  // namespace

void decide_plan_confirmation(Plan& plan, Diagnostics& diags) {
  plan.confirm = false;
  if (!plan.recipe || !plan.topology) return;
  if (plan.adapter != "megatron_bridge" && plan.adapter != "hydra") return;
  const Field<bool>& asked = plan.recipe->runtime.confirm;
  if (asked.is_set() && !*asked.value) return;
  if (!embedded_template(kProgramTemplate)) {
    not_confirmed(plan, "this bridge-launch was built without its confirmation program", diags);
    return;
  }
  if (!is_python_script_command(runtime_argv(plan))) {
    not_confirmed(plan,
                  "runtime.command is not `python SCRIPT`, so the confirmation program "
                  "cannot start in front of the script",
                  diags);
    return;
  }
  plan.confirm = true;
}

std::vector<std::string> confirmed_argv(const Plan& plan, std::vector<std::string> argv,
                                        const std::string& files_dir,
                                        const std::string& verdict_file) {
  if (!plan.confirm || files_dir.empty() || !is_python_script_command(argv)) return argv;
  std::vector<std::string> out{argv[0], files_dir + "/" + kConfirmProgramFile, "--confirm",
                               files_dir + "/" + kConfirmRequestFile};
  if (!verdict_file.empty()) {
    out.emplace_back("--verdict");
    out.push_back(verdict_file);
  }
  out.emplace_back("--");
  out.insert(out.end(), argv.begin() + 1, argv.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> plan_confirmation_files(const Plan& plan) {
  if (!plan.confirm) return {};
  std::optional<std::string_view> program = embedded_template(kProgramTemplate);
  json request = runtime_check_request_json(plan);
  request["planned_env"] = planned_env(plan.env);
  // The recipe base's values (model/recipe_base.h): not sent, since the runtime builds them
  // from the same recipe, so compared here where the finalised config holds them.
  request["planned_base"] = json::object();
  if (plan.recipe)
    for (const auto& [key, value] : plan.recipe->base.filled) request["planned_base"][key] = value;
  return {{kConfirmProgramFile, std::string(program.value_or(""))},
          {kConfirmRequestFile, json_text(request) + "\n"}};
}

std::optional<PlanConfirmationVerdict> read_plan_confirmation(const std::string& job_dir) {
  if (job_dir.empty()) return std::nullopt;
  // The job writes it (any bytes): a FIFO, a link or a file past the bound is no verdict
  // (system/file_read.h). A verdict of the largest shape shown is well under 1 MiB.
  constexpr size_t kMaxVerdictBytes = size_t{4} << 20;
  StatusOr<std::string> text =
      read_regular_file(std::filesystem::path(job_dir) / kConfirmVerdictFile, kMaxVerdictBytes);
  if (!text.ok()) return std::nullopt;
  return parse_plan_confirmation(*text);
}

std::optional<PlanConfirmationVerdict> parse_plan_confirmation(const std::string& text) {
  // Deeper nesting is no verdict: a value quoted from it is printed (text_of), which recurses
  // once per level (base/json_limits.h).
  if (!json_depth_within(text)) return std::nullopt;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  PlanConfirmationVerdict v;
  if (j.contains("confirmed") && j["confirmed"].is_boolean())
    v.confirmed = j["confirmed"].get<bool>();
  if (j.contains("compared") && j["compared"].is_number_unsigned())
    v.compared = j["compared"].get<size_t>();
  if (j.contains("env_compared") && j["env_compared"].is_number_unsigned())
    v.env_compared = j["env_compared"].get<size_t>();
  if (j.contains("seconds") && j["seconds"].is_number()) v.seconds = j["seconds"].get<double>();
  if (j.contains("rank")) v.rank = rank_of(j["rank"]);
  if (j.contains("note") && j["note"].is_string())
    v.note = printable_text(j["note"].get<std::string>(), 300);
  if (j.contains("versions") && j["versions"].is_object())
    v.versions = versions_text(j["versions"]);
  if (j.contains("not_compared") && j["not_compared"].is_array())
    for (const auto& f : j["not_compared"])
      if (v.not_compared.size() < 200) v.not_compared.push_back(printable_text(text_of(f), 200));
  if (j.contains("differences") && j["differences"].is_array())
    for (const auto& d : j["differences"]) {
      if (!d.is_object() || v.differences.size() >= 50) continue;
      auto field = [&](const char* name) {
        return d.contains(name) ? printable_text(text_of(d[name]), 200) : std::string();
      };
      v.differences.push_back({field("field"), field("key"), field("planned"), field("actual")});
    }
  return v;
}

std::optional<PlanConfirmationVerdict> find_plan_confirmation_line(const std::string& log_text) {
  // A verdict line is short (the program cuts its values); a longer one is not parsed.
  constexpr size_t kMaxVerdictLine = size_t{64} << 10;
  const std::string prefix = std::string(kConfirmVerdictLine) + " ";
  std::optional<PlanConfirmationVerdict> found;
  for (size_t begin = 0; begin < log_text.size();) {
    size_t end = std::min(log_text.find('\n', begin), log_text.size());
    // Only a line that starts with the prefix: not one that quotes it.
    if (end - begin <= kMaxVerdictLine && log_text.compare(begin, prefix.size(), prefix) == 0) {
      auto verdict = parse_plan_confirmation(
          log_text.substr(begin + prefix.size(), end - begin - prefix.size()));
      if (verdict && verdict->confirmed == std::optional<bool>(false)) return verdict;
      if (verdict && !found) found = std::move(verdict);
    }
    begin = end + 1;
  }
  return found;
}

nlohmann::ordered_json plan_confirmation_to_json(const PlanConfirmationVerdict& v) {
  nlohmann::ordered_json j;
  j["confirmed"] = v.confirmed ? nlohmann::ordered_json(*v.confirmed) : nullptr;
  j["compared"] = v.compared;
  j["env_compared"] = v.env_compared;
  j["versions"] = v.versions;
  j["seconds"] = v.seconds;
  j["rank"] = v.rank ? nlohmann::ordered_json(*v.rank) : nullptr;
  j["not_compared"] = v.not_compared;
  if (!v.note.empty()) j["note"] = v.note;
  j["differences"] = nlohmann::ordered_json::array();
  for (const auto& d : v.differences)
    j["differences"].push_back(
        {{"field", d.field}, {"key", d.key}, {"planned", d.planned}, {"actual", d.actual}});
  j["line"] = plan_confirmation_line(v);
  return j;
}

std::string plan_confirmation_line(const PlanConfirmationVerdict& v) {
  std::string versions = v.versions.empty() ? "" : ", " + v.versions;
  if (!v.confirmed)
    return "plan not confirmed: " + (v.note.empty() ? std::string("no verdict") : v.note);
  if (*v.confirmed)
    return fmt::format(
        "plan confirmed by rank 0 ({} values{}{}{})", v.compared,
        v.env_compared == 0 ? "" : fmt::format(", {} env variables on every rank", v.env_compared),
        v.not_compared.empty() ? ""
                               : fmt::format(", {} left to the runtime", v.not_compared.size()),
        versions);
  std::string out = v.rank ? fmt::format("plan differs on rank {}:", *v.rank)
                           : std::string("plan differs on a rank that is not known:");
  for (size_t i = 0; i < v.differences.size(); ++i) {
    const ConfirmDifference& d = v.differences[i];
    out += fmt::format("{} {} is {}, planned {} ({})", i == 0 ? "" : ";", d.field, d.actual,
                       d.planned, d.key);
  }
  return out;
}

bool recorded_plan_confirms(const nlohmann::json& plan_json) {
  if (!plan_json.is_object()) return false;
  auto it = plan_json.find("confirm_at_start");
  return it != plan_json.end() && it->is_boolean() && it->get<bool>();
}

}  // namespace bridge
