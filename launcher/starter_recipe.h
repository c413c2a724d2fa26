// The starter recipe `bridge-launch init` writes: a commented recipe for one shape (dense or
// MoE), GPU type, GPU count and executor, valid as written.
//
// Contract: starter_recipe() checks the choices (a known GPU type, ng a positive multiple of
// gn, one node for the local executor) and returns either the recipe text or a problem with a
// help line; it reads nothing and writes nothing. The text explains every key in a comment,
// for users who have only the repository. The layout is derived from the choices: dense is a
// Llama-3-8B-shaped model with tp 2 when a node has two GPUs to share; MoE is a
// Qwen3-30B-A3B-shaped model with ep = the largest power of two dividing ng (at most the 128
// experts). Overlap that needs a stable run first (TP, EP) is written off, with the comment
// saying how to turn it on; `bridge-launch advise` measures it.
#pragma once

#include <cstdint>
#include <string>

namespace bridge {

struct StarterChoices {
  std::string shape = "dense";  // dense | moe
  std::string gpu = "h100";
  int64_t num_gpus = 0;       // 0 = one node's worth (gn)
  int64_t gpus_per_node = 0;  // 0 = the GPU's default, at most ng
  std::string executor = "slurm";
  std::string command_line;  // shown in the header comment, e.g. "bridge-launch init ..."
};

struct StarterRecipe {
  std::string text;     // the recipe; empty when `problem` is set
  std::string problem;  // what is wrong with the choices
  std::string help;     // how to fix it
};

StarterRecipe starter_recipe(const StarterChoices& choices);

}  // namespace bridge
