// Shell completion scripts for `bridge-launch completion bash|zsh`.
//
// The scripts complete subcommands, options, executor names, plugin and GPU names, recipe
// files (*.yaml, *.yml) and job ids (asked from `bridge-launch list --format json` at
// completion time, so they are always current). zsh reuses the bash function through
// bashcompinit.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plugins/plugin.h"

namespace bridge {

// The script for `shell` (bash, zsh, fish; nullopt for another), completing the plugin names
// of `plugins` (Services::plugins).
std::optional<std::string> completion_script(const std::string& shell,
                                             const std::vector<PluginInfo>& plugins);

}  // namespace bridge
