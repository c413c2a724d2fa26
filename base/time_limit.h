// A job's time limit written the way Slurm writes it (`sbatch --time`), read once for every
// executor: Slurm passes the text on, Kubernetes turns it into an active deadline.
//
// Contract: time_limit_seconds accepts MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS,
// DAYS-HOURS, DAYS-HOURS:MINUTES and DAYS-HOURS:MINUTES:SECONDS (each part digits only) and
// UNLIMITED / INFINITE, which give 0 (no limit). Anything else gives nullopt. Pure.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace bridge {

std::optional<int64_t> time_limit_seconds(std::string_view text);

}  // namespace bridge
