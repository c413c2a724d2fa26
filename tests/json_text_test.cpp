// json_text must write exactly what nlohmann's dump(indent, ' ', false, replace) writes: the
// registry is read by both, and an entry's text must not depend on which wrote it.
#include "base/json_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace bridge {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string nlohmann_text(const ordered_json& v, int indent) {
  return v.dump(indent, ' ', false, json::error_handler_t::replace);
}

// Strings that take every path: each short escape, the other control characters, 0x7F (not
// escaped), multi-byte characters, and bytes that are not UTF-8 (left to nlohmann, which
// writes U+FFFD for them).
std::vector<std::string> hostile_strings() {
  std::vector<std::string> out = {"",
                                  "plain",
                                  "quote \" backslash \\ slash /",
                                  "\b\f\n\r\t",
                                  std::string("nul \0 inside", 12),
                                  "\x01\x1f\x7f",
                                  "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80",
                                  "lone \x80 continuation",
                                  "cut \xe2\x82",
                                  "overlong \xc0\xaf",
                                  "surrogate \xed\xa0\x80",
                                  "past U+10FFFF \xf4\x90\x80\x80",
                                  "\xff\xfe",
                                  "$(rm -rf /) `id` ${HOME} 'q' \"dq\""};
  std::string every_byte;
  for (int c = 0; c < 256; ++c) every_byte += static_cast<char>(c);
  out.push_back(every_byte);
  return out;
}

TEST(JsonText, ScalarsAreSpelledAsNlohmannSpellsThem) {
  std::vector<ordered_json> values = {nullptr,
                                      true,
                                      false,
                                      0,
                                      -1,
                                      INT64_MIN,
                                      INT64_MAX,
                                      UINT64_MAX,
                                      0.1,
                                      1.0,
                                      -0.0,
                                      1e300,
                                      6.02214076e23,
                                      ordered_json::object(),
                                      ordered_json::array()};
  for (const auto& s : hostile_strings()) values.emplace_back(s);
  for (const auto& v : values)
    for (int indent : {-1, 0, 2, 4})
      EXPECT_EQ(json_text(v, indent), nlohmann_text(v, indent)) << nlohmann_text(v, -1);
}

// The writer reads eight bytes at a time: each byte that needs an escape, at each place in
// and across those words.
TEST(JsonText, EveryEscapeAtEveryOffsetOfAWord) {
  for (char special : {'"', '\\', '\n', '\x01', '\x1f', '\x7f', '\xc3'})
    for (size_t at = 0; at < 24; ++at) {
      std::string s(24, 'a');
      s[at] = special;
      if (special == '\xc3' && at + 1 < s.size()) s[at + 1] = '\xa9';  // é, and a cut é at the end
      ordered_json v = s;
      EXPECT_EQ(json_text(v), nlohmann_text(v, -1)) << int(special) << " at " << at;
    }
}

TEST(JsonText, NestedValuesAndHostileKeysMatchInBothLayouts) {
  ordered_json v = ordered_json::object();
  v["format"] = "bridge-launch-job/1";
  v["empty_object"] = ordered_json::object();
  v["empty_array"] = ordered_json::array();
  v["list"] = {1, "two", 3.5, nullptr, {{"deep", {{"deeper", ordered_json::array({true})}}}}};
  for (const auto& s : hostile_strings()) v["keys"][s] = s;
  for (int indent : {-1, 2}) EXPECT_EQ(json_text(v, indent), nlohmann_text(v, indent));
  // The std::map flavour too (keys in sorted order).
  json sorted = json::parse(v.dump(-1, ' ', false, json::error_handler_t::replace));
  for (int indent : {-1, 2})
    EXPECT_EQ(json_text(sorted, indent),
              sorted.dump(indent, ' ', false, json::error_handler_t::replace));
}

// Random byte strings and shapes (a fixed seed, so a failure repeats): inputs this test's
// author did not pick.
TEST(JsonText, RandomValuesMatch) {
  std::mt19937 rng(20261205);
  auto random_string = [&] {
    std::string s(rng() % 40, '\0');
    for (auto& c : s) {
      unsigned r = rng() % 4;  // mostly ASCII, some control and high bytes
      c = static_cast<char>(r == 0 ? rng() % 256 : r == 1 ? rng() % 32 : 32 + rng() % 95);
    }
    return s;
  };
  std::function<ordered_json(int)> random_value = [&](int depth) -> ordered_json {
    switch (depth > 3 ? rng() % 4 : rng() % 6) {
      case 0:
        return random_string();
      case 1:
        return static_cast<int64_t>(rng()) - (int64_t{1} << 31);
      case 2:
        return rng() % 2 == 0;
      case 3:
        return nullptr;
      case 4: {
        ordered_json a = ordered_json::array();
        for (unsigned i = rng() % 4; i > 0; --i) a.push_back(random_value(depth + 1));
        return a;
      }
      default: {
        ordered_json o = ordered_json::object();
        for (unsigned i = rng() % 4; i > 0; --i) o[random_string()] = random_value(depth + 1);
        return o;
      }
    }
  };
  for (int i = 0; i < 2000; ++i) {
    ordered_json v = random_value(0);
    ASSERT_EQ(json_text(v), nlohmann_text(v, -1)) << "value " << i;
    ASSERT_EQ(json_text(v, 2), nlohmann_text(v, 2)) << "value " << i;
  }
}

// json_set is obj[key] = value: the same object whichever way it was built, through growth.
TEST(JsonSet, IsTheSameAsOperatorBracketsThroughGrowth) {
  ordered_json ours;  // null becomes an object, as with operator[]
  ordered_json theirs;
  for (int i = 0; i < 40; ++i) {
    std::string key = "key" + std::to_string(i % 29);  // some keys set twice: replaced in place
    ordered_json value = {{"n", i}, {"text", std::string(100, static_cast<char>('a' + i % 26))}};
    json_set(ours, key, value);
    theirs[key] = value;
    ASSERT_EQ(ours.dump(), theirs.dump()) << "after " << i;
  }
  ordered_json array = ordered_json::array();
  EXPECT_THROW(json_set(array, "k", 1), nlohmann::json::type_error) << "nlohmann's own error";
}

}  // namespace
}  // namespace bridge
