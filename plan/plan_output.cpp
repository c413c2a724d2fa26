#include "plan/plan_output.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <variant>

#include "base/json_text.h"
#include "base/shell_quote.h"
#include "base/utf8.h"
#include "plugins/plugin_util.h"

namespace bridge {

using nlohmann::ordered_json;

ordered_json userbuffers_to_json(const UserbuffersConfig& cfg) {
  ordered_json out = ordered_json::object();
  for (const auto& layer : cfg) {
    ordered_json settings = ordered_json::object();
    for (const auto& s : layer.settings)
      std::visit([&](const auto& v) { settings[s.key] = v; }, s.value);
    out[layer.name] = std::move(settings);
  }
  return out;
}

namespace {

template <class T>
ordered_json value_json(const T& v) {
  return ordered_json(v);
}
ordered_json value_json(const UserbuffersConfig& cfg) { return userbuffers_to_json(cfg); }

template <class T>
ordered_json opt_json(const std::optional<T>& v) {
  return v ? value_json(*v) : ordered_json(nullptr);
}

template <class T>
ordered_json resolved_json(const Resolved<T>& r) {
  ordered_json j;
  j["value"] = opt_json(r.value);
  j["source"] = value_source_name(r.source);
  if (!r.rule.empty()) j["rule"] = r.rule;
  return j;
}

// The 14 fields in the order of docs/overlap.md, for JSON and text alike.
template <class F>
void for_each_overlap_field(const ResolvedOverlap& o, F&& f) {
  f("tp_comm_overlap", resolved_json(o.tp_comm_overlap));
  f("tp_comm_overlap_cfg", resolved_json(o.tp_comm_overlap_cfg));
  f("tp_comm_bootstrap_backend", resolved_json(o.tp_comm_bootstrap_backend));
  f("overlap_p2p_comm", resolved_json(o.overlap_p2p_comm));
  f("batch_p2p_comm", resolved_json(o.batch_p2p_comm));
  f("overlap_grad_reduce", resolved_json(o.overlap_grad_reduce));
  f("overlap_param_gather", resolved_json(o.overlap_param_gather));
  f("overlap_param_gather_with_optimizer_step",
    resolved_json(o.overlap_param_gather_with_optimizer_step));
  f("align_param_gather", resolved_json(o.align_param_gather));
  f("bucket_size", resolved_json(o.bucket_size));
  f("defer_embedding_wgrad_compute", resolved_json(o.defer_embedding_wgrad_compute));
  f("wgrad_deferral_limit", resolved_json(o.wgrad_deferral_limit));
  f("overlap_moe_expert_parallel_comm", resolved_json(o.overlap_moe_expert_parallel_comm));
  f("delay_wgrad_compute", resolved_json(o.delay_wgrad_compute));
}

}  // namespace

ordered_json overlap_values_json(const ResolvedOverlap& overlap) {
  ordered_json out = ordered_json::object();
  for_each_overlap_field(overlap, [&](const char* name, const ordered_json& entry) {
    if (!entry["value"].is_null()) out[name] = entry["value"];
  });
  return out;
}

namespace {

ordered_json topology_json(const Topology& t) {
  return ordered_json{{"num_gpus", t.num_gpus},
                      {"gpus_per_node", t.gpus_per_node},
                      {"nodes", t.nodes},
                      {"tp", t.tp},
                      {"pp", t.pp},
                      {"vpp", opt_json(t.vpp)},
                      {"cp", t.cp},
                      {"ep", t.ep},
                      {"etp", t.etp},
                      {"dp", t.dp},
                      {"gpu", t.gpu.empty() ? ordered_json(nullptr) : ordered_json(t.gpu)}};
}

ordered_json executor_json(const Plan& p) {
  const ExecutorChanges& x = p.executor_changes;
  ordered_json j{{"name", p.executor}, {"job_dir", p.job_dir}};
  j["preempt_signal_seconds"] = opt_json(x.preempt_signal_seconds);
  j["retries"] = effective_retries(p);
  j["launcher_wrapper"] = x.launcher_wrapper;
  j["command_prefix"] = x.command_prefix;
  // Who set each setting and why (only the settings a plugin set).
  ordered_json changes = ordered_json::object();
  auto add = [&](const char* key, bool set, const std::string& source, const std::string& reason) {
    if (set) changes[key] = {{"source", source}, {"reason", reason}};
  };
  add("preempt_signal_seconds", x.preempt_signal_seconds.has_value(), x.preempt_source,
      x.preempt_reason);
  add("retries", x.retries.has_value(), x.retries_source, x.retries_reason);
  add("launcher_wrapper", !x.launcher_wrapper.empty(), x.launcher_source, x.launcher_reason);
  add("command_prefix", !x.command_prefix.empty(), x.command_prefix_source,
      x.command_prefix_reason);
  j["changes"] = std::move(changes);
  return j;
}

std::string value_text(const ordered_json& v) {
  if (v.is_null()) return "null";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object()) return fmt::format("{{{} layers}}", v.size());
  return v.dump();
}

// Newlines and other control characters would break the table; show them escaped.
std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c == 0x7f)
      out += fmt::format("\\x{:02x}", c);
    else
      out += static_cast<char>(c);
  }
  return out;
}

}  // namespace

