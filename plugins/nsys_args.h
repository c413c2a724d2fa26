// The nsys command-line pieces of the nsys plugin: merging the user's nsys_extra_args into
// the default options, adding the sqlite export, and the per-rank GPU-metrics wrapper.
//
// Options are compared by canonical long name (`-t` is `--trace`, `-o` is `--output`, ...).
// An extra option replaces a default option of the same name in place, whichever form either
// uses (`--opt=v`, `--opt v` as two list items, or one item "--opt v"); other extras are
// appended in order. Tokens are kept exactly as given: nothing here expands `%q{...}`.
#pragma once

#include <string>
#include <vector>

namespace bridge {

// "--trace" for "-t" and "--trace=x"; "" for a token that is not an option.
std::string nsys_option_name(const std::string& token);

std::vector<std::string> merge_nsys_args(const std::vector<std::string>& defaults,
                                         const std::vector<std::string>& extra);

// Adds `--export=sqlite`, or appends `,sqlite` to an existing --export (replacing `none`);
// unchanged when an export already includes sqlite.
std::vector<std::string> add_sqlite_export(const std::vector<std::string>& args);

// True when `args` already choose GPU-metrics devices themselves.
bool has_gpu_metrics_option(const std::vector<std::string>& args);

// `sh -c '<script>' nsys` wrapping `nsys_argv`: at run time, the rank whose local rank
// (LOCAL_RANK, else SLURM_LOCALID, else 0) is 0 adds --gpu-metrics-devices=all, so exactly
// one process per node samples the node's GPUs. The runtime command follows as "$@".
std::vector<std::string> gpu_metrics_wrapper(const std::vector<std::string>& nsys_argv);

}  // namespace bridge
