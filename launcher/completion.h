// Shell completion scripts for `bridge-launch completion bash|zsh`.
//
// The scripts complete subcommands, options, executor names, plugin and GPU names, recipe
// files (*.yaml, *.yml) and job ids (asked from `bridge-launch list --format json` at
// completion time, so they are always current). zsh reuses the bash function through
// bashcompinit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "plugins/plugin.h"

namespace bridge {

// A subcommand as `bridge-launch --help` lists it: the CLI passes the rows of its one
// command table (launcher/cli.cpp), so a new command is completed without a second list.
struct CompletionCommand {
  std::string_view name;
  std::string_view summary;
};

// The script for `shell` (bash, zsh, fish; nullopt for another), completing `commands` and the
// plugin names of `plugins` (Services::plugins).
std::optional<std::string> completion_script(const std::string& shell,
                                             const std::vector<CompletionCommand>& commands,
                                             const std::vector<PluginInfo>& plugins);

}  // namespace bridge