ordered_json diagnostics_to_json(const Diagnostics& diags) {
  ordered_json list = ordered_json::array();
  for (const auto& d : diags.by_position()) {
    ordered_json j;
    j["severity"] = severity_name(d.severity);
    j["code"] = d.code;
    j["message"] = d.message;
    j["path"] = d.path.empty() ? ordered_json(nullptr) : ordered_json(d.path);
    j["line"] = d.loc.has_position() ? ordered_json(d.loc.line) : ordered_json(nullptr);
    j["column"] = d.loc.has_position() ? ordered_json(d.loc.column) : ordered_json(nullptr);
    j["file"] = d.loc.file.empty() ? ordered_json(nullptr) : ordered_json(d.loc.file);
    j["override"] =
        d.loc.from_override() ? ordered_json(d.loc.override_arg) : ordered_json(nullptr);
    j["help"] = d.help.empty() ? ordered_json(nullptr) : ordered_json(d.help);
    list.push_back(std::move(j));
  }
  return list;
}

namespace {

// Which value a rank runs with for a variable the runtime sets where it is unset.
const char* runtime_env_outcome(const RuntimeEnvDefault& d) {
  if (!d.launch_value) return "runtime";
  return d.launch_env_wins() ? "launch_env" : "same";
}

ordered_json runtime_env_json(const RuntimeEnvDefaults& defaults) {
  ordered_json vars = ordered_json::array();
  for (const auto& d : defaults.vars)
    vars.push_back(
        {{"name", d.name},
         {"value", d.value},
         {"launch_value", !d.launch_value   ? ordered_json(nullptr)
                          : d.launch_secret ? ordered_json("<secret>")
                                            : ordered_json(*d.launch_value)},
         {"launch_source", d.launch_value ? ordered_json(d.launch_source) : ordered_json(nullptr)},
         {"rank_gets", runtime_env_outcome(d)}});
  return {{"origin", defaults.origin},
          {"unknown_because", defaults.unknown_because.empty()
                                  ? ordered_json(nullptr)
                                  : ordered_json(defaults.unknown_because)},
          {"applied", "where the launch env leaves it unset"},
          {"vars", std::move(vars)}};
}

std::string launch_env_text(const LaunchEnv& env, bool color) {
  std::vector<std::vector<std::string>> rows{{"variable", "value", "source: reason"}};
  std::string last_why;
  for (const auto& v : env.vars) {
    // The recipe base's function is in the plan's "recipe base" heading.
    std::string source = v.source.rfind("recipe base ", 0) == 0 ? "recipe base" : v.source;
    std::string why = v.reason.empty() ? source : source + ": " + v.reason;
    rows.push_back({v.name, printable(redacted_value(v)),
                    rows.size() > 1 && why == last_why ? "as above" : why});
    last_why = std::move(why);
  }
  if (rows.size() == 1) rows.push_back({"(none)", "", ""});
  return format_table(rows, color);
}

std::string runtime_env_text(const RuntimeEnvDefaults& defaults, bool color) {
  std::vector<std::vector<std::string>> rows{{"variable", "runtime's value", "rank gets"}};
  for (const auto& d : defaults.vars) {
    std::string mine = d.launch_secret ? "<secret>" : d.launch_value.value_or("");
    rows.push_back({d.name, printable(d.value),
                    !d.launch_value       ? std::string("the runtime's value (launch env: unset)")
                    : d.launch_env_wins() ? fmt::format("{} from {} (the launch env wins)",
                                                        printable(mine), d.launch_source)
                                          : std::string("the same (launch env sets it too)")});
  }
  if (rows.size() == 1)
    rows.push_back({defaults.unknown_because.empty() ? "(none)" : "(unknown)",
                    printable(defaults.unknown_because), ""});
  return format_table(rows, color);
}

ordered_json code_json(const CodePlan& c) {
  ordered_json j{
      {"mode", code_mode_name(c.mode)},
      {"path", c.source},
      {"in_container", c.in_container},
      {"container_path", c.in_container ? ordered_json(c.container_path) : nullptr},
      {"python_path", c.in_container ? ordered_json(nullptr) : ordered_json(c.python_path)},
      {"snapshot_dir",
       c.mode == CodeMode::kSnapshot ? ordered_json(c.snapshot_root + "/<job id>") : nullptr},
      {"max_bytes", c.max_bytes}};
  if (!c.inspection) return j;
  const CodeInspection& i = *c.inspection;
  j["git"] = i.git;
  j["commit"] = i.commit.empty() ? ordered_json(nullptr) : ordered_json(i.commit);
  j["dirty"] = i.git ? ordered_json(i.dirty) : nullptr;
  if (c.mode == CodeMode::kSnapshot) {
    j["files"] = i.files.size();
    j["bytes"] = i.bytes;
    j["hash"] = i.hash.empty() ? ordered_json(nullptr) : ordered_json("sha256:" + i.hash);
  }
  return j;
}

std::string code_text(const CodePlan& c) {
  std::string out = fmt::format("  {} of {}\n", code_mode_name(c.mode), printable(c.source));
  if (c.inspection) {
    const CodeInspection& i = *c.inspection;
    std::string git =
        !i.git ? "not a git work tree"
        : i.commit.empty()
            ? "git, no commit yet"
            : fmt::format("git commit {}{}", i.commit.substr(0, 12),
                          i.dirty ? ", dirty (uncommitted changes shipped)" : ", clean");
    out += fmt::format("  {}\n", git);
    if (c.mode == CodeMode::kSnapshot)
      out += fmt::format("  {} files, {} (limit {}){}\n", i.files.size(), byte_size_text(i.bytes),
                         byte_size_text(c.max_bytes),
                         i.hash.empty() ? "" : ", sha256 " + i.hash.substr(0, 16));
  }
  if (c.mode == CodeMode::kSnapshot)
    out += fmt::format("  copied at submission to {}/<job id>\n", printable(c.snapshot_root));
  out += c.in_container
             ? fmt::format("  mounted in the container at {}\n", printable(c.container_path))
             : fmt::format("  on PYTHONPATH: <dir>{}\n",
                           c.python_path == "." ? "" : "/" + printable(c.python_path));
  return out;
}

}  // namespace

