// The flat performance recipes of Megatron-Bridge 0.6.2 (megatron.bridge.perf_recipes), the
// only configs its scripts/performance/run_script.py runs (adapter megatron_bridge): one per
// model recipe, task, GPU type and compute dtype, at one or more GPU counts. The table is
// generated from the release (tests/conformance/perf_recipe_table.py) and checked against it
// on every conformance run.
//
// run_script.py takes the recipe for -ng GPUs when there is one; otherwise another GPU count
// of the same model/task/GPU/dtype, and then applies its "post overrides" (among them
// overlap_param_gather_with_optimizer_step; see overlap_data_parallel.cpp, rule R1). Without
// any, it stops: "No flat perf recipe found".
#pragma once

#include <fmt/format.h>

#include <array>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/recipe.h"
#include "model/topology.h"

namespace bridge {

// The generated tables below hold no pointer: in a position-independent binary each pointer of
// a table is a relocation that the start of every command applies, and each page holding one
// is copied on write (when these tables were string_views, a fifth of a dry-run:
// docs/performance.md, round 6). Texts are held in the row (FixedText) or as offsets into one
// pool of NUL-terminated texts per table (TextPairs). A row is read where the table holds it:
// PerfRecipeBase::values() finds its table by the row's address, so a copy of a row has none.

// A text of at most N bytes held in the row. A longer literal does not compile.
template <size_t N>
class FixedText {
 public:
  constexpr FixedText() = default;
  template <size_t M>
  constexpr FixedText(const char (&literal)[M]) : size_(M - 1) {  // NOLINT: implicit by design
    static_assert(M - 1 <= N, "a generated text is longer than its FixedText");
    for (size_t i = 0; i + 1 < M; ++i) text_[i] = literal[i];
  }
  constexpr std::string_view view() const { return {text_.data(), size_}; }
  constexpr operator std::string_view() const { return view(); }  // NOLINT: implicit by design
  constexpr bool empty() const { return size_ == 0; }
  // Two FixedTexts compare by view(): with C++20's reversed candidates, operators of their
  // own would make `text == "literal"` ambiguous.
  friend constexpr bool operator==(const FixedText& a, std::string_view b) { return a.view() == b; }
  friend constexpr auto operator<=>(const FixedText& a, std::string_view b) {
    return a.view() <=> b;
  }
  // Streams (test messages) print the text.
  template <class Stream>
  requires requires(Stream& out, std::string_view text) { out << text; }
  friend Stream& operator<<(Stream& out, const FixedText& text) {
    out << text.view();
    return out;
  }

 private:
  std::array<char, N> text_{};
  size_t size_ = 0;
};

// Two texts of a table row, as offsets into the table's pool.
struct TextPairCell {
  uint16_t first_at;
  uint16_t second_at;
};

// The pairs of one row, read against the table's pool; Pair is an aggregate of two
// string_views, made when read.
template <class Pair>
class TextPairs {
 public:
  class iterator {
   public:
    using value_type = Pair;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    iterator(const char* text, const TextPairCell* cell) : text_(text), cell_(cell) {}
    Pair operator*() const {
      return Pair{std::string_view(text_ + cell_->first_at),
                  std::string_view(text_ + cell_->second_at)};
    }
    iterator& operator++() {
      ++cell_;
      return *this;
    }
    iterator operator++(int) {
      iterator before = *this;
      ++cell_;
      return before;
    }
    bool operator==(const iterator& other) const { return cell_ == other.cell_; }

   private:
    const char* text_ = nullptr;
    const TextPairCell* cell_ = nullptr;
  };

  TextPairs() = default;
  TextPairs(const char* text, std::span<const TextPairCell> cells) : text_(text), cells_(cells) {}
  iterator begin() const { return {text_, cells_.data()}; }
  iterator end() const { return {text_, cells_.data() + cells_.size()}; }
  bool empty() const { return cells_.empty(); }
  size_t size() const { return cells_.size(); }

