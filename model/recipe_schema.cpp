#include "model/recipe_schema.h"

#include <fmt/format.h>

namespace bridge {

namespace {

using nlohmann::ordered_json;

// What the loader's `string` accepts: any scalar, kept as written (`mem: 0` is the text "0").
const std::vector<std::string> kScalarTypes{"string", "number", "boolean"};

ordered_json types(std::vector<std::string> list, bool nullable) {
  if (nullable) list.emplace_back("null");
  if (list.size() == 1) return list.front();
  return list;
}

std::string parent_of(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? std::string() : path.substr(0, dot);
}

std::string last_part(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The type as docs/recipe.md writes it, with the bounds of an integer.
std::string type_text(const RecipeKeyDoc& d) {
  if (d.kind != RecipeKeyKind::kInteger) return d.type;
  if (d.min && d.max) return fmt::format("integer {}..{}", *d.min, *d.max);
  if (d.min) return fmt::format("integer >= {}", *d.min);
  if (d.max) return fmt::format("integer <= {}", *d.max);
  return d.type;
}

std::string description(const RecipeKeyDoc& d) {
  std::string text = d.description.empty() ? type_text(d) : d.description;
  bool structural = d.kind == RecipeKeyKind::kSection || d.kind == RecipeKeyKind::kEntries;
  if (!d.description.empty() && !structural) text += " (" + type_text(d) + ")";
  if (d.required) text += "; required";
  if (d.nullable && !structural && !d.path.empty()) text += "; null = unset";
  return text;
}

class Builder {
 public:
  Builder(const std::vector<RecipeKeyDoc>& table,
          const std::map<std::string, std::vector<SchemaEntryName>>& known_names)
      : table_(table), known_names_(known_names) {}

  ordered_json node(const RecipeKeyDoc& d) const {
    ordered_json s;
    s["description"] = description(d);
    switch (d.kind) {
      case RecipeKeyKind::kSection:
        s["type"] = types({"object"}, d.nullable);
        add_keys(d, s);
        break;
      case RecipeKeyKind::kEntries:
        entries(d, s);
        break;
      case RecipeKeyKind::kInteger:
        s["type"] = types({"integer"}, d.nullable);
        if (d.min) s["minimum"] = *d.min;
        if (d.max) s["maximum"] = *d.max;
        break;
      case RecipeKeyKind::kBoolean:
        s["type"] = types({"boolean"}, d.nullable);
        break;
      case RecipeKeyKind::kString:
        s["type"] = types(kScalarTypes, d.nullable);
        if (!d.values.empty()) s["examples"] = d.values;
        break;
      case RecipeKeyKind::kEnum: {
        ordered_json values = d.values;
        if (d.nullable) values.push_back(nullptr);
        s["enum"] = values;
        break;
      }
      case RecipeKeyKind::kStringList:
        s["type"] = types({"array"}, d.nullable);
        s["items"] = {{"type", kScalarTypes}};
        break;
      case RecipeKeyKind::kVersionOrFalse:
        s["anyOf"] = ordered_json::array(
            {{{"type", types({"string", "number"}, d.nullable)}}, {{"const", false}}});
        break;
      case RecipeKeyKind::kMapping:
        s["type"] = types({"object"}, d.nullable);
        break;
      case RecipeKeyKind::kList:
        s["type"] = types({"array"}, d.nullable);
        break;
      case RecipeKeyKind::kScalarOrMapping: {
        std::vector<std::string> t = kScalarTypes;
        t.emplace_back("object");
        s["type"] = types(t, d.nullable);
        break;
      }
      case RecipeKeyKind::kScalarOrSection: {
        ordered_json long_form{{"type", "object"}};
        add_keys(d, long_form);
        s["anyOf"] = ordered_json::array({{{"type", types(kScalarTypes, d.nullable)}}, long_form});
        break;
      }
    }
    return s;
  }

  const RecipeKeyDoc* find(const std::string& path) const {
    for (const auto& d : table_)
      if (d.path == path) return &d;
    return nullptr;
  }

 private:
  // properties, required and additionalProperties of the keys under `d`.
  void add_keys(const RecipeKeyDoc& d, ordered_json& s) const {
    ordered_json props = ordered_json::object();
    ordered_json required = ordered_json::array();
    for (const auto& child : table_) {
      if (child.path.empty() || parent_of(child.path) != d.path) continue;
      if (child.path.find('*', d.path.size()) != std::string::npos) continue;  // an entry
      props[last_part(child.path)] = node(child);
      if (child.required) required.push_back(last_part(child.path));
    }
    s["properties"] = props;
    if (!required.empty()) s["required"] = required;
    s["additionalProperties"] = !d.closed;
  }

  void entries(const RecipeKeyDoc& d, ordered_json& s) const {
    s["type"] = types({"object"}, d.nullable);
    const RecipeKeyDoc* entry = find(d.path + ".*");
    ordered_json value = entry ? node(*entry) : ordered_json::object();
    auto known = known_names_.find(d.path);
    if (known != known_names_.end()) {
      ordered_json props = ordered_json::object();
      for (const auto& n : known->second) {
        ordered_json one = value;
        if (!n.description.empty()) one["description"] = n.description;
        props[n.name] = one;
      }
      s["properties"] = props;
      s["additionalProperties"] = false;
      return;
    }
    if (!d.name_pattern.empty()) s["propertyNames"] = {{"pattern", d.name_pattern}};
    s["additionalProperties"] = value;
  }

  const std::vector<RecipeKeyDoc>& table_;
  const std::map<std::string, std::vector<SchemaEntryName>>& known_names_;
};

}  // namespace

ordered_json recipe_json_schema(
    const std::vector<RecipeKeyDoc>& table,
    const std::map<std::string, std::vector<SchemaEntryName>>& known_names) {
  Builder b(table, known_names);
  ordered_json schema;
  schema["$schema"] = "http://json-schema.org/draft-07/schema#";
  schema["title"] = "bridge-launch recipe";
  RecipeKeyDoc root_fallback;
  root_fallback.kind = RecipeKeyKind::kSection;
  root_fallback.nullable = false;
  const RecipeKeyDoc* root = b.find("");
  ordered_json body = b.node(root ? *root : root_fallback);
  body["description"] =
      "A bridge-launch recipe: one training job (docs/recipe.md). Generated by `bridge-launch "
      "schema` from the loader; `bridge-launch validate` checks more (the overlap rules, the "
      "layout, plugin options).";
  for (auto& [key, value] : body.items()) schema[key] = value;
  return schema;
}

std::string recipe_json_schema_text(
    const std::vector<RecipeKeyDoc>& table,
    const std::map<std::string, std::vector<SchemaEntryName>>& known_names) {
  return recipe_json_schema(table, known_names).dump(2) + "\n";
}

}  // namespace bridge
