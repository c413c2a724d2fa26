#include "plugins/nsys_args.h"

#include <map>

#include "base/shell_quote.h"
#include "plugins/plugin_util.h"

namespace bridge {

namespace {

struct Option {
  std::string name;  // canonical, "" for a stray value
  std::vector<std::string> tokens;
};

bool is_option(const std::string& token) { return token.size() > 1 && token[0] == '-'; }

std::string canonical(const std::string& flag) {
  static const std::map<std::string, std::string> kAliases{
      {"-s", "--sample"},        {"-t", "--trace"},
      {"-o", "--output"},        {"-f", "--force-overwrite"},
      {"-c", "--capture-range"}, {"-x", "--stop-on-exit"},
      {"-e", "--env-var"},       {"-d", "--duration"},
      {"-y", "--delay"},         {"-w", "--show-output"},
      {"-b", "--backtrace"},     {"-n", "--inherit-environment"},
      {"-p", "--nvtx-capture"},  {"--gpu-metrics-device", "--gpu-metrics-devices"}};
  auto it = kAliases.find(flag);
  return it == kAliases.end() ? flag : it->second;
}

// One item "--opt value" (a space inside) becomes two tokens.
std::vector<std::string> split_items(const std::vector<std::string>& items) {
  std::vector<std::string> out;
  for (const auto& item : items) {
    size_t space = item.find_first_of(" \t");
    size_t eq = item.find('=');
    bool split =
        is_option(item) && space != std::string::npos && (eq == std::string::npos || space < eq);
    if (!split) {
      out.push_back(item);
      continue;
    }
    size_t value = item.find_first_not_of(" \t", space);
    out.push_back(item.substr(0, space));
    if (value != std::string::npos) out.push_back(item.substr(value));
  }
  return out;
}

std::vector<Option> parse(const std::vector<std::string>& items) {
  std::vector<std::string> tokens = split_items(items);
  std::vector<Option> out;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Option o{nsys_option_name(tokens[i]), {tokens[i]}};
    bool takes_next = !o.name.empty() && tokens[i].find('=') == std::string::npos &&
                      i + 1 < tokens.size() && !is_option(tokens[i + 1]);
    if (takes_next) o.tokens.push_back(tokens[++i]);
    out.push_back(std::move(o));
  }
  return out;
}

std::vector<std::string> flatten(const std::vector<Option>& options) {
  std::vector<std::string> out;
  for (const auto& o : options) out.insert(out.end(), o.tokens.begin(), o.tokens.end());
  return out;
}

std::string option_value(const Option& o) {
  size_t eq = o.tokens[0].find('=');
  if (eq != std::string::npos) return o.tokens[0].substr(eq + 1);
  return o.tokens.size() > 1 ? o.tokens[1] : "";
}

bool lists_sqlite(const std::string& value) {
  std::string padded = "," + value + ",";
  return padded.find(",sqlite,") != std::string::npos;
}

}  // namespace

std::string nsys_option_name(const std::string& token) {
  if (!is_option(token)) return "";
  return canonical(token.substr(0, token.find('=')));
}

std::vector<std::string> merge_nsys_args(const std::vector<std::string>& defaults,
                                         const std::vector<std::string>& extra) {
  std::vector<Option> merged = parse(defaults);
  size_t n_defaults = merged.size();
  for (auto& e : parse(extra)) {
    bool replaced = false;
    for (size_t i = 0; i < n_defaults && !replaced && !e.name.empty(); ++i) {
      if (merged[i].name != e.name) continue;
      merged[i] = e;
      replaced = true;
    }
    if (!replaced) merged.push_back(std::move(e));
  }
  return flatten(merged);
}

std::vector<std::string> add_sqlite_export(const std::vector<std::string>& args) {
  std::vector<Option> options = parse(args);
  for (auto& o : options) {
    if (o.name != "--export") continue;
    std::string value = option_value(o);
    if (lists_sqlite(value)) return args;
    std::string merged = (value.empty() || value == "none") ? "sqlite" : value + ",sqlite";
    o.tokens = {"--export=" + merged};
    return flatten(options);
  }
  std::vector<std::string> out = args;
  out.push_back("--export=sqlite");
  return out;
}

bool has_gpu_metrics_option(const std::vector<std::string>& args) {
  for (const auto& o : parse(args))
    if (o.name == "--gpu-metrics-devices") return true;
  return false;
}

std::vector<std::string> gpu_metrics_wrapper(const std::vector<std::string>& nsys_argv) {
  std::vector<std::string> quoted;
  for (const auto& a : nsys_argv) quoted.push_back(shell_word(a));
  std::string script =
      "if [ \"${LOCAL_RANK:-${SLURM_LOCALID:-0}}\" = 0 ]; then "
      "set -- --gpu-metrics-devices=all \"$@\"; fi; exec " +
      join(quoted, " ") + " \"$@\"";
  return {"sh", "-c", script, "nsys"};
}

}  // namespace bridge
