// Recipe loading: YAML text + KEY=VALUE overrides -> typed Recipe, or diagnostics.
//
// load_recipe reads the file, parses it, applies the overrides to the document tree (so a
// value from an override carries the override as its location), then reads every section
// against the schema in recipe_loader.cpp. Unknown keys get a did-you-mean suggestion, wrong
// types name the expected type, and every problem is collected before returning. The result
// is std::nullopt exactly when an error was recorded. Nothing here touches the environment:
// `${VAR}` expansion happens at plan time.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "launcher/diagnostics.h"
#include "launcher/recipe.h"
#include "launcher/yaml_tree.h"

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

// One documented recipe key: dotted path, type, meaning. Filled by the same code that reads
// the recipe, so the reference in docs cannot drift from the loader.
struct RecipeKeyDoc {
  std::string path;
  std::string type;
};
std::vector<RecipeKeyDoc> recipe_key_reference();

}  // namespace bridge
