// The recipe's JSON Schema (model/recipe_schema.h) and the structured key table it is built
// from. tests/tools/validate_schema.py checks the schema with a standard validator against the
// example recipes.
#include "model/recipe_schema.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "model/executor_kind.h"
#include "model/gpu_table.h"
#include "model/recipe.h"
#include "model/recipe_loader.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::ordered_json;
using ::testing::ElementsAre;

const RecipeKeyDoc* find_doc(const std::vector<RecipeKeyDoc>& table, const std::string& path) {
  for (const auto& d : table)
    if (d.path == path) return &d;
  return nullptr;
}

// The schema of the key at dotted `path` ("*" = an entry of a user-named mapping), or nullptr.
const ordered_json* at(const ordered_json& schema, const std::string& path) {
  const ordered_json* node = &schema;
  std::istringstream parts(path);
  for (std::string part; std::getline(parts, part, '.');) {
    if (node->contains("anyOf"))  // env entries: the long form is the object branch
      for (const auto& branch : (*node)["anyOf"])
        if (branch.contains("properties")) node = &branch;
    if (part == "*") {
      if (!node->contains("additionalProperties") || !(*node)["additionalProperties"].is_object())
        return nullptr;
      node = &(*node)["additionalProperties"];
      continue;
    }
    if (!node->contains("properties") || !(*node)["properties"].contains(part)) return nullptr;
    node = &(*node)["properties"][part];
  }
  return node;
}

std::set<std::string> type_set(const ordered_json& s) {
  std::set<std::string> out;
  if (!s.contains("type")) return out;
  if (s["type"].is_string()) return {s["type"].get<std::string>()};
  for (const auto& t : s["type"]) out.insert(t.get<std::string>());
  return out;
}

ordered_json schema() { return recipe_json_schema(recipe_schema_table()); }

TEST(RecipeSchemaTest, TableIsStructured) {
  auto table = recipe_schema_table();
  ASSERT_FALSE(table.empty());
  // The root comes first and is closed (unknown top-level keys are errors).
  EXPECT_EQ(table.front().path, "");
  EXPECT_EQ(table.front().kind, RecipeKeyKind::kSection);
  EXPECT_TRUE(table.front().closed);
  const RecipeKeyDoc* tp = find_doc(table, "model.tensor_model_parallel_size");
  ASSERT_NE(tp, nullptr);
  EXPECT_EQ(tp->kind, RecipeKeyKind::kInteger);
  EXPECT_EQ(tp->min, 1);
  EXPECT_FALSE(tp->max.has_value());
  EXPECT_TRUE(tp->nullable);
  const RecipeKeyDoc* retries = find_doc(table, "executor.slurm.retries");
  ASSERT_NE(retries, nullptr);
  EXPECT_EQ(retries->min, 0);
  EXPECT_EQ(retries->max, 1000);
  const RecipeKeyDoc* dispatcher = find_doc(table, "model.moe_token_dispatcher_type");
  ASSERT_NE(dispatcher, nullptr);
  EXPECT_EQ(dispatcher->kind, RecipeKeyKind::kEnum);
  EXPECT_THAT(dispatcher->values, ElementsAre("allgather", "alltoall", "flex"));
  EXPECT_EQ(find_doc(table, "executor.default")->values, executor_names());
  EXPECT_EQ(find_doc(table, "cluster.gpu")->kind, RecipeKeyKind::kString);
  EXPECT_EQ(find_doc(table, "cluster.gpu")->values, gpu_names());  // suggestions
  EXPECT_EQ(find_doc(table, "model.sequence_parallel")->kind, RecipeKeyKind::kBoolean);
  EXPECT_EQ(find_doc(table, "model.recompute_modules")->kind, RecipeKeyKind::kStringList);
  EXPECT_EQ(find_doc(table, "runtime.transformer_engine")->kind, RecipeKeyKind::kVersionOrFalse);
  EXPECT_EQ(find_doc(table, "executor.kubernetes.pod_patch")->kind, RecipeKeyKind::kMapping);
  EXPECT_EQ(find_doc(table, "executor.kubernetes.volumes")->kind, RecipeKeyKind::kList);
  EXPECT_EQ(find_doc(table, "comm_overlap.tp_comm_overlap_cfg")->kind,
            RecipeKeyKind::kScalarOrMapping);
  // name is required, and so not nullable.
  const RecipeKeyDoc* name = find_doc(table, "name");
  ASSERT_NE(name, nullptr);
  EXPECT_TRUE(name->required);
  EXPECT_FALSE(name->nullable);
  // Every section the loader finishes is closed.
  for (const char* s :
       {"cluster", "model", "comm_overlap", "ddp", "optimizer", "mixed_precision", "train",
        "runtime", "executor", "executor.local", "executor.slurm", "executor.kubernetes"}) {
    const RecipeKeyDoc* d = find_doc(table, s);
    ASSERT_NE(d, nullptr) << s;
    EXPECT_EQ(d->kind, RecipeKeyKind::kSection) << s;
    EXPECT_TRUE(d->closed) << s;
  }
  // The user-named mappings and their entries.
  EXPECT_EQ(find_doc(table, "plugins")->kind, RecipeKeyKind::kEntries);
  EXPECT_EQ(find_doc(table, "plugins.*")->kind, RecipeKeyKind::kMapping);
  EXPECT_EQ(find_doc(table, "env")->kind, RecipeKeyKind::kEntries);
  EXPECT_FALSE(find_doc(table, "env")->name_pattern.empty());
  const RecipeKeyDoc* env_entry = find_doc(table, "env.*");
  ASSERT_NE(env_entry, nullptr);
  EXPECT_EQ(env_entry->kind, RecipeKeyKind::kScalarOrSection);
  EXPECT_FALSE(env_entry->nullable);
  EXPECT_TRUE(env_entry->closed);
  EXPECT_TRUE(find_doc(table, "env.*.value")->required);
  EXPECT_EQ(find_doc(table, "env.*.secret")->kind, RecipeKeyKind::kBoolean);
}

