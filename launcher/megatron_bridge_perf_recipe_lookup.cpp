#include <algorithm>

#include "launcher/megatron_bridge_perf_recipes.h"

namespace bridge {

std::string perf_recipe_dtype(std::string_view compute_dtype) {
  std::string out(compute_dtype);
  out.erase(std::remove(out.begin(), out.end(), '_'), out.end());
  return out;
}

const PerfRecipe* find_perf_recipe(std::string_view model_recipe, std::string_view task,
                                   std::string_view gpu, std::string_view dtype) {
  for (const auto& r : megatron_bridge_perf_recipes())
    if (r.model_recipe == model_recipe && r.task == task && r.gpu == gpu && r.dtype == dtype)
      return &r;
  return nullptr;
}

}  // namespace bridge