// What the plan is based on (model/recipe_base.h): the recipe and the values it decided.
ordered_json recipe_base_json(const Recipe& r) {
  const RecipeBaseInfo& b = r.base;
  ordered_json values = json_object_with_room(b.filled.size());
  for (const auto& [key, value] : b.filled) values[key] = value;
  return ordered_json{
      {"function", b.function},
      {"release", b.release},
      {"known", b.unknown_because.empty()},
      {"unknown_because",
       b.unknown_because.empty() ? ordered_json(nullptr) : ordered_json(b.unknown_because)},
      {"comm_overlap_section", !b.comm_overlap_null},
      {"values", std::move(values)}};
}

// The same as text: `key=value` items wrapped to fit 120 columns.
std::string recipe_base_text(const Recipe& r) {
  const RecipeBaseInfo& b = r.base;
  if (!b.unknown_because.empty()) return fmt::format("  values unknown: {}\n", b.unknown_because);
  std::string out, line = " ";
  for (const auto& [key, value] : b.filled) {
    std::string item = fmt::format(" {}={}", key, printable(value));
    if (line.size() + item.size() > 118) {
      out += line + "\n";
      line = " ";
    }
    line += item;
  }
  if (line.size() > 1) out += line + "\n";
  if (b.comm_overlap_null) out += "  (the recipe has no comm_overlap section)\n";
  return out.empty() ? "  (the recipe file sets every key the base decides)\n" : out;
}