// The key reference (docs, completion) is the table's fixed-path value keys.
TEST(RecipeSchemaTest, KeyReferenceIsTheTablesValueKeys) {
  std::vector<std::string> expected;
  for (const auto& d : recipe_schema_table())
    if (d.kind != RecipeKeyKind::kSection && d.kind != RecipeKeyKind::kEntries &&
        d.path.find('*') == std::string::npos)
      expected.push_back(d.path);
  std::vector<std::string> got;
  for (const auto& d : recipe_key_reference()) got.push_back(d.path);
  EXPECT_EQ(got, expected);
  EXPECT_GT(got.size(), 100u);
}

TEST(RecipeSchemaTest, HeaderAndDeterminism) {
  ordered_json s = schema();
  EXPECT_EQ(s["$schema"], "http://json-schema.org/draft-07/schema#");
  EXPECT_EQ(s["title"], "bridge-launch recipe");
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_THAT(s["required"], ElementsAre("name"));
  EXPECT_EQ(s.begin().key(), "$schema");
  std::string text = recipe_json_schema_text(recipe_schema_table());
  EXPECT_EQ(text, recipe_json_schema_text(recipe_schema_table()));
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(ordered_json::parse(text), s);
}

// Every key of the reference is in the schema with its type, bounds and values, and accepts
// null (unset) unless the loader requires it.
TEST(RecipeSchemaTest, EveryReferenceKeyHasItsType) {
  ordered_json s = schema();
  size_t checked = 0;
  for (const auto& d : recipe_key_reference()) {
    const ordered_json* k = at(s, d.path);
    ASSERT_NE(k, nullptr) << d.path;
    ++checked;
    EXPECT_TRUE(k->contains("description")) << d.path;
    std::set<std::string> t = type_set(*k);
    if (d.nullable && d.kind != RecipeKeyKind::kEnum && d.kind != RecipeKeyKind::kVersionOrFalse) {
      EXPECT_TRUE(t.count("null")) << d.path;
    }
    switch (d.kind) {
      case RecipeKeyKind::kInteger:
        EXPECT_TRUE(t.count("integer")) << d.path;
        EXPECT_EQ(k->contains("minimum"), d.min.has_value()) << d.path;
        if (d.min) {
          EXPECT_EQ((*k)["minimum"], *d.min) << d.path;
        }
        if (d.max) {
          EXPECT_EQ((*k)["maximum"], *d.max) << d.path;
        }
        break;
      case RecipeKeyKind::kBoolean:
        EXPECT_TRUE(t.count("boolean")) << d.path;
        EXPECT_FALSE(t.count("string")) << d.path;
        break;
      case RecipeKeyKind::kString:  // any scalar, as the loader reads it
        EXPECT_TRUE(t.count("string") && t.count("number") && t.count("boolean")) << d.path;
        break;
      case RecipeKeyKind::kEnum: {
        ordered_json expected = d.values;
        if (d.nullable) expected.push_back(nullptr);
        EXPECT_EQ((*k)["enum"], expected) << d.path;
        break;
      }
      case RecipeKeyKind::kStringList:
        EXPECT_TRUE(t.count("array")) << d.path;
        EXPECT_TRUE(k->contains("items")) << d.path;
        break;
      default:
        break;
    }
  }
  EXPECT_EQ(checked, recipe_key_reference().size());
  const ordered_json* name = at(s, "name");
  ASSERT_NE(name, nullptr);
  EXPECT_FALSE(type_set(*name).count("null"));
  EXPECT_EQ((*at(s, "cluster.gpu"))["examples"], gpu_names());
  EXPECT_EQ((*at(s, "model.tensor_model_parallel_size"))["type"],
            ordered_json({"integer", "null"}));
}

