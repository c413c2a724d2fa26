// A small YAML emitter for Kubernetes manifests (block style, one document per object).
//
// Contract:
// - to_yaml(doc) prints a JSON value (built with nlohmann::ordered_json, keys in insertion
//   order) as block-style YAML that YAML 1.1 parsers (PyYAML, go-yaml behind kubectl) and
//   YAML 1.2 parsers (yaml-cpp) read back as exactly the same value: every string stays a
//   string with the same bytes, integers stay integers, booleans booleans.
// - A string is written plain only when it cannot be read as anything else (it starts with a
//   letter or '/', uses a conservative character set and is not a YAML 1.1 boolean/null
//   word such as `y`, `no`, `on`, `null`); multi-line ASCII text without trailing blanks is
//   written as a literal block (`|` / `|-`); everything else is double-quoted with escapes
//   (`\"`, `\\`, `\n`, `\t`, `\uXXXX` for control characters, C1 controls, U+2028/U+2029,
//   U+FEFF and U+FFFE/U+FFFF). Other non-ASCII characters are kept as UTF-8.
// - Strings must be valid UTF-8 (is_valid_utf8, base/utf8.h); invalid bytes are written as
// U+FFFD,
//   so callers check values first and report them.
// - to_yaml_stream joins documents with `---` lines (a leading `---` before each document),
//   after optional `# ` comment lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/utf8.h"

namespace bridge {

// The scalar as YAML would print it in a block mapping value (plain, or double-quoted).
// Multi-line strings are double-quoted here; to_yaml may choose a literal block instead.
std::string yaml_scalar(const std::string& s);

std::string to_yaml(const nlohmann::ordered_json& doc);

// `comments` are printed first, one `# ` line each (newlines in them become spaces).
std::string to_yaml_stream(const std::vector<nlohmann::ordered_json>& docs,
                           const std::vector<std::string>& comments = {});

}  // namespace bridge