ordered_json plan_to_json(const Plan& p, const Diagnostics& diags) {
  ordered_json j = json_object_with_room(48);  // more than the sections below
  j["ok"] = p.complete && !diags.has_errors();
  j["diagnostics"] = diagnostics_to_json(diags);
  if (p.recipe) j["name"] = *p.recipe->name.value;
  if (p.topology) j["topology"] = topology_json(*p.topology);
  if (p.overlap) {
    ordered_json co = ordered_json::object();
    for_each_overlap_field(p.overlap->overlap,
                           [&](const char* name, ordered_json v) { co[name] = std::move(v); });
    j["comm_overlap"] = std::move(co);
    const DdpConfig& d = p.overlap->ddp;
    j["ddp"] = ordered_json{{"use_distributed_optimizer", d.use_distributed_optimizer},
                            {"overlap_grad_reduce", opt_json(d.overlap_grad_reduce)},
                            {"overlap_param_gather", opt_json(d.overlap_param_gather)},
                            {"align_param_gather", opt_json(d.align_param_gather)},
                            {"bucket_size", opt_json(d.bucket_size)}};
    j["optimizer"] =
        ordered_json{{"overlap_param_gather_with_optimizer_step",
                      opt_json(p.overlap->optimizer.overlap_param_gather_with_optimizer_step)}};
  }
  if (p.recipe && !p.recipe->base.function.empty()) j["recipe_base"] = recipe_base_json(*p.recipe);
  if (!p.executor.empty()) {
    ordered_json env = json_object_with_room(p.env.vars.size());
    for (const auto& v : p.env.vars) {
      env[v.name] =
          ordered_json{{"value", v.secret ? ordered_json(nullptr) : ordered_json(v.value)},
                       {"source", v.source},
                       {"secret", v.secret},
                       {"reason", v.reason}};
    }
    j["env"] = std::move(env);
    if (!p.runtime_env.origin.empty()) j["runtime_env"] = runtime_env_json(p.runtime_env);
    ordered_json args = ordered_json::array();
    ordered_json arg_details = ordered_json::array();
    for (const auto& a : p.runtime_args) {
      args.push_back(a.text);
      arg_details.push_back({{"arg", a.text}, {"source", a.source}, {"reason", a.reason}});
    }
    j["runtime_args"] = std::move(args);
    j["runtime_arg_sources"] = std::move(arg_details);
    j["adapter"] = p.adapter;
    j["binding"] = ordered_json{{"mode", binding_mode_name(p.binding.mode)},
                                {"gpus_per_numa_node", p.binding.gpus_per_numa == 0
                                                           ? ordered_json(nullptr)
                                                           : ordered_json(p.binding.gpus_per_numa)},
                                {"rule", p.binding.rule},
                                {"source", p.binding.source}};
    if (p.nvlink.segment > 0)
      j["nvlink_segment"] = ordered_json{{"nodes", p.nvlink.segment}, {"source", p.nvlink.source}};
    j["argv"] = runtime_argv(p);
    j["confirm_at_start"] = p.confirm;
    j["watchdog"] = ordered_json{{"enabled", p.watchdog.enabled},
                                 {"startup_timeout_s", p.watchdog.startup_timeout},
                                 {"progress_timeout_s", p.watchdog.progress_timeout},
                                 {"teardown_grace_s", p.watchdog.teardown_grace},
                                 {"progress_rank", p.progress_rank},
                                 {"source", p.watchdog.source}};
    const Field<std::string>& image = p.recipe->runtime.container_image;
    j["container_image"] = image.is_set() ? ordered_json(*image.value) : ordered_json(nullptr);
    ordered_json setup = ordered_json::array();
    ordered_json setup_details = ordered_json::array();
    for (const auto& s : p.setup_steps) {
      setup.push_back(s.command);
      setup_details.push_back({{"command", s.command}, {"source", s.source}, {"reason", s.reason}});
    }
    j["setup_lines"] = std::move(setup);
    j["setup_sources"] = std::move(setup_details);
    j["executor"] = executor_json(p);
    if (p.code) j["code"] = code_json(*p.code);
  }
  if (p.runtime_check.ran) {
    const RuntimeCheckOutcome& rc = p.runtime_check;
    j["runtime_check"] = {{"python", rc.python},     {"passed", rc.passed},
                          {"versions", rc.versions}, {"recipe", rc.recipe},
                          {"seconds", rc.seconds},   {"findings", rc.findings}};
  }
  return j;
}

