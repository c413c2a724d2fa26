// json_text: the text of a JSON value, the same bytes as nlohmann's
// `dump(indent, ' ', false, error_handler_t::replace)`, at a fraction of its cost.
//
// nlohmann's serializer runs every byte of every string through its UTF-8 decoder, about
// 40 instructions a byte; a submission writes its registry entry (40 KB, mostly ASCII) beside
// sbatch, where those instructions slow sbatch down on a small machine (docs/performance.md,
// round 7). Here a string that is valid UTF-8 is copied in runs between the bytes that need an
// escape. What this writer does not spell itself is left to nlohmann, so the text stays the
// same: a string that is not valid UTF-8 (its bytes replaced by U+FFFD), a floating-point
// number. One exception: a binary value, which no document here holds (nothing parses or
// builds one), is written compact whatever the indent.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

namespace bridge {

// `indent` < 0: compact, one line; otherwise `indent` spaces per level, as nlohmann's.
std::string json_text(const nlohmann::ordered_json& value, int indent = -1);
std::string json_text(const nlohmann::json& value, int indent = -1);

// An empty object with room for `members` before it grows. An ordered_json object is a
// vector of (const key, value) pairs, and such a pair cannot be moved: each growth of the
// vector copies every member, whole subtrees included: a plan's JSON copied its finished
// sections at each growth (0.4 M instructions of every submission).
inline nlohmann::ordered_json json_object_with_room(size_t members) {
  nlohmann::ordered_json o = nlohmann::ordered_json::object();
  o.get_ref<nlohmann::ordered_json::object_t&>().reserve(members);
  return o;
}

// obj[key] = value (obj an object or null), without that copy: when the object must grow,
// its members are moved into the larger one. For objects that already hold large members
// (a pod spec with its containers' programs: a million instructions per render before).
inline void json_set(nlohmann::ordered_json& obj, const std::string& key,
                     nlohmann::ordered_json value) {
  if (obj.is_null()) obj = nlohmann::ordered_json::object();
  if (!obj.is_object()) {
    obj[key] = std::move(value);  // nlohmann's own error for a non-object
    return;
  }
  auto& members = obj.get_ref<nlohmann::ordered_json::object_t&>();
  for (auto& [k, v] : members)
    if (k == key) {
      v = std::move(value);
      return;
    }
  if (members.size() == members.capacity()) {
    nlohmann::ordered_json::object_t grown;
    grown.reserve(members.size() * 2 + 1);
    for (auto& [k, v] : members) grown.emplace_back(k, std::move(v));
    members.swap(grown);
  }
  members.emplace_back(key, std::move(value));
}

}  // namespace bridge
