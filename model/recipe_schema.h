// The recipe's JSON Schema (`bridge-launch schema`), for editors (yaml-language-server, VS
// Code's YAML extension) and for standard validators.
//
// Built from recipe_schema_table(), the records the loader's own readers write, so the schema
// cannot drift from the loader: closed sections get `additionalProperties: false`, integers
// their bounds, enums their values, every key that may be unset also accepts null, and the
// free-form parts (plugin options, Kubernetes pod settings, userbuffers mappings) stay open.
// The schema accepts every recipe the loader accepts; a few wrong values it cannot express
// (a quoted integer written as "4" is refused by both; a leading-zero integer, `+1`, or a
// GPU name the table lacks without cluster.gpu_arch are left to `bridge-launch validate`).
// Draft-07, which yaml-language-server and the common validators support.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/recipe_loader.h"

namespace bridge {

// A name that a user-named mapping accepts, with a one-line description.
struct SchemaEntryName {
  std::string name;
  std::string description;
};

// The JSON Schema of a recipe. `known_names` closes a user-named mapping (a kEntries record,
// by path) to the names listed: the plugin registry, which lives above the loader, passes
// {"plugins": ...}; without it any name is accepted there. Deterministic: the same table
// gives the same bytes.
nlohmann::ordered_json recipe_json_schema(
    const std::vector<RecipeKeyDoc>& table,
    const std::map<std::string, std::vector<SchemaEntryName>>& known_names = {});

// The schema as `bridge-launch schema` prints it: indented by 2, ending in a newline.
std::string recipe_json_schema_text(
    const std::vector<RecipeKeyDoc>& table,
    const std::map<std::string, std::vector<SchemaEntryName>>& known_names = {});

}  // namespace bridge
