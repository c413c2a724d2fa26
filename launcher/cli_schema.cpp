// schema: prints the recipe's JSON Schema (model/recipe_schema.h) for editors and
// validators, with the plugin names of this build.
#include "launcher/cli_commands.h"
#include "launcher/services.h"
#include "model/recipe_schema.h"

namespace bridge {

int cmd_schema(const Context& c) {
  std::vector<SchemaEntryName> plugins;
  for (const auto& p : c.services.plugins) plugins.push_back({p.name, p.description});
  c.out << recipe_json_schema_text(recipe_schema_table(), {{"plugins", plugins}});
  return kExitOk;
}

}  // namespace bridge
