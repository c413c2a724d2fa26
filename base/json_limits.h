// Bounds for JSON read from files and programs (registry entries, kubectl output).
//
// json_depth_within(text, max) is true when no array/object in `text` nests deeper than
// `max` (brackets inside strings do not count). Check it before nlohmann::json::parse: the
// parser itself keeps an explicit stack, but copying or printing the result recurses once
// per level, and an entry nested a million levels deep once crashed `list`.
#pragma once

#include <string_view>

namespace bridge {

constexpr int kMaxJsonDepth = 512;

inline bool json_depth_within(std::string_view text, int max = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;  // skip the escaped character
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

}  // namespace bridge
