#include "plan/megatron_bridge_release.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace bridge {

namespace {

constexpr std::string_view kBf16 = "{_target_:torch.bfloat16,_call_:false}";
constexpr std::string_view kFp16 = "{_target_:torch.float16,_call_:false}";

using Fields = std::vector<std::pair<std::string_view, std::string_view>>;

Fields base16(bool bf16) {
  std::string_view dtype = bf16 ? kBf16 : kFp16;
  Fields f{{bf16 ? "bf16" : "fp16", "true"}, {"params_dtype", dtype}, {"pipeline_dtype", dtype}};
  if (!bf16) f.emplace_back("grad_reduce_in_fp32", "false");
  return f;
}

Fields with(Fields f, const Fields& more) {
  f.insert(f.end(), more.begin(), more.end());
  return f;
}

const Fields& fp8_current_scaling() {
  static const Fields kFields{{"fp8", "hybrid"},
                              {"first_last_layers_bf16", "true"},
                              {"fp8_param", "true"},
                              {"fp8_param_gather", "true"},
                              {"num_layers_at_start_in_bf16", "1"},
                              {"num_layers_at_end_in_bf16", "1"}};
  return kFields;
}

const Fields& mxfp8() {
  static const Fields kFields{{"fp8", "e4m3"},
                              {"fp8_recipe", "mxfp8"},
                              {"fp8_param", "true"},
                              {"fp8_param_gather", "true"},
                              {"reuse_grad_buf_for_mxfp8_param_ag", "true"}};
  return kFields;
}

const Fields& fp8_subchannel() {
  static const Fields kFields{{"fp8", "hybrid"}, {"fp8_recipe", "blockwise"}};
  return kFields;
}

}  // namespace

const std::vector<MixedPrecisionRecipe>& mixed_precision_recipes() {
  static const std::vector<MixedPrecisionRecipe> kRecipes{
      {"bf16_mixed", base16(true)},
      {"fp16_mixed", base16(false)},
      {"bf16_with_fp8_current_scaling_mixed", with(base16(true), fp8_current_scaling())},
      {"fp16_with_fp8_current_scaling_mixed", with(base16(false), fp8_current_scaling())},
      {"bf16_with_mxfp8_mixed", with(base16(true), mxfp8())},
      {"fp16_with_mxfp8_mixed", with(base16(false), mxfp8())},
      {"bf16_with_fp8_subchannel_scaling_mixed", with(base16(true), fp8_subchannel())},
      {"fp16_with_fp8_subchannel_scaling_mixed", with(base16(false), fp8_subchannel())},
      {"bf16_with_nvfp4_mixed",
       with(base16(true), {{"fp4", "e2m1"}, {"fp4_param", "true"}, {"fp4_param_gather", "true"}})},
  };
  return kRecipes;
}

const MixedPrecisionRecipe* find_mixed_precision_recipe(std::string_view name) {
  for (const auto& r : mixed_precision_recipes())
    if (r.name == name) return &r;
  return nullptr;
}

std::string mixed_precision_recipe_name(const ModelSpec& m) {
  std::string base = m.precision.get_or("bf16");
  if (base != "bf16" && base != "fp16") return "";
  std::string dtype = m.compute_dtype.get_or("bf16");
  if (dtype == "fp8_cs") return base + "_with_fp8_current_scaling_mixed";
  if (dtype == "fp8_mx") return base + "_with_mxfp8_mixed";
  if (dtype == "fp8_sc") return base + "_with_fp8_subchannel_scaling_mixed";
  if (dtype == "nvfp4") return base == "bf16" ? "bf16_with_nvfp4_mixed" : "";
  return base + "_mixed";
}

std::string mixed_precision_object(const MixedPrecisionRecipe& base,
                                   const std::vector<std::pair<std::string, std::string>>& fields) {
  std::vector<std::pair<std::string, std::string>> merged;
  for (const auto& [k, v] : base.fields) merged.emplace_back(std::string(k), std::string(v));
  auto set = [&](const std::string& key, const std::string& value) {
    auto it =
        std::find_if(merged.begin(), merged.end(), [&](const auto& kv) { return kv.first == key; });
    if (it != merged.end())
      it->second = value;
    else
      merged.emplace_back(key, value);
  };
  for (const auto& [key, value] : fields) {
    set(key, value);
    // MixedPrecisionConfig keeps fp8_param equal to fp8_param_gather (its __setattr__): both
    // are sent, so that the object holds what the runtime's own assignment would.
    if (key == "fp8_param_gather") set("fp8_param", value);
  }
  std::vector<std::string> words{
      "_target_:megatron.bridge.training.mixed_precision.MixedPrecisionConfig"};
  for (const auto& [k, v] : merged) words.push_back(k + ":" + v);
  return fmt::format("{{{}}}", fmt::join(words, ","));
}

}  // namespace bridge
