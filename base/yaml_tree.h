// YamlNode: the project's own exception-free YAML document tree.
//
// Recipes and override values are read by libyaml in exactly one file (yaml_io.cpp), which
// turns its events into this plain tree with source positions, rejecting duplicate keys, alias
// bombs and absurd nesting. Everything else (the schema reader, overrides, plugins) works on
// YamlNode and never sees the parser. Scalars keep their raw text; `quoted` tells a quoted
// "true" (a string) from a plain true (a boolean).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "base/utf8.h"  // first_invalid_utf8, printable_text

namespace bridge {

struct YamlEntry;

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMap };
  Kind kind = Kind::kNull;
  std::string scalar;  // raw text when kind == kScalar
  bool quoted = false;
  std::vector<YamlNode> items;     // kSequence
  std::vector<YamlEntry> entries;  // kMap, in document order
  SourceLoc loc;
  // A scalar read from a file: where its source text ends (1-based line, and the byte column
  // just after its last byte, closing quote included). With `loc`, the span the scalar is
  // written in, escapes and quotes as typed: a secret is hidden there in source excerpts
  // (Diagnostics::add_secret_source). 0 for everything else.
  int end_line = 0;
  int end_column = 0;

  bool is_null() const { return kind == Kind::kNull; }
  bool is_scalar() const { return kind == Kind::kScalar; }
  bool is_sequence() const { return kind == Kind::kSequence; }
  bool is_map() const { return kind == Kind::kMap; }
  const YamlNode* find(std::string_view key) const;
  YamlNode* find(std::string_view key);
  const char* kind_name() const;
};

struct YamlEntry {
  std::string key;
  SourceLoc key_loc;
  YamlNode value;
};

// Parses a whole document. On failure appends an error (with the parser's position and a
// one-line reason) and returns a null node. `file` is used for locations only.
YamlNode parse_yaml_document(std::string_view text, const std::string& file, Diagnostics& diags);

// Parses the value part of a KEY=VALUE override (a YAML scalar or flow sequence/map).
// Locations in the result point at the override argument.
YamlNode parse_yaml_value(std::string_view text, const std::string& override_arg,
                          Diagnostics& diags);

}  // namespace bridge