namespace {

// Text output fits kTextWidth columns. A cell wider than kWidestCell does not widen its column
// (a 3,000-column argument would pad every row to it): it ends its line, and the row goes on
// below at the next column. A last column that would start past kLastColumnMostRight starts on
// a line of its own instead, kHangingIndent in.
constexpr size_t kTextWidth = 120;
constexpr size_t kWidestCell = 44;
constexpr size_t kLastColumnMostRight = 80;
constexpr size_t kHangingIndent = 6;

// `text`'s words after `column` columns already used, lines continued `indent` columns in; each
// broken line ends with `continuation` (" \\" keeps a command line one shell command).
std::string wrap_words(std::string_view text, size_t column, size_t indent,
                       std::string_view continuation = "") {
  std::string out;
  bool first = true;
  while (!text.empty()) {
    size_t space = text.find(' ');
    std::string_view word = text.substr(0, space);
    text = space == std::string_view::npos ? std::string_view{} : text.substr(space + 1);
    if (word.empty()) continue;
    if (!first && column + 1 + word.size() + continuation.size() > kTextWidth) {
      // A word too long for the column goes further left, so the line still fits.
      size_t at = std::min(indent, kTextWidth - std::min(kTextWidth - 2, word.size()));
      out += std::string(continuation) + "\n" + std::string(at, ' ');
      column = at;
    } else if (!first) {
      out += ' ';
      ++column;
    }
    out += word;
    column += word.size();
    first = false;
  }
  return out;
}

// One word of the plan's text (an argument, an override): a word longer than a line is cut,
// with its length; `plan --format json` has it whole.
std::string shown_word(const std::string& word) {
  constexpr size_t kLongestWord = kTextWidth - 8;
  if (word.size() <= kLongestWord) return word;
  std::string count = fmt::format(" ({} bytes in all)", word.size());
  return printable_text(word, kLongestWord - count.size() - 3) + count;
}

// The runtime args with where each came from: a flag and its value (consecutive arguments
// with the same source and reason) on one row.
std::string runtime_args_text(const std::vector<RuntimeArg>& args, bool color) {
  std::vector<std::vector<std::string>> rows{{"arg", "source: reason"}};
  const RuntimeArg* group = nullptr;
  for (const auto& a : args) {
    if (group && group->source == a.source && group->reason == a.reason) {
      rows.back()[0] += " " + shown_word(a.text);
      continue;
    }
    group = &a;
    rows.push_back({shown_word(a.text), a.reason.empty() ? a.source : a.source + ": " + a.reason});
  }
  if (rows.size() == 1) rows.push_back({"(none)", ""});
  return format_table(rows, color);
}

}  // namespace

std::string format_table(const std::vector<std::vector<std::string>>& rows, bool color) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t i = 0; i + 1 < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], std::min(r[i].size(), kWidestCell));
    }
  std::string out;
  // Ends a line of the table: no trailing blanks, no line of blanks only.
  auto emit = [&](std::string line, bool header) {
    line.erase(line.find_last_not_of(' ') + 1);
    if (line.empty()) return;
    out += (header && color ? "\033[1m" + line + "\033[0m" : line) + "\n";
  };
  for (size_t n = 0; n < rows.size(); ++n) {
    std::string line = "  ";
    size_t start = 2;  // where the current column starts
    for (size_t i = 0; i < rows[n].size(); ++i) {
      const std::string& cell = rows[n][i];
      if (i + 1 == rows[n].size()) {
        if (start > kLastColumnMostRight && !cell.empty()) {
          emit(line, n == 0);
          line = std::string(kHangingIndent, ' ');
          start = kHangingIndent;
        }
        line += wrap_words(cell, line.size(), start);
        break;
      }
      const size_t cell_start = start;
      start += width[i] + 2;
      if (cell.size() > width[i]) {
        line += wrap_words(cell, line.size(), cell_start);
        emit(line, n == 0);
        line = std::string(start, ' ');
      } else {
        line += cell + std::string(start - line.size() - cell.size(), ' ');
      }
    }
    emit(line, n == 0);
  }
  return out;
}

