// Did-you-mean suggestions (suggest.h).
#include "base/suggest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/recipe_loader.h"

namespace bridge {
namespace {

// The keys of the model section, as the loader knows them.
std::vector<std::string> model_keys() {
  std::vector<std::string> keys;
  for (const auto& k : recipe_key_reference())
    if (k.path.rfind("model.", 0) == 0) keys.push_back(k.path.substr(6));
  return keys;
}

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("sitting", "kitten"), 3u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  EXPECT_EQ(edit_distance("num_layers", "num_layer"), 1u);
  EXPECT_EQ(edit_distance("alltoall", "alltoal"), 1u);
  EXPECT_EQ(edit_distance("Model", "model"), 0u);  // case-insensitive
}

TEST(SuggestTest, Misspellings) {
  auto keys = model_keys();
  ASSERT_FALSE(keys.empty());
  EXPECT_EQ(closest_match("tensor_model_paralel_size", keys), "tensor_model_parallel_size");
  EXPECT_EQ(closest_match("num_layer", keys), "num_layers");
  EXPECT_EQ(closest_match("sequence_paralel", keys), "sequence_parallel");
  EXPECT_EQ(closest_match("num_attention_head", keys), "num_attention_heads");
  EXPECT_EQ(closest_match("NUM_LAYERS", keys), "num_layers");
  EXPECT_EQ(closest_match("modle", recipe_sections()), "model");
  EXPECT_EQ(closest_match("comm_overlp", recipe_sections()), "comm_overlap");
}

TEST(SuggestTest, Abbreviations) {
  auto keys = model_keys();
  EXPECT_EQ(closest_match("tp", keys), "tensor_model_parallel_size");
  EXPECT_EQ(closest_match("pp", keys), "pipeline_model_parallel_size");
  EXPECT_EQ(closest_match("vpp", keys), "virtual_pipeline_model_parallel_size");
  EXPECT_EQ(closest_match("cp", keys), "context_parallel_size");
  EXPECT_EQ(closest_match("ep", keys), "expert_model_parallel_size");
  EXPECT_EQ(closest_match("etp", keys), "expert_tensor_parallel_size");
  EXPECT_EQ(closest_match("sp", keys), "sequence_parallel");
  const std::vector<std::string> cluster{"gpu", "num_gpus", "gpus_per_node"};
  EXPECT_EQ(closest_match("ng", cluster), "num_gpus");
  EXPECT_EQ(closest_match("gn", cluster), "gpus_per_node");
  // An abbreviation only maps to a key that is a candidate here.
  EXPECT_EQ(closest_match("tp", cluster), "");
}

TEST(SuggestTest, NoSuggestionForUnrelatedWords) {
  auto keys = model_keys();
  EXPECT_EQ(closest_match("banana", keys), "");
  EXPECT_EQ(closest_match("xyz", keys), "");
  EXPECT_EQ(closest_match("completely_unrelated_setting", keys), "");
  EXPECT_EQ(closest_match("learning_rate", keys), "");
  EXPECT_EQ(closest_match("anything", {}), "");
  EXPECT_EQ(closest_match("", keys), "");
  EXPECT_EQ(closest_match("int4", {"bf16", "fp16", "fp32"}), "");
}

TEST(SuggestTest, DidYouMeanFormatsTheHint) {
  EXPECT_EQ(did_you_mean("alltoal", {"allgather", "alltoall", "flex"}),
            " (did you mean `alltoall`?)");
  EXPECT_EQ(did_you_mean("slrum", {"local", "slurm", "kubernetes"}), " (did you mean `slurm`?)");
  EXPECT_EQ(did_you_mean("banana", {"local", "slurm", "kubernetes"}), "");
}

}  // namespace
}  // namespace bridge
