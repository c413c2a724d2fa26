// advise: the overlap advice of plan/advise.h for one plan, as text or JSON.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "executors/executor.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "plan/advise.h"
#include "plan/plan_output.h"

namespace bridge {

namespace {

// Plans and renders for the chosen executor, as `validate` does (validate ok => --dry-run ok).
// The plan options of this call as argv words, so the ablate command plans the same job.
std::vector<std::string> option_args(const Options& o) {
  std::vector<std::string> args;
  auto add = [&](const char* flag, const std::string& value) {
    if (value.empty()) return;
    args.emplace_back(flag);
    args.push_back(value);
  };
  add("-e", o.executor);
  add("-ng", o.num_gpus);
  add("-gn", o.gpus_per_node);
  add("-g", o.gpu);
  for (const auto& e : o.env) add("-E", e);
  add("--template", o.template_path);
  add("--runtime-check", o.runtime_check_python);
  if (o.strict) args.emplace_back("--strict");
  return args;
}

void copy_items(const Diagnostics& from, Diagnostics& to) {
  for (const Diagnostic& d : from.items()) {
    switch (d.severity) {
      case Severity::kError:
        to.error(d.code, d.path, d.loc, d.message, d.help);
        break;
      case Severity::kWarning:
        to.warning(d.code, d.path, d.loc, d.message, d.help);
        break;
      case Severity::kInfo:
        to.info(d.code, d.path, d.loc, d.message, d.help);
        break;
    }
  }
}

nlohmann::ordered_json advice_to_json(const Advice& a) {
  nlohmann::ordered_json j{{"id", a.id},
                           {"title", a.title},
                           {"knob", a.knob},
                           {"rules", a.rules},
                           {"state", advice_state_name(a.state)},
                           {"why", a.why}};
  nlohmann::ordered_json conditions = nlohmann::ordered_json::array();
  for (const auto& cond : a.conditions)
    conditions.push_back({{"field", cond.field},
                          {"requirement", cond.requirement},
                          {"value", cond.value},
                          {"status", condition_status_name(cond.status)},
                          {"rule", cond.rule}});
  j["prerequisites"] = conditions;
  nlohmann::ordered_json changes = nlohmann::ordered_json::array();
  for (const auto& ch : a.changes)
    changes.push_back({{"key", ch.key}, {"value", ch.value}, {"why", ch.why}});
  j["changes"] = changes;
  j["blockers"] = a.blockers;
  j["notes"] = a.notes;
  if (a.ablate_argv.empty())
    j["ablate"] = nullptr;
  else
    j["ablate"] = {{"argv", a.ablate_argv}, {"command", a.ablate_command}};
  return j;
}

std::string layout_text(const Topology& t) {
  return fmt::format(
      "{} GPU{} ({} node{} x {}{}): tp {}, pp {}, vpp {}, cp {}, ep {}, etp {}, dp {}", t.num_gpus,
      t.num_gpus == 1 ? "" : "s", t.nodes, t.nodes == 1 ? "" : "s", t.gpus_per_node,
      t.gpu.empty() ? "" : " " + t.gpu, t.tp, t.pp, t.vpp ? std::to_string(*t.vpp) : "-", t.cp,
      t.ep, t.etp, t.dp);
}

std::string advice_to_text(const Plan& plan, const std::vector<Advice>& advice) {
  std::string out = fmt::format("overlap advice for {}: {}\n", plan.recipe->name.get_or(""),
                                layout_text(*plan.topology));
  size_t counts[4] = {0, 0, 0, 0};
  for (const auto& a : advice) ++counts[static_cast<int>(a.state)];
  out += fmt::format("{} suggested, {} blocked, {} already on, {} not applicable\n", counts[0],
                     counts[1], counts[2], counts[3]);
  for (const auto& a : advice) {
    out += fmt::format("\n[{}] {}: {} (rule{} {})\n", advice_state_name(a.state), a.title, a.knob,
                       a.rules.find(',') == std::string::npos ? "" : "s", a.rules);
    out += "  " + a.why + "\n";
    if (!a.conditions.empty()) {
      out += "  prerequisites:\n";
      for (const auto& cond : a.conditions)
        out += fmt::format("    {:<8} {} {}: {} ({})\n", condition_status_name(cond.status),
                           cond.field, cond.requirement, cond.value, cond.rule);
    }
    if (!a.changes.empty()) {
      out += "  must also change (applied to the baseline too):\n";
      for (const auto& ch : a.changes)
        out += fmt::format("    {}  # {}\n", ch.override_text(), ch.why);
    }
    if (!a.blockers.empty()) {
      out += "  blocked:\n";
      for (const auto& b : a.blockers) out += "    - " + b + "\n";
    }
    if (!a.notes.empty()) {
      out += "  notes:\n";
      for (const auto& n : a.notes) out += "    - " + n + "\n";
    }
    if (!a.ablate_command.empty())
      out += "  measure it (baseline: knob off; variant: knob on):\n    " + a.ablate_command + "\n";
  }
  out += "\nbefore you measure:\n";
  for (const auto& c : advice_caveats()) out += "  - " + c + "\n";
  return out;
}

}  // namespace

int cmd_advise(const Options& o, const Context& c) {
  Diagnostics diags(o.strict);
  Plan plan = build_checked_plan(o, c, diags);
  bool ok = plan.complete && !diags.has_errors();
  if (!ok) {
    if (o.format == "json") {
      nlohmann::ordered_json j{{"ok", false}, {"diagnostics", diagnostics_to_json(diags)}};
      c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
      print_diagnostics(diags, c.err, c.color);
    }
    return kExitUsage;
  }
  AdviceInvocation invocation;
  invocation.recipe_path = o.recipe;
  invocation.option_args = option_args(o);
  invocation.overrides = o.overrides;
  auto check = [&](const std::vector<std::string>& extra, Diagnostics& out) {
    Options variant = o;
    variant.overrides.insert(variant.overrides.end(), extra.begin(), extra.end());
    Diagnostics found(o.strict);  // --strict applies to the advice's plans too
    build_checked_plan(variant, c, found);
    copy_items(found, out);
  };
  std::vector<Advice> advice = advise_overlap(plan, invocation, check);
  if (o.format == "json") {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& a : advice) list.push_back(advice_to_json(a));
    nlohmann::ordered_json j{{"ok", true},
                             {"recipe", o.recipe},
                             {"name", plan.recipe->name.get_or("")},
                             {"topology", plan_to_json(plan, diags)["topology"]},
                             {"advice", list},
                             {"caveats", advice_caveats()},
                             {"diagnostics", diagnostics_to_json(diags)}};
    c.out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    print_diagnostics(diags, c.err, c.color);
    c.out << advice_to_text(plan, advice);
  }
  return kExitOk;
}

}  // namespace bridge
