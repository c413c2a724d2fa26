#include "base/suggest.h"

#include <algorithm>
#include <cctype>

namespace bridge {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      bool same = std::tolower(static_cast<unsigned char>(a[i - 1])) ==
                  std::tolower(static_cast<unsigned char>(b[j - 1]));
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (same ? 0 : 1)});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

// Short names users type from habit (Megatron CLI flags, papers) for long recipe keys.
std::string expand_abbreviation(std::string_view word) {
  static const std::vector<std::pair<std::string_view, std::string_view>> kAliases{
      {"tp", "tensor_model_parallel_size"},
      {"pp", "pipeline_model_parallel_size"},
      {"vpp", "virtual_pipeline_model_parallel_size"},
      {"cp", "context_parallel_size"},
      {"ep", "expert_model_parallel_size"},
      {"etp", "expert_tensor_parallel_size"},
      {"sp", "sequence_parallel"},
      {"ng", "num_gpus"},
      {"gn", "gpus_per_node"},
      // Precision names as PyTorch and papers spell them.
      {"bfloat16", "bf16"},
      {"float16", "fp16"},
      {"half", "fp16"},
      {"float32", "fp32"},
      {"float", "fp32"}};
  for (auto [alias, full] : kAliases)
    if (word == alias) return std::string(full);
  return {};
}

}  // namespace

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string alias = expand_abbreviation(word);
  if (!alias.empty() && std::find(candidates.begin(), candidates.end(), alias) != candidates.end())
    return alias;
  std::string best;
  size_t best_distance = SIZE_MAX;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    // A prefix/abbreviation ("tp" for "tp_comm_overlap") is also a useful hint.
    bool contains = word.size() >= 3 && c.find(word) != std::string::npos;
    if (contains) d = std::min(d, c.size() / 3);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  size_t limit = std::max<size_t>(1, (word.size() + 1) / 3);  // "tp" must not suggest "gpu"
  return best_distance <= limit ? best : std::string{};
}

std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string m = closest_match(word, candidates);
  return m.empty() ? std::string{} : " (did you mean `" + m + "`?)";
}

}  // namespace bridge
