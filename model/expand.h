// `${VAR}` expansion for the two places recipes allow it: env: values and executor paths.
//
// Only the exact form ${NAME} (NAME a shell identifier) is expanded, from the submitting
// host's environment at plan time; `$${` writes a literal `${`. Every other `$` is kept as
// is, so `$(...)`, `$HOME` and backticks reach the rank untouched. An unset variable is an
// error naming it. A leading `~/` in a path expands to $HOME.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "system/host_env.h"

namespace bridge {

// Returns the expanded text, or nullopt after recording an error. `expanded` (optional)
// receives the names of the variables that were substituted.
std::optional<std::string> expand_vars(const std::string& text, const HostEnvironment& env,
                                       const std::string& path, const SourceLoc& loc,
                                       Diagnostics& diags,
                                       std::vector<std::string>* expanded = nullptr);

std::optional<std::string> expand_path(const std::string& text, const HostEnvironment& env,
                                       const std::string& path, const SourceLoc& loc,
                                       Diagnostics& diags);

}  // namespace bridge