std::string plan_to_text(const Plan& p, bool color) {
  std::string out;
  auto heading = [&](const std::string& h) {
    out += color ? fmt::format("\033[1;34m{}\033[0m\n", h) : h + "\n";
  };
  if (p.recipe)
    heading(fmt::format("plan for `{}` on executor {}", *p.recipe->name.value,
                        p.executor.empty() ? "?" : p.executor));
  if (p.topology) {
    const Topology& t = *p.topology;
    heading("topology");
    out += format_table(
        {{"gpus", "per node", "nodes", "tp", "pp", "vpp", "cp", "ep", "etp", "dp"},
         {std::to_string(t.num_gpus), std::to_string(t.gpus_per_node), std::to_string(t.nodes),
          std::to_string(t.tp), std::to_string(t.pp), t.vpp ? std::to_string(*t.vpp) : "-",
          std::to_string(t.cp), std::to_string(t.ep), std::to_string(t.etp), std::to_string(t.dp)}},
        color);
  }
  if (p.recipe && !p.recipe->base.function.empty()) {
    heading(fmt::format("recipe base ({} {})", p.recipe->base.release, p.recipe->base.function));
    out += "  the values of the keys the recipe leaves unset:\n";
    out += recipe_base_text(*p.recipe);
  }
  if (p.overlap) {
    heading("comm_overlap (resolved)");
    std::vector<std::vector<std::string>> rows{{"field", "value", "source"}};
    for_each_overlap_field(p.overlap->overlap, [&](const char* name, const ordered_json& v) {
      std::string src = v["source"].get<std::string>();
      if (v.contains("rule")) src += " (" + v["rule"].get<std::string>() + ")";
      rows.push_back({name, value_text(v["value"]), src});
    });
    if (!p.overlap->overlap.tp_comm_overlap_preset.empty())
      rows.push_back({"  preset", p.overlap->overlap.tp_comm_overlap_preset, ""});
    out += format_table(rows, color);
    const DdpConfig& d = p.overlap->ddp;
    heading("applied to ddp / optimizer");
    auto b = [](const std::optional<bool>& v) { return v ? (*v ? "true" : "false") : "null"; };
    out += format_table(
        {{"config", "field", "value"},
         {"ddp", "use_distributed_optimizer", d.use_distributed_optimizer ? "true" : "false"},
         {"ddp", "overlap_grad_reduce", b(d.overlap_grad_reduce)},
         {"ddp", "overlap_param_gather", b(d.overlap_param_gather)},
         {"ddp", "align_param_gather", b(d.align_param_gather)},
         {"ddp", "bucket_size", d.bucket_size ? std::to_string(*d.bucket_size) : "null"},
         {"optimizer", "overlap_param_gather_with_optimizer_step",
          b(p.overlap->optimizer.overlap_param_gather_with_optimizer_step)}},
        color);
  }
  if (!p.executor.empty() && p.topology) {
    heading("launch env");
    out += launch_env_text(p.env, color);
    if (!p.runtime_env.origin.empty()) {
      heading(
          fmt::format("env the runtime sets at rank start where unset ({})", p.runtime_env.origin));
      out += runtime_env_text(p.runtime_env, color);
    }
    heading("runtime args");
    out += runtime_args_text(p.runtime_args, color);
    heading(fmt::format("runtime command line (adapter {}; every rank)", p.adapter));
    std::vector<std::string> words;
    bool cut = false;
    for (const auto& w : runtime_argv(p)) {
      words.push_back(shown_word(printable(shell_word(w))));
      cut = cut || words.back() != printable(shell_word(w));
    }
    out += "  " + wrap_words(fmt::format("{}", fmt::join(words, " ")), 2, 6, " \\") + "\n";
    if (cut)
      out += "  (a word longer than a line is cut here; `plan --format json` has the whole argv)\n";
    if (p.confirm)
      out += "  " +
             wrap_words(
                 "started through the plan confirmation: every rank checks its env and "
                 "the config the runtime builds against this plan before training "
                 "(runtime.confirm)",
                 2, 4) +
             "\n";
    out += "  " +
           wrap_words(fmt::format("watchdog: {}; iteration lines from rank {} ({})",
                                  watchdog_text(p.watchdog), p.progress_rank, p.watchdog.source),
                      2, 4) +
           "\n";
    heading("placement");
    std::vector<std::vector<std::string>> placement{
        {"setting", "value", "source", "rule"},
        {"binding", std::string(binding_mode_name(p.binding.mode)), p.binding.source,
         p.binding.rule}};
    if (p.nvlink.segment > 0)
      placement.push_back({"nvlink domain", fmt::format("{} nodes", p.nvlink.segment),
                           p.nvlink.source,
                           fmt::format("each block of {} node{} inside one NVLink domain",
                                       p.nvlink.segment, p.nvlink.segment == 1 ? "" : "s")});
    out += format_table(placement, color);
    const Field<std::string>& image = p.recipe->runtime.container_image;
    out += fmt::format("container image: {}\n",
                       image.is_set() ? printable(*image.value) : std::string("(none)"));
    if (!p.setup_steps.empty()) {
      heading("setup steps (once per node)");
      std::vector<std::vector<std::string>> srows{{"command", "source", "reason"}};
      for (const auto& s : p.setup_steps) srows.push_back({s.command, s.source, s.reason});
      out += format_table(srows, color);
    }
    const ExecutorChanges& x = p.executor_changes;
    std::vector<std::vector<std::string>> xrows{{"setting", "value", "source", "reason"}};
    if (x.preempt_signal_seconds)
      xrows.push_back({"preemption signal",
                       fmt::format("TERM {} s before the limit", *x.preempt_signal_seconds),
                       x.preempt_source, x.preempt_reason});
    if (x.retries)
      xrows.push_back({"retries", std::to_string(*x.retries), x.retries_source, x.retries_reason});
    if (!x.launcher_wrapper.empty())
      xrows.push_back({"launcher", fmt::format("{}", fmt::join(x.launcher_wrapper, " ")),
                       x.launcher_source, x.launcher_reason});
    if (!x.command_prefix.empty())
      xrows.push_back({"command prefix", fmt::format("{}", fmt::join(x.command_prefix, " ")),
                       x.command_prefix_source, x.command_prefix_reason});
    if (xrows.size() > 1) {
      heading("executor changes");
      out += format_table(xrows, color);
    }
    if (p.code) {
      heading("code (runtime.code)");
      out += code_text(*p.code);
    }
    out += fmt::format("job dir: {}\n", p.job_dir);
  }
  return out;
}

