#include "app/completion.h"

#include <fmt/format.h>

#include "launcher/gpu_table.h"
#include "launcher/plan/plan.h"
#include "plugins/plugin.h"

namespace bridge {

namespace {

std::string words(const std::vector<std::string>& list) {
  return fmt::format("{}", fmt::join(list, " "));
}

std::string bash_script() {
  std::vector<std::string> plugins;
  for (const auto& p : plugin_registry()) plugins.push_back(p.name);
  return fmt::format(R"BASH(# bash completion for bridge-launch. Load with:
#   source <(bridge-launch completion bash)
_bridge_launch_job_ids() {{
  bridge-launch list --format json 2>/dev/null | sed -n 's/^ *"id": "\([^"]*\)".*/\1/p'
}}

_bridge_launch() {{
  local cur prev cmd i
  COMPREPLY=()
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  local commands="validate plan plugins list status logs why cancel compare ablate advise init completion"
  local launch_opts="-e --executor -ng --num-gpus -gn --gpus-per-node -g --gpu -E --env --strict --format --template --dry-run --wait -v --verbose -q --quiet --help --version"
  cmd=""
  for ((i = 1; i < COMP_CWORD; i++)); do
    case " $commands " in *" ${{COMP_WORDS[i]}} "*) cmd="${{COMP_WORDS[i]}}"; break ;; esac
  done
  case "$prev" in
    -e|--executor) COMPREPLY=($(compgen -W "{executors}" -- "$cur")); return 0 ;;
    -g|--gpu) COMPREPLY=($(compgen -W "{gpus}" -- "$cur")); return 0 ;;
    --format) COMPREPLY=($(compgen -W "text json" -- "$cur")); return 0 ;;
    --template|-o|--output) COMPREPLY=($(compgen -f -- "$cur")); return 0 ;;
    --shape) COMPREPLY=($(compgen -W "dense moe" -- "$cur")); return 0 ;;
    --rank|--window|-ng|--num-gpus|-gn|--gpus-per-node|-E|--env|--vary) return 0 ;;
  esac
  case "$cmd" in
    status|logs|why|cancel|compare)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "--format -f --follow --rank --window --help" -- "$cur"))
      else
        COMPREPLY=($(compgen -W "$(_bridge_launch_job_ids)" -- "$cur"))
      fi
      return 0 ;;
    list) COMPREPLY=($(compgen -W "--format --help" -- "$cur")); return 0 ;;
    plugins) COMPREPLY=($(compgen -W "--help" -- "$cur")); return 0 ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")); return 0 ;;
    init) COMPREPLY=($(compgen -W "--shape -g --gpu -ng --num-gpus -gn --gpus-per-node -e --executor -o --output --force --help" -- "$cur")); return 0 ;;
    advise)
      if [[ "$cur" == -* ]]; then
        COMPREPLY=($(compgen -W "-e --executor -ng --num-gpus -gn --gpus-per-node -g --gpu -E --env --strict --format --template --help" -- "$cur"))
        return 0
      fi ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=($(compgen -W "$launch_opts --vary --grid" -- "$cur"))
  elif [[ "$cur" == *=* || "$cur" == plugins.* ]]; then
    COMPREPLY=($(compgen -W "{plugin_keys}" -- "$cur"))
  elif [[ -z "$cmd" && $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "$commands" -- "$cur") $(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
  else
    COMPREPLY=($(compgen -f -X '!*.y*ml' -- "$cur") $(compgen -d -- "$cur"))
  fi
  return 0
}}
complete -o filenames -F _bridge_launch bridge-launch
)BASH",
                     fmt::arg("executors", words(executor_names())),
                     fmt::arg("gpus", words(gpu_names())), fmt::arg("plugin_keys", [&] {
                       std::vector<std::string> keys;
                       for (const auto& p : plugins) keys.push_back("plugins." + p);
                       return words(keys);
                     }()));
}

}  // namespace

std::optional<std::string> completion_script(const std::string& shell) {
  if (shell == "bash") return bash_script();
  if (shell == "zsh")
    return "#compdef bridge-launch\n# zsh completion for bridge-launch. Load with:\n"
           "#   source <(bridge-launch completion zsh)\n"
           "autoload -U +X bashcompinit && bashcompinit\n" +
           bash_script();
  return std::nullopt;
}

}  // namespace bridge
