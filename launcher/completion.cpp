#include "launcher/completion.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "model/executor_kind.h"
#include "model/gpu_table.h"
#include "model/recipe_loader.h"
#include "plan/plan.h"
#include "plugins/plugin.h"

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

std::string bash_script(const std::vector<CompletionCommand>& commands,
                        const std::vector<PluginInfo>& plugins) {
  const RecipeWords recipe = recipe_words(plugins);
  std::vector<std::string> keys;
  for (const auto& k : recipe.keys) keys.push_back(k.first);
  std::string script = R"BASH(# bash completion for bridge-launch. Load with:
#   source <(bridge-launch completion bash)
# Completes subcommands, options, recipe files, job ids, and recipe overrides: a section
# (`model.`), its keys (`model.ten` -> `model.tensor_model_parallel_size=`) and, after the
# `=`, the values of enums, booleans and GPU types.
_bridge_launch_job_ids() {
  bridge-launch list --format json 2>/dev/null | sed -n 's/^ *"id": "\([^"]*\)".*/\1/p'
}

_bridge_launch_keys="@KEYS@"
_bridge_launch_prefixes="@PREFIXES@"

# The values recipe key $1 takes (empty when they are not a short list).
_bridge_launch_values() {
  case "$1" in
@VALUE_CASES@  esac
}

# Adds the completions of the override word $1 (KEY or KEY=VALUE) to COMPREPLY.
_bridge_launch_override() {
  local word="$1" key values w
  local -a found
  if [[ "$word" == *=* ]]; then
    key="${word%%=*}"
    values="$(_bridge_launch_values "$key")"
    [[ -z "$values" ]] && return 0
    # Where '=' breaks words (the default), readline replaces only the text after it.
    if [[ "$COMP_WORDBREAKS" == *=* ]]; then
      found=($(compgen -W "$values" -- "${word#*=}"))
    else
      found=($(compgen -P "$key=" -W "$values" -- "${word#*=}"))
    fi
  elif [[ "$word" == *.* ]]; then
    found=($(compgen -W "$_bridge_launch_keys" -- "$word"))
  else
    found=($(compgen -W "$_bridge_launch_prefixes" -- "$word"))
  fi
  COMPREPLY+=("${found[@]}")
  [[ ${#found[@]} -gt 0 ]] || return 0
  # Overrides are no file names: readline must not quote their '='.
  [[ ${#COMPREPLY[@]} -eq ${#found[@]} ]] && compopt +o filenames 2>/dev/null
  # KEY= and section. go on without a space.
  for w in "${found[@]}"; do
    [[ "$w" == *[=.] ]] && { compopt -o nospace 2>/dev/null; break; }
  done
  return 0
}

_bridge_launch() {
  local cur prev cmd i word
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  prev="${COMP_WORDS[COMP_CWORD-1]}"
  # KEY=VALUE is split at '=' by bash's default COMP_WORDBREAKS: put it back together.
  word="$cur"
  if [[ "$cur" == "=" && $COMP_CWORD -gt 1 ]]; then
    word="${COMP_WORDS[COMP_CWORD-1]}="
    prev="${COMP_WORDS[COMP_CWORD-2]}"
  elif [[ "$prev" == "=" && $COMP_CWORD -gt 2 ]]; then
    word="${COMP_WORDS[COMP_CWORD-2]}=$cur"
    prev="${COMP_WORDS[COMP_CWORD-3]}"
  fi
  local commands="@COMMANDS@"
  local launch_opts="-e --executor -ng --num-gpus -gn --gpus-per-node -g --gpu -E --env --strict --format --template --dry-run --wait -v --verbose -q --quiet --help --version"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case " $commands " in *" ${COMP_WORDS[i]} "*) cmd="${COMP_WORDS[i]}"; break ;; esac
  done
  case "$prev" in
    -e|--executor) COMPREPLY=($(compgen -W "@EXECUTORS@" -- "$cur")); return 0 ;;
    -g|--gpu) COMPREPLY=($(compgen -W "@GPUS@" -- "$cur")); return 0 ;;
    --format)
      if [[ "$cmd" == schema ]]; then
        COMPREPLY=($(compgen -W "json" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "text json" -- "$cur"))
      fi
      return 0 ;;
    --template|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
    --shape) COMPREPLY=($(compgen -W "dense moe" -- "$cur")); return 0 ;;
    --vary) _bridge_launch_override "$word"; return 0 ;;
    --rank|--node|--tail|--grep|--window|-ng|--num-gpus|-gn|--gpus-per-node|-E|--env) return 0 ;;
  esac
  case "$cmd" in
    status|logs|why|cancel|compare)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "--format -f --follow --rank --node --tail --grep --window --help" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$(_bridge_launch_job_ids)" -- "$cur"))
      fi
      return 0 ;;
    list) COMPREPLY=($(compgen -W "--format --help" -- "$cur")); return 0 ;;
    plugins) COMPREPLY=($(compgen -W "--format --help" -- "$cur")); return 0 ;;
    schema) COMPREPLY=($(compgen -W "--format --help" -- "$cur")); return 0 ;;
    completion) COMPREPLY=($(compgen -W "bash zsh fish" -- "$cur")); return 0 ;;
    init) COMPREPLY=($(compgen -W "--shape -g --gpu -ng --num-gpus -gn --gpus-per-node -e --executor -o --output --force --help" -- "$cur")); return 0 ;;
    advise)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "-e --executor -ng --num-gpus -gn --gpus-per-node -g --gpu -E --env --strict --format --template --help" -- "$cur"))
        return 0
      fi ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$launch_opts --vary --grid --window" -- "$cur"))
  elif [[ -z "$cmd" && $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands" -- "$cur") $(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
  elif [[ "$word" == *=* ]]; then
    _bridge_launch_override "$word"
  else
    COMPREPLY=($(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
    _bridge_launch_override "$word"
  fi
  return 0
}
complete -o filenames -F _bridge_launch bridge-launch
)BASH";
  std::vector<std::string> prefixes = recipe.prefixes;
  replace_all(script, "@KEYS@", words(keys));
  replace_all(script, "@PREFIXES@", words(prefixes));
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
  std::string out = R"FISH(# fish completion for bridge-launch. Load with:
#   bridge-launch completion fish | source
# or install it:
#   bridge-launch completion fish > ~/.config/fish/completions/bridge-launch.fish
# Completes subcommands, options, recipe files, job ids, and recipe overrides: a section
# (`model.`), its keys (`model.ten` -> `model.tensor_model_parallel_size=`) and, after the
# `=`, the values of enums, booleans and GPU types.

complete -c bridge-launch -e
complete -c bridge-launch -f

function __bridge_launch_job_ids
    command -q bridge-launch; or return
    bridge-launch list --format json 2>/dev/null | string replace -r -f '^ *"id": "([^"]*)".*' '$1'
end

# Commands that take a recipe file and KEY=VALUE overrides (and the bare launch).
function __bridge_launch_takes_recipe
    not __fish_seen_subcommand_from @NO_RECIPE@
end

# Recipe files, unless the token is an override (KEY=...).
function __bridge_launch_recipe_files
    string match -q -- '*=*' (commandline -ct); and return
    __fish_complete_suffix .yaml
    __fish_complete_suffix .yml
end

# The values recipe key $argv[1] takes.
function __bridge_launch_values
    switch $argv[1]
@VALUE_CASES@    end
end

# The overrides for the token under the cursor: section prefixes, KEY= words, or KEY=VALUE.
function __bridge_launch_overrides
    set -l tok (commandline -ct)
    if string match -q -- '*=*' $tok
        set -l key (string split -m 1 -- = $tok)[1]
        for value in (__bridge_launch_values $key)
            printf '%s=%s\n' $key $value
        end
    else if string match -q -- '*.*' $tok
        printf '%s\t%s\n' \
@KEYS@
    else
        printf '%s\n' @PREFIXES@
    end
end

)FISH";
  std::vector<std::string> values;
  for (const auto& [vals, keys] : recipe.values)
    values.push_back(
        fmt::format("        case {}\n            printf '%s\\n' {}\n", words(keys), words(vals)));
  std::vector<std::string> keys;
  for (const auto& [word, type] : recipe.keys)
    keys.push_back(fmt::format("            {} {}", word, fish_quote(type)));
  replace_all(out, "@NO_RECIPE@",
              "status logs why cancel compare list plugins completion init schema");
  replace_all(out, "@VALUE_CASES@", fmt::format("{}", fmt::join(values, "")));
  replace_all(out, "@KEYS@", fmt::format("{}", fmt::join(keys, " \\\n")));
  replace_all(out, "@PREFIXES@", words(recipe.prefixes));

  auto line = [&](const std::string& text) { out += "complete -c bridge-launch " + text + "\n"; };
  out += "# Subcommands\n";
  for (const auto& c : commands)
    line(fmt::format("-n __fish_use_subcommand -a {} -d {}", c.name,
                     fish_quote(short_summary(c.summary))));
  out += "\n# Options of the launch and of validate, plan, ablate, advise\n";
  const std::string plan_cmds =
      "'not __fish_seen_subcommand_from status logs why cancel list plugins completion schema "
      "compare init'";
  line("-n " + plan_cmds + " -s e -l executor -x -a " + fish_quote(words(executor_names())) +
       " -d 'executor'");
  line("-n " + plan_cmds + " -o ng -l num-gpus -x -d 'total GPUs'");
  line("-n " + plan_cmds + " -o gn -l gpus-per-node -x -d 'GPUs per node'");
  line("-n " + plan_cmds + " -s g -l gpu -x -a " + fish_quote(words(gpu_names())) +
       " -d 'GPU type'");
  line("-n " + plan_cmds + " -s E -l env -x -d 'extra launch env KEY=VALUE'");
  line("-n " + plan_cmds + " -l strict -d 'dropped requests are errors'");
  line("-n " + plan_cmds + " -l template -r -F -d 'sbatch template file'");
  line("-n " + plan_cmds + " -l dry-run -d 'print what would be submitted'");
  line("-n " + plan_cmds + " -l wait -d 'follow the job until it ends'");
  line("-n '__fish_seen_subcommand_from schema' -l format -x -a json -d 'output format'");
  line(
      "-n 'not __fish_seen_subcommand_from schema init cancel logs completion' -l format -x -a "
      "'text json' "
      "-d 'output format'");
  line("-s v -l verbose -d 'more logging'");
  line("-s q -l quiet -d 'less logging'");
  line("-s h -l help -d 'show help'");
  line("-n __fish_use_subcommand -l version -d 'show the version'");
  out += "\n# Jobs\n";
  line(
      "-n '__fish_seen_subcommand_from status logs why cancel compare' -a "
      "'(__bridge_launch_job_ids)'");
  line("-n '__fish_seen_subcommand_from logs' -s f -l follow -d 'follow until the job ends'");
  line("-n '__fish_seen_subcommand_from logs' -l rank -x -d 'only this rank'");
  line("-n '__fish_seen_subcommand_from logs' -l node -x -d 'only the ranks of this node'");
  line("-n '__fish_seen_subcommand_from logs' -l tail -x -d 'only the last N lines'");
  line("-n '__fish_seen_subcommand_from logs' -l grep -x -d 'only matching lines'");
  line(
      "-n '__fish_seen_subcommand_from compare ablate' -l window -x "
      "-d 'steady-state iterations FIRST:LAST'");
  line(
      "-n '__fish_seen_subcommand_from ablate' -l vary -x -a '(__bridge_launch_overrides)' "
      "-d 'KEY=V1,V2'");
  line("-n '__fish_seen_subcommand_from ablate' -l grid -d 'every combination'");
  out += "\n# init, completion\n";
  line("-n '__fish_seen_subcommand_from init' -l shape -x -a 'dense moe' -d 'model shape'");
  line("-n '__fish_seen_subcommand_from init' -s g -l gpu -x -a " + fish_quote(words(gpu_names())) +
       " -d 'GPU type'");
  line("-n '__fish_seen_subcommand_from init' -o ng -l num-gpus -x -d 'total GPUs'");
  line("-n '__fish_seen_subcommand_from init' -o gn -l gpus-per-node -x -d 'GPUs per node'");
  line("-n '__fish_seen_subcommand_from init' -s e -l executor -x -a " +
       fish_quote(words(executor_names())) + " -d 'executor'");
  line("-n '__fish_seen_subcommand_from init' -s o -l output -r -F -d 'write to FILE'");
  line("-n '__fish_seen_subcommand_from init' -l force -d 'replace an existing FILE'");
  line("-n '__fish_seen_subcommand_from completion' -x -a 'bash zsh fish'");
  out += "\n# Recipe files and KEY=VALUE overrides\n";
  line("-n __bridge_launch_takes_recipe -k -a '(__bridge_launch_recipe_files)'");
  line("-n __bridge_launch_takes_recipe -a '(__bridge_launch_overrides)'");
  return out;
}

}  // namespace

std::optional<std::string> completion_script(const std::string& shell,
                                             const std::vector<CompletionCommand>& commands,
                                             const std::vector<PluginInfo>& plugins) {
  if (shell == "bash") return bash_script(commands, plugins);
  if (shell == "zsh")
    return "#compdef bridge-launch\n# zsh completion for bridge-launch. Load with:\n"
           "#   source <(bridge-launch completion zsh)\n"
           "# bashcompinit's `complete` needs compinit's `compdef`: start it when the\n"
           "# shell has not (a plain ~/.zshrc).\n"
           "(( $+functions[compdef] )) || { autoload -U +X compinit && compinit; }\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bash_script(commands, plugins);
  if (shell == "fish") return fish_script(commands, plugins);
  return std::nullopt;
}

}  // namespace bridge
