// run_script.py's flags that set recipe keys, read as those keys.
//
// NVIDIA's guides write their knobs as run_script.py flags (`--moe_a2a_overlap true`,
// `--cuda_graph_impl none`, `--moe_flex_dispatcher_backend deepep`, `-tp 2`), and users carry
// them into runtime.args. run_script.py applies its flags after the Hydra overrides, so a
// flag there decides the value the job runs with: unread, it would bypass every rule and
// silently replace a planned value (`--moe_a2a_overlap true` also turns delay_wgrad_compute
// on and the shared-expert overlap off). So the megatron_bridge adapter's runtime.args are
// read here, before validation, as the keys each flag sets, with the values run_script.py
// gives them (utils/overrides.py of the release's scripts/performance).
//
// Contract: run_script_flag_uses is pure. read_run_script_flags sets each key a flag sets
// that the recipe file and the overrides leave unset (source: runtime.args), before the
// recipe base fills the rest; a key the user set stays, and the adapter's contradiction check
// compares it with the flag (an error when they differ, a warning when they agree).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "model/recipe.h"

namespace bridge {

// One recipe key a flag sets, with the value as a recipe writes it ("true", "[attn,mlp]").
struct RunScriptKeySetting {
  std::string key;
  std::string value;
};

// One flag of runtime.args with what it sets; `written` as the user wrote it.
struct RunScriptFlagUse {
  std::string written;  // e.g. "--moe_a2a_overlap true"
  std::vector<RunScriptKeySetting> sets;
};

// The flags in `args` that set recipe keys, in order. A flag whose value run_script.py would
// refuse (`--moe_a2a_overlap maybe`) sets nothing here; run_script.py stops on it at start.
std::vector<RunScriptFlagUse> run_script_flag_uses(const std::vector<std::string>& args);

// With the megatron_bridge adapter: the keys runtime.args's flags set, where unset.
void read_run_script_flags(Recipe& r, Diagnostics& diags);

}  // namespace bridge
