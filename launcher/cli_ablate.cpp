// ablate: a baseline and one job per changed value (or the whole grid), planned and submitted
// one after another, then followed and compared (docs/experiments.md, "ablate").
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "base/utf8.h"
#include "executors/executor.h"
#include "jobs/job_lifecycle.h"
#include "jobs/registry.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "model/compare.h"
#include "model/recipe_loader.h"
#include "plan/plan_output.h"
#include "plan/runtime_check.h"

namespace bridge {

namespace {

// "KEY=V1,V2,[a,b]" -> KEY and its values (commas inside brackets/braces do not split).
std::optional<std::pair<std::string, std::vector<std::string>>> parse_vary(const std::string& v) {
  size_t eq = v.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == v.size()) return std::nullopt;
  std::vector<std::string> values;
  std::string cur;
  int depth = 0;
  for (char ch : v.substr(eq + 1)) {
    if (ch == '[' || ch == '{') ++depth;
    if (ch == ']' || ch == '}') --depth;
    if (ch == ',' && depth == 0) {
      values.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  values.push_back(cur);
  for (const auto& x : values)
    if (x.empty()) return std::nullopt;
  return std::pair{v.substr(0, eq), values};
}

// Baseline plus one variant per changed value (one knob at a time), or the full grid.
std::vector<std::vector<std::string>> make_variants(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& vary, bool grid,
    const std::map<std::string, std::string>& baseline_inputs) {
  std::vector<std::vector<std::string>> variants{{}};
  if (grid) {
    for (const auto& [key, values] : vary) {
      std::vector<std::vector<std::string>> next;
      for (const auto& v : variants)
        for (const auto& value : values) {
          auto w = v;
          w.push_back(key + "=" + value);
          next.push_back(std::move(w));
        }
      variants = std::move(next);
    }
    return variants;
  }
  for (const auto& [key, values] : vary)
    for (const auto& value : values) {
      auto it = baseline_inputs.find(key);
      if (it != baseline_inputs.end() && it->second == value) continue;  // = the baseline
      variants.push_back({key + "=" + value});
    }
  return variants;
}

}  // namespace

namespace {

// "<name>-<knob>-<value>...": a variant's own job name, shown by squeue, `list` and its job
// dir; the knob is the key's last part. At most 120 bytes, [A-Za-z0-9._-].
std::string variant_name(const std::string& base, const std::vector<std::string>& extra) {
  std::string text = base;
  for (const auto& kv : extra) {
    size_t eq = kv.find('=');
    std::string key = kv.substr(0, eq);
    text += "-" + key.substr(key.rfind('.') + 1) + "-" + kv.substr(eq + 1);
  }
  std::string out;
  for (char ch : text)
    out += std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'
               ? ch
               : '-';
  return out.substr(0, 120);
}

// What makes two variants the same experiment: the resolved plan, with the variant's own
// name and job dir (which only label it) masked.
// Keeps what runs and drops why: a value set by the user equal to the one a rule derives is
// the same plan (`value`/`secret` stay; `source`, `rule`, `reason` and the *_sources maps go).
void drop_provenance(nlohmann::ordered_json& j) {
  if (j.is_object()) {
    if (j.contains("value"))
      for (const char* why : {"source", "rule", "reason"}) j.erase(why);
    for (auto& [key, value] : j.items()) drop_provenance(value);
  } else if (j.is_array()) {
    for (auto& item : j) drop_provenance(item);
  }
}

std::string plan_fingerprint(const Plan& plan, const Diagnostics& diags) {
  nlohmann::ordered_json j = plan_to_json(plan, diags);
  j.erase("name");
  j.erase("diagnostics");
  j.erase("runtime_arg_sources");
  j.erase("setup_sources");
  drop_provenance(j);
  std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  auto mask = [&](const std::string& what, const char* with) {
    if (what.empty()) return;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at))
      text.replace(at, what.size(), with), at += std::string(with).size();
  };
  mask(plan.job_dir, "<job_dir>");
  if (plan.recipe && plan.recipe->name.value) mask(*plan.recipe->name.value, "<name>");
  return text;
}

std::string variant_label(const std::vector<std::string>& extra) {
  return extra.empty() ? "baseline" : fmt::format("{}", fmt::join(extra, " "));
}

// A variant's overrides as labels and job names show them: the value of a key that names a
// secret of the plan is <secret> (`--vary env.S.value=A,B` must not print A and B). `n`
// tells such variants apart: "<secret 2>".
std::vector<std::string> shown_overrides(const std::vector<std::string>& extra, const Plan& plan,
                                         size_t n) {
  std::vector<std::string> shown = extra;
  for (auto& kv : shown) {
    std::string key = kv.substr(0, kv.find('='));
    if (names_secret(plan, key)) kv = fmt::format("{}=<secret {}>", key, n);
  }
  return shown;
}

using VaryOptions = std::vector<std::pair<std::string, std::vector<std::string>>>;

// --vary and --window as given; nullopt (the error reported) when one is malformed.
std::optional<VaryOptions> parse_ablate_options(const AblateOptions& a, const Context& c) {
  VaryOptions vary;
  for (const auto& v : a.vary) {
    auto parsed = parse_vary(v);
    if (!parsed) {
      // Only the key is shown: the values may be secrets (env.S.value=...).
      report_error(c.err, fmt::format("bad --vary `{}=...`: expected KEY=V1,V2",
                                      printable_text(v.substr(0, v.find('=')), 200)));
      return std::nullopt;
    }
    vary.push_back(std::move(*parsed));
  }
  if (!parse_window(a.window)) {
    report_error(c.err, kBadWindow);
    return std::nullopt;
  }
  return vary;
}

// The jobs of an ablation, in submission order: each one's options and label.
struct Ablation {
  std::vector<Options> options;
  std::vector<std::string> labels;
};

// Validates every variant before submitting any, and skips those whose resolved plan is
// another's; nullopt (the errors reported) when one is invalid.
std::optional<Ablation> plan_variants(const AblateOptions& a, const VaryOptions& vary,
                                      const Context& c) {
  auto base_inputs = flatten_recipe_inputs(a.launch.recipe, make_request(a.launch).overrides);
  auto variants = make_variants(vary, a.grid, base_inputs);
  Ablation ablation;
  std::map<std::string, std::string> seen;  // fingerprint -> label
  std::string base_name;
  bool all_ok = true;
  for (size_t n = 0; n < variants.size(); ++n) {
    const std::vector<std::string>& extra = variants[n];
    Options o = a.launch;
    o.overrides.insert(o.overrides.end(), extra.begin(), extra.end());
    Diagnostics diags(o.strict);
    Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
    run_runtime_check(plan, c.services.runner, c.services.clock, diags);  // when asked
    const std::vector<std::string> shown = shown_overrides(extra, plan, n);
    if (!plan.complete || diags.has_errors()) {
      all_ok = false;
      c.err << fmt::format("variant [{}] is invalid:\n", variant_label(shown));
      print_diagnostics(diags, c.err, c.color, false);
      continue;
    }
    if (base_name.empty()) base_name = plan.recipe->name.get_or("job");
    auto [it, fresh] = seen.emplace(plan_fingerprint(plan, diags), variant_label(shown));
    if (!fresh) {
      c.err << fmt::format(
          "ablate: variant [{}] resolves to the same plan as [{}]; not submitted\n",
          variant_label(shown), it->second);
      continue;
    }
    if (!extra.empty()) o.overrides.push_back("name=" + variant_name(base_name, shown));
    ablation.labels.push_back(variant_label(shown));
    ablation.options.push_back(std::move(o));
  }
  if (!all_ok) return std::nullopt;
  return ablation;
}

// What submitting an ablation's jobs gave: the worst exit code, the registry ids (for the
// compare) and the scheduler jobs still to wait for.
struct AblationRun {
  int worst = kExitOk;
  bool all_waited = true;  // every job's outcome is known once the waits are over
  std::vector<std::string> ids;
  std::vector<std::string> to_wait;
};

// Submits (with --dry-run: prints) the jobs in order. Scheduler jobs are all submitted
// first and waited on afterwards; local ones run one after another. A Ctrl-C stops there.
AblationRun submit_variants(const AblateOptions& a, Ablation& ablation, const Context& c) {
  AblationRun run;
  std::vector<Options>& options = ablation.options;
  for (size_t i = 0; i < options.size(); ++i) {
    Options& o = options[i];
    Diagnostics diags(o.strict);
    Plan plan = build_plan(make_request(o), c.services.env, c.services.plugins, diags);
    const ExecutorInfo* info = find_executor(c.services.executors, plan.executor);
    bool runs_here = info && info->kind().runs_here;
    run.all_waited = run.all_waited && (a.launch.wait || runs_here);
    if (o.dry_run)
      c.out << fmt::format("# ablate {} of {}: {} (job name {})\n", i + 1, options.size(),
                           ablation.labels[i], plan.recipe->name.get_or(""));
    else if (runs_here && i == 0 && options.size() > 1)
      c.err << "ablate: local jobs run one after another (one machine)\n";
    bool wait_later = o.wait && !runs_here;
    o.wait = o.wait && !wait_later;
    LaunchSettings settings;
    settings.sequence = static_cast<int>(i);
    auto [rc, id] = launch_planned(o, c, plan, diags, std::move(settings));
    if (!id.empty()) run.ids.push_back(id);
    if (!id.empty() && wait_later) run.to_wait.push_back(id);
    if (rc != kExitOk) run.worst = rc;
    if (rc == kExitInterrupted) break;
  }
  return run;
}

// Every waited job of one executor is followed by one wait: one scheduler query per poll
// for all of them, not one per job. Returns the worst exit code (a Ctrl-C stops there).
int wait_for_variants(const std::vector<std::string>& to_wait, int worst, const Context& c) {
  std::map<std::string, std::vector<JobRecord>> waited;  // executor -> records
  for (const auto& id : to_wait) {
    Diagnostics diags;
    auto rec = c.services.registry.find(id, diags);
    if (!rec) {
      print_diagnostics(diags, c.err, c.color, false);
      worst = kExitRuntime;
      continue;
    }
    waited[rec->executor].push_back(std::move(*rec));
  }
  for (auto& [name, records] : waited) {
    std::unique_ptr<Executor> ex = c.services.executor(name);
    if (!ex) {
      worst = kExitRuntime;
      continue;
    }
    std::vector<JobRecord*> pointers;
    for (auto& r : records) pointers.push_back(&r);
    int rc = wait_for_jobs(*ex, pointers, c.services.registry, c);
    if (rc != kExitOk) worst = rc;
    if (rc == kExitInterrupted) return rc;
  }
  return worst;
}

}  // namespace