 private:
  const char* text_ = nullptr;
  std::span<const TextPairCell> cells_;
};

// A generated table of rows with runs of pairs: the rows, the pool and the cells (built from
// addresses at run time, so the table itself holds none).
template <class Row>
struct PairTable {
  std::span<const Row> rows;
  const char* text = nullptr;
  std::span<const TextPairCell> cells;
  template <class Pair>
  TextPairs<Pair> pairs(uint32_t first, uint32_t count) const {
    return {text, cells.subspan(first, count)};
  }
};

// The GPU counts of one recipe, held in the row (at most kMax; a generated row with more does
// not compile).
class PerfRecipeGpuCounts {
 public:
  static constexpr size_t kMax = 4;
  constexpr PerfRecipeGpuCounts(std::initializer_list<int64_t> counts) {
    if (counts.size() > kMax) too_many_gpu_counts();
    for (int64_t c : counts) counts_[size_++] = c;
  }
  constexpr const int64_t* begin() const { return counts_.data(); }
  constexpr const int64_t* end() const { return counts_.data() + size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr size_t size() const { return size_; }

 private:
  static void too_many_gpu_counts();  // not defined: called only where a row has too many
  std::array<int64_t, kMax> counts_{};
  size_t size_ = 0;
};

struct PerfRecipe {
  FixedText<40> model_recipe;  // -mr, e.g. qwen3_30b_a3b
  FixedText<12> task;          // pretrain | sft | peft
  FixedText<12> gpu;           // -g
  FixedText<12> dtype;         // bf16 | fp8cs | fp8mx | fp8sc | nvfp4 (from -c)
  PerfRecipeGpuCounts gpu_counts;
};

std::span<const PerfRecipe> megatron_bridge_perf_recipes();

// run_script.py's spelling of -c in recipe names: fp8_cs -> fp8cs, ...
std::string perf_recipe_dtype(std::string_view compute_dtype);

const PerfRecipe* find_perf_recipe(std::string_view model_recipe, std::string_view task,
                                   std::string_view gpu, std::string_view dtype);

// The GPU count whose recipe run_script.py builds for -ng: -ng itself when the release has a
// recipe for it, else the count its default-count table (_DEFAULT_GPU_COUNT_OVERRIDES) names
// for the model, else the largest count.
int64_t perf_recipe_count_for(const PerfRecipe& recipe, int64_t num_gpus);

// The recipe's function name in megatron.bridge.perf_recipes at one GPU count, e.g.
// qwen3_30b_a3b_pretrain_8gpu_gb200_bf16_config.
std::string perf_recipe_function(const PerfRecipe& recipe, int64_t gpu_count);

// A flat performance recipe's `env_vars` (ConfigContainer.env_vars), each value as
// Megatron-Bridge puts it into the process environment (Python's str(): 1 -> "1",
// True -> "True"). Megatron-Bridge applies them at the start of every rank, in
// runtime_config_update, with os.environ.setdefault: a variable the rank's environment already
// has keeps its value. Generated from the release (tests/conformance/perf_recipe_table.py);
// every recipe of megatron_bridge_perf_recipes() has a row, in name order.
struct PerfRecipeEnvVar {
  std::string_view name;
  std::string_view value;
};

struct PerfRecipeEnv {
  FixedText<96> function;  // perf_recipe_function()
  uint32_t first = 0;      // its run of the table's cells
  uint32_t count = 0;
  // Why the recipe does not build from the release's PyPI package (a file its code reads is
  // not packaged), so its env_vars are unknown; "" for a recipe that builds.
  FixedText<128> does_not_build = {};
  TextPairs<PerfRecipeEnvVar> vars() const;
};

PairTable<PerfRecipeEnv> megatron_bridge_perf_recipe_env_table();
std::span<const PerfRecipeEnv> megatron_bridge_perf_recipe_env();
const PerfRecipeEnv* find_perf_recipe_env(std::string_view function);

// The env row of the performance recipe the job runs: the megatron_bridge adapter's
// run_script.py builds it from the recipe's model recipe, task, GPU, compute dtype and GPU
// count (perf_recipe_count_for). nullptr for another adapter or a plan without one.
const PerfRecipeEnv* perf_recipe_env_of(const Recipe& r, const Topology& t);

// A flat performance recipe's own values of the recipe keys it decides, as a recipe writes
// them ("4", "true", "alltoall", "[attn,mlp]", a userbuffers preset's name), read from the
// recipe as built, before the runtime finalises it; "null" where the recipe leaves a key to
// the runtime. Key `comm_overlap` with value "null": the recipe has no CommOverlapConfig; key
// `pipeline_split`: the fields by which it splits layers unevenly over pipeline stages; key
// `precision_aware_optimizer`: "true" where its optimizer is precision-aware.
// model.cuda_graph_scope holds the release's cuda_graph_modules and cuda_graph_scope together
// (both name what is captured; Megatron-Bridge reads the two as one list).
// Generated from the release (tests/conformance/perf_recipe_table.py --write-base); the base
// of a plan that names the recipe (model/recipe_base.h). In name order.
struct PerfRecipeBaseValue {
  std::string_view key_text;
  std::string_view value_text;
  std::string_view key() const { return key_text; }
  std::string_view value() const { return value_text; }
};

struct PerfRecipeBase {
  FixedText<96> function;  // perf_recipe_function()
  uint32_t first = 0;      // its run of the table's cells
  uint32_t count = 0;
  // The Hugging Face model id whose config.json the recipe reads and the survey did not have
  // offline; its values are then unknown. "" otherwise.
  FixedText<64> needs_hub_config = {};
  // Its values, from whichever of the two tables holds the row.
  TextPairs<PerfRecipeBaseValue> values() const;
};

PairTable<PerfRecipeBase> megatron_bridge_perf_recipe_base_table();
std::span<const PerfRecipeBase> megatron_bridge_perf_recipe_base();
const PerfRecipeBase* find_perf_recipe_base(std::string_view function);

// The same for every library recipe of megatron.bridge.recipes (the hydra adapter's base), a
// row for each function the release has; needs_hub_config "-" marks one that does not build.
PairTable<PerfRecipeBase> megatron_bridge_library_recipe_base_table();
std::span<const PerfRecipeBase> megatron_bridge_library_recipe_base();

// The library recipe a recipe-driven script builds for model recipe, task, GPU, dtype (as in
// recipe names: fp8cs) and GPU count: <mr>_<task>_<n>gpu_<gpu>_<dtype>_config, else the same
// GPU and dtype at another count (lowest first), else any <mr>_<task>_<n>gpu_* in name order,
// else <mr>_<task>_config; nullptr when the release has none of them.
const PerfRecipeBase* find_library_recipe(std::string_view model_recipe, std::string_view task,
                                          std::string_view gpu, std::string_view dtype,
                                          int64_t num_gpus);

}  // namespace bridge

// Formatting a FixedText formats its text.
template <size_t N>
struct fmt::formatter<bridge::FixedText<N>> : fmt::formatter<std::string_view> {
  template <class FormatContext>
  auto format(const bridge::FixedText<N>& text, FormatContext& ctx) const {
    return fmt::formatter<std::string_view>::format(text.view(), ctx);
  }
};
