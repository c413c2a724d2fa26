// Recipe loading: YAML text + KEY=VALUE overrides -> typed Recipe, or diagnostics.
//
// load_recipe reads the file, parses it, applies the overrides to the document tree (so a
// value from an override carries the override as its location), then reads every section
// against the schema in recipe_loader.cpp. Unknown keys get a did-you-mean suggestion, wrong
// types name the expected type, and every problem is collected before returning. The result
// is std::nullopt exactly when an error was recorded. Nothing here touches the environment:
// `${VAR}` expansion happens at plan time.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "base/yaml_tree.h"
#include "model/recipe.h"

namespace bridge {

// Splits "a.b.c=value" and applies it to `root`; records an error for a malformed argument.
void apply_override(YamlNode& root, std::string_view arg, Diagnostics& diags);

// Reads an already parsed (and overridden) document into a Recipe.
std::optional<Recipe> read_recipe(const YamlNode& root, const std::string& file,
                                  Diagnostics& diags);

// Parses `text` as the recipe named `file`, then applies `overrides` in order.
// `plugins_seen` (optional) receives the plugin entries read, also when other keys have
// errors, so the caller can check their names in the same pass (the loader does not know the
// plugin registry: that layer is above it).
std::optional<Recipe> load_recipe_text(std::string_view text, const std::string& file,
                                       const std::vector<std::string>& overrides,
                                       Diagnostics& diags,
                                       std::vector<PluginEntry>* plugins_seen = nullptr);

// Reads `path` from disk and calls load_recipe_text.
std::optional<Recipe> load_recipe(const std::string& path,
                                  const std::vector<std::string>& overrides, Diagnostics& diags,
                                  std::vector<PluginEntry>* plugins_seen = nullptr);

// The recipe's inputs after overrides, flattened to "section.key" -> value text (lists as
// "[a,b]"); `name` and `description` are left out. Used to tell which knobs two jobs differ
// in. Empty when the file cannot be read or parsed.
std::map<std::string, std::string> flatten_recipe_inputs(const std::string& path,
                                                         const std::vector<std::string>& overrides);

// The top-level section names, for tools (completion, docs checks).
const std::vector<std::string>& recipe_sections();

// What a recipe key holds, as the loader reads it.
enum class RecipeKeyKind {
  kSection,          // a mapping of known keys (the records under `path.`)
  kEntries,          // a mapping of user-chosen names, each as the record `path.*` says
  kInteger,          // a plain whole number, within [min, max]
  kBoolean,          // true or false
  kString,           // any scalar, kept as text; `values` are suggestions (cluster.gpu)
  kEnum,             // one of `values`
  kStringList,       // a sequence of scalars
  kVersionOrFalse,   // a version text, or false (runtime.transformer_engine)
  kMapping,          // a free-form mapping, passed through (Kubernetes pod settings)
  kList,             // a free-form sequence, passed through
  kScalarOrMapping,  // a scalar or a free-form mapping (a preset name or per-layer mapping)
  kScalarOrSection,  // a scalar, or a mapping of the known keys under `path.` (env entries)
};

// One recipe key as the loader reads it: dotted path ("*" stands for a user-chosen name, as
// in `env.*.value`), the type as messages and docs/recipe.md write it, and the structure
// that tools need (completion, `bridge-launch schema`). Filled by the same code that reads
// the recipe, so neither the docs nor the tools can drift from the loader.
struct RecipeKeyDoc {
  std::string path;
  std::string type;
  RecipeKeyKind kind = RecipeKeyKind::kString;
  std::optional<int64_t> min;       // kInteger
  std::optional<int64_t> max;       // kInteger
  std::vector<std::string> values;  // kEnum: the allowed values; kString: suggested ones
  std::string description;          // short; empty where the type says it all
  bool nullable = true;      // null means unset (false for env entries: `env.X: null` is an error)
  bool required = false;     // the loader refuses a recipe without it (`name`; `env.*.value`)
  bool closed = false;       // kSection, kScalarOrSection: keys the loader does not know are errors
  std::string name_pattern;  // kEntries: the names the loader accepts (ECMA regex), "" = any
};

// Every key the loader reads, with its sections and the `*` entries of env and plugins, in
// reading order; the root is the kSection record with the empty path.
std::vector<RecipeKeyDoc> recipe_schema_table();

// The keys with a fixed path that hold a value (no sections, no `*` entries): what
// docs/recipe.md documents and what completion offers.
std::vector<RecipeKeyDoc> recipe_key_reference();

}  // namespace bridge