int cmd_ablate(const AblateOptions& a, const Context& c) {
  std::optional<VaryOptions> vary = parse_ablate_options(a, c);
  if (!vary) return kExitUsage;
  std::optional<Ablation> ablation = plan_variants(a, *vary, c);
  if (!ablation) {
    c.err << "no variant was submitted\n";
    return kExitUsage;
  }
  const size_t jobs = ablation->options.size();
  if (jobs < 2) {
    report_error(c.err,
                 fmt::format("ablate has nothing to compare: every value of --vary resolves to "
                             "the same plan as the {}; nothing was submitted",
                             a.grid ? "other combinations" : "baseline"),
                 {"  help: vary a knob to a value that changes the plan (`bridge-launch plan "
                  "--format json` shows the resolved values)"});
    return kExitUsage;
  }
  if (a.grid)
    c.err << fmt::format("ablate: {} jobs (every combination of the --vary values)\n", jobs);
  else
    c.err << fmt::format("ablate: {} jobs (baseline + {} variant{})\n", jobs, jobs - 1,
                         jobs == 2 ? "" : "s");
  AblationRun run = submit_variants(a, *ablation, c);
  if (run.worst == kExitInterrupted) return run.worst;
  int worst = wait_for_variants(run.to_wait, run.worst, c);
  if (worst == kExitInterrupted) return worst;
  if (worst != kExitOk && a.launch.runtime_check_python.empty())
    c.err << "ablate: a variant did not succeed; if its runtime refused the config at start, "
             "`--runtime-check PYTHON` asks the job's own Megatron-Bridge about every variant "
             "before anything is submitted (docs/runtime-check.md)\n";
  JobOptions cmp;
  cmp.window = a.window;
  cmp.jobs = run.ids;
  if (run.all_waited && !cmp.jobs.empty() && !a.launch.dry_run) cmd_compare(cmp, c);
  return worst;
}

}  // namespace bridge
