// The command-line interface: argument parsing, command dispatch, output and exit codes.
//
// run_cli is everything `main` does: it never throws (third-party exceptions are caught
// here) and returns the process exit code: 0 success, 1 runtime failure, 2 usage
// error or invalid recipe, 130 interrupted. Results go to `out`, diagnostics to `err`, logs to
// `services.log` (main: a logger writing to stderr; run_cli sets its level from -v/-q).
#pragma once

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace bridge {

// Rewrites Megatron-style two-letter single-dash options (-ng, -gn, also -ng=16) to the
// long forms CLI11 accepts.
std::vector<std::string> translate_short_options(const std::vector<std::string>& args);

// Moves the options written before a subcommand's name behind it, so that they apply to the
// subcommand (`--dry-run ablate ...` is `ablate --dry-run ...`). Unchanged when there is none.
std::vector<std::string> move_options_behind_subcommand(
    const std::vector<std::string>& args, const std::vector<std::string>& subcommands);

// The executor a plain launch names (`--executor X`, `-e X`, `--executor=X`), read before the
// parser is built; "" when anything on the command line can make it something else than a
// submission (a subcommand's name, --dry-run, --help, --version). run_cli starts that
// executor's submission early with it; whatever the parser then decides (it refuses a
// repeated --executor, for one) drops the early start unless it is that same launch.
// Conservative by design: a wrong guess costs a started and stopped sbatch, nothing else.
std::string executor_of_a_plain_launch(const std::vector<std::string>& args);

// Whether `arg` (after translate_short_options) is a plan option that takes its value in the
// next argument, read from the names add_plan_options defines its options with.
bool takes_value(std::string_view arg);

// Every name of every plan option that takes a value, as the CLI11 parser built by
// add_plan_options reports it (what CliTest checks takes_value against).
std::vector<std::string> plan_option_names_taking_a_value();

struct Services;
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err,
            const Services& services);

}  // namespace bridge