namespace {

// A JSON scalar as a recipe writes it; nullopt for null, objects and arrays of objects.
std::optional<std::string> recipe_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean() || v.is_number()) return v.dump();
  if (!v.is_array()) return std::nullopt;
  std::string list = "[";
  for (const auto& item : v) {
    std::optional<std::string> text = recipe_text(item);
    if (!text || item.is_array()) return std::nullopt;
    list += (list.size() > 1 ? "," : "") + *text;
  }
  return list + "]";
}

}  // namespace

std::map<std::string, std::string> resolved_recipe_values(const nlohmann::ordered_json& plan) {
  std::map<std::string, std::string> out;
  if (!plan.is_object()) return out;
  auto put = [&out](const std::string& key, const nlohmann::ordered_json& v) {
    if (std::optional<std::string> text = recipe_text(v)) out[key] = *text;
  };
  auto section = [&plan](const char* name) -> const nlohmann::ordered_json* {
    auto it = plan.find(name);
    return it != plan.end() && it->is_object() ? &*it : nullptr;
  };
  if (const auto* base = section("recipe_base"))
    if (auto v = base->find("values"); v != base->end() && v->is_object())
      for (const auto& [key, value] : v->items()) put(key, value);
  if (const auto* t = section("topology")) {
    static const std::pair<const char*, const char*> kLayout[] = {
        {"num_gpus", "cluster.num_gpus"},
        {"gpus_per_node", "cluster.gpus_per_node"},
        {"gpu", "cluster.gpu"},
        {"tp", "model.tensor_model_parallel_size"},
        {"pp", "model.pipeline_model_parallel_size"},
        {"vpp", "model.virtual_pipeline_model_parallel_size"},
        {"cp", "model.context_parallel_size"},
        {"ep", "model.expert_model_parallel_size"},
        {"etp", "model.expert_tensor_parallel_size"}};
    for (const auto& [field, key] : kLayout)
      if (auto v = t->find(field); v != t->end()) put(key, *v);
  }
  if (const auto* co = section("comm_overlap"))
    for (const auto& [name, field] : co->items())
      if (field.is_object())
        if (auto v = field.find("value"); v != field.end()) put("comm_overlap." + name, *v);
  for (const char* name : {"ddp", "optimizer"})
    if (const auto* s = section(name))
      for (const auto& [field, value] : s->items()) put(std::string(name) + "." + field, value);
  return out;
}

}  // namespace bridge
