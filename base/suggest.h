// Did-you-mean suggestions for misspelled names (recipe keys, plugins, presets, executors).
//
// closest_match returns the candidate with the smallest edit distance to `word` when that
// distance is small relative to the word's length, else "". Comparison is case-insensitive.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace bridge {

size_t edit_distance(std::string_view a, std::string_view b);
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);
// " (did you mean `x`?)" or "" — ready to append to a message.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace bridge