TEST(RecipeSchemaTest, ClosedSectionsAndOpenFreeFormParts) {
  ordered_json s = schema();
  for (const char* section : {"cluster", "model", "comm_overlap", "ddp", "executor",
                              "executor.slurm", "executor.kubernetes"}) {
    const ordered_json* n = at(s, section);
    ASSERT_NE(n, nullptr) << section;
    EXPECT_EQ((*n)["additionalProperties"], false) << section;
    EXPECT_TRUE(type_set(*n).count("null")) << section;  // `model:` left empty is fine
  }
  // Free-form parts keep whatever they hold.
  for (const char* key : {"executor.kubernetes.pod_patch", "executor.kubernetes.affinity",
                          "executor.kubernetes.resources", "executor.kubernetes.volumes",
                          "comm_overlap.tp_comm_overlap_cfg"}) {
    const ordered_json* n = at(s, key);
    ASSERT_NE(n, nullptr) << key;
    EXPECT_FALSE(n->contains("properties")) << key;
    EXPECT_FALSE(n->contains("additionalProperties")) << key;
  }
  EXPECT_TRUE(type_set(*at(s, "comm_overlap.tp_comm_overlap_cfg")).count("object"));
  EXPECT_TRUE(type_set(*at(s, "comm_overlap.tp_comm_overlap_cfg")).count("string"));
  // Without known plugin names any name is accepted, its options an object or null.
  const ordered_json* plugins = at(s, "plugins");
  ASSERT_NE(plugins, nullptr);
  EXPECT_EQ(type_set((*plugins)["additionalProperties"]),
            (std::set<std::string>{"object", "null"}));
  // env: names are variable names; values a scalar or the closed long form.
  const ordered_json* env = at(s, "env");
  ASSERT_NE(env, nullptr);
  EXPECT_EQ((*env)["propertyNames"]["pattern"], "^[A-Za-z_][A-Za-z0-9_]*$");
  const ordered_json* long_form = at(s, "env.*.value");
  ASSERT_NE(long_form, nullptr);
  const ordered_json& entry = (*env)["additionalProperties"];
  ASSERT_TRUE(entry.contains("anyOf"));
  EXPECT_EQ(type_set(entry["anyOf"][0]), (std::set<std::string>{"string", "number", "boolean"}));
  EXPECT_EQ(entry["anyOf"][1]["additionalProperties"], false);
  EXPECT_THAT(entry["anyOf"][1]["required"], ElementsAre("value"));
  // transformer_engine: a version or false, never true.
  const ordered_json* te = at(s, "runtime.transformer_engine");
  ASSERT_NE(te, nullptr);
  EXPECT_EQ((*te)["anyOf"][1]["const"], false);
}

TEST(RecipeSchemaTest, KnownPluginNamesCloseThePluginsMapping) {
  ordered_json s = recipe_json_schema(
      recipe_schema_table(),
      {{"plugins", {{"perf_env", "launch env"}, {"wandb", "Weights & Biases logging"}}}});
  const ordered_json* plugins = at(s, "plugins");
  ASSERT_NE(plugins, nullptr);
  EXPECT_EQ((*plugins)["additionalProperties"], false);
  ASSERT_TRUE((*plugins)["properties"].contains("perf_env"));
  EXPECT_EQ((*plugins)["properties"]["wandb"]["description"], "Weights & Biases logging");
  EXPECT_EQ(type_set((*plugins)["properties"]["perf_env"]),
            (std::set<std::string>{"object", "null"}));
}

TEST(RecipeSchemaTest, SchemaCommandPrintsTheSchemaWithThePlugins) {
  auto r = test::run_command({BRIDGE_LAUNCH_BIN, "schema"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  ordered_json s = ordered_json::parse(r.out);
  EXPECT_EQ(s["$schema"], "http://json-schema.org/draft-07/schema#");
  EXPECT_TRUE(s["properties"]["plugins"]["properties"].contains("perf_env"));
  EXPECT_EQ(s["properties"]["plugins"]["additionalProperties"], false);
  EXPECT_EQ(test::run_command({BRIDGE_LAUNCH_BIN, "schema", "--format", "json"}).out, r.out);
  EXPECT_EQ(test::run_command({BRIDGE_LAUNCH_BIN, "schema"}).out, r.out);  // same bytes
  // JSON is the only format.
  auto text = test::run_command({BRIDGE_LAUNCH_BIN, "schema", "--format", "text"});
  EXPECT_EQ(text.exit_code, 2);
  EXPECT_THAT(text.err, ::testing::HasSubstr("json"));
}

}  // namespace
}  // namespace bridge
