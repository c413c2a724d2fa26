#include "launcher/completion.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "model/executor_kind.h"
#include "model/gpu_table.h"
#include "model/recipe_loader.h"
#include "plan/plan.h"
#include "plugins/plugin.h"
#include "system/templates.h"

namespace bridge {

namespace {

// A summary cut to its first clause, for the shells' one-line descriptions.
std::string short_summary(std::string_view summary) {
  size_t end = std::min(summary.find(": "), summary.find(" ("));
  return std::string(summary.substr(0, end));
}

// One override the shells complete: `word` is what is inserted ("model.tp=" style keys end in
// '=', section prefixes in '.'), `values` what may follow the '='.
struct RecipeWords {
  std::vector<std::pair<std::string, std::string>> keys;  // "path=" -> type text
  std::vector<std::string> prefixes;                      // "model.", "name=", ...
  // value list ("true false") -> the keys that take it, in first-seen order
  std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> values;
};

std::string type_text(const RecipeKeyDoc& d) {
  if (d.kind != RecipeKeyKind::kInteger) return d.type;
  if (d.min && d.max) return fmt::format("integer {}..{}", *d.min, *d.max);
  if (d.min) return fmt::format("integer >= {}", *d.min);
  return d.type;
}

// What a key's value may be, for completion: enum values, booleans, suggested strings.
std::vector<std::string> completion_values(const RecipeKeyDoc& d) {
  switch (d.kind) {
    case RecipeKeyKind::kEnum:
    case RecipeKeyKind::kString:
      return d.values;
    case RecipeKeyKind::kBoolean:
      return {"true", "false"};
    case RecipeKeyKind::kVersionOrFalse:
      return {"false"};
    default:
      return {};
  }
}

// Built per call from the plugin table the caller passes (a completion script is made once).
RecipeWords recipe_words(const std::vector<PluginInfo>& plugins) {
  RecipeWords w;
  auto add_prefix = [&](const std::string& p) {
    if (std::find(w.prefixes.begin(), w.prefixes.end(), p) == w.prefixes.end())
      w.prefixes.push_back(p);
  };
  for (const RecipeKeyDoc& d : recipe_key_reference()) {
    w.keys.emplace_back(d.path + "=", type_text(d));
    size_t dot = d.path.find('.');
    add_prefix(dot == std::string::npos ? d.path + "=" : d.path.substr(0, dot + 1));
    std::vector<std::string> values = completion_values(d);
    if (values.empty()) continue;
    auto it = std::find_if(w.values.begin(), w.values.end(),
                           [&](const auto& v) { return v.first == values; });
    if (it == w.values.end())
      w.values.emplace_back(values, std::vector<std::string>{d.path});
    else
      it->second.push_back(d.path);
  }
  for (const auto& p : plugins)
    w.keys.emplace_back(fmt::format("plugins.{}=", p.name), p.description);
  add_prefix("plugins.");
  add_prefix("env.");
  return w;
}

std::string words(const std::vector<std::string>& list) {
  return fmt::format("{}", fmt::join(list, " "));
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::string command_names(const std::vector<CompletionCommand>& commands) {
  std::vector<std::string> names;
  for (const auto& c : commands) names.emplace_back(c.name);
  return words(names);
}

// The `case` arms of _bridge_launch_values (bash) and __bridge_launch_values (fish).
std::string bash_value_cases(const RecipeWords& recipe) {
  std::string out;
  for (const auto& [values, keys] : recipe.values)
    out += fmt::format("    {}) echo \"{}\" ;;\n", fmt::join(keys, "|"), words(values));
  return out;
}

// The embedded template completion.<shell>.tmpl (templates/): the scripts are shell code,
// kept in shell files; what they list is filled in here from the tables.
std::string completion_template(const std::string& shell) {
  return std::string(embedded_template("completion." + shell + ".tmpl").value_or(""));
}

std::string bash_script(const std::vector<CompletionCommand>& commands,
                        const std::vector<PluginInfo>& plugins) {
  const RecipeWords recipe = recipe_words(plugins);
  std::vector<std::string> keys;
  for (const auto& k : recipe.keys) keys.push_back(k.first);
  std::string script = completion_template("bash");
  replace_all(script, "@KEYS@", words(keys));
  replace_all(script, "@PREFIXES@", words(recipe.prefixes));
  replace_all(script, "@VALUE_CASES@", bash_value_cases(recipe));
  replace_all(script, "@COMMANDS@", command_names(commands));
  replace_all(script, "@EXECUTORS@", words(executor_names()));
  replace_all(script, "@GPUS@", words(gpu_names()));
  return script;
}

// A fish single-quoted word.
std::string fish_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

std::string fish_script(const std::vector<CompletionCommand>& commands,
                        const std::vector<PluginInfo>& plugins) {
  const RecipeWords recipe = recipe_words(plugins);
  std::string out = completion_template("fish");
  std::vector<std::string> values;
  for (const auto& [vals, keys] : recipe.values)
    values.push_back(
        fmt::format("        case {}\n            printf '%s\\n' {}\n", words(keys), words(vals)));
  std::vector<std::string> keys;
  for (const auto& [word, type] : recipe.keys)
    keys.push_back(fmt::format("            {} {}", word, fish_quote(type)));
  std::string subcommands;
  for (const auto& c : commands)
    subcommands += fmt::format("complete -c bridge-launch -n __fish_use_subcommand -a {} -d {}\n",
                               c.name, fish_quote(short_summary(c.summary)));
  replace_all(out, "@VALUE_CASES@", fmt::format("{}", fmt::join(values, "")));
  replace_all(out, "@KEYS@", fmt::format("{}", fmt::join(keys, " \\\n")));
  replace_all(out, "@PREFIXES@", words(recipe.prefixes));
  replace_all(out, "@SUBCOMMANDS@\n", subcommands);
  replace_all(out, "@EXECUTORS@", words(executor_names()));
  replace_all(out, "@GPUS@", words(gpu_names()));
  return out;
}

}  // namespace

std::optional<std::string> completion_script(const std::string& shell,
                                             const std::vector<CompletionCommand>& commands,
                                             const std::vector<PluginInfo>& plugins) {
  if (shell == "bash") return bash_script(commands, plugins);
  if (shell == "zsh") return completion_template("zsh") + bash_script(commands, plugins);
  if (shell == "fish") return fish_script(commands, plugins);
  return std::nullopt;
}

}  // namespace bridge
