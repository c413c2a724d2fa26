// The manifest YAML emitter: every string comes back as the same string, through yaml-cpp
// (YAML 1.2) and PyYAML (YAML 1.1, the rules behind kubectl's go-yaml), whatever it holds.
#include "executors/k8s_yaml.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/support/k8s_testing.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const std::vector<std::string>& tricky_strings() {
  static const std::vector<std::string> kStrings{
      "",
      "plain",
      "8",
      "0x10",
      "1e3",
      "012",
      "12:30",
      "-",
      "-m",
      "--flag=value",
      "y",
      "N",
      "yes",
      "Off",
      "null",
      "~",
      "true",
      ".inf",
      "a: b",
      "a:b",
      "trailing:",
      "# comment",
      "x #y",
      " leading space",
      "trailing space ",
      "quote \" and ' and \\ backslash",
      "it's",
      "line1\nline2",
      "line1\nline2\n",
      "two trailing\n\n",
      "\nleading newline",
      "tab\there",
      "cr\r\n",
      "bell\x07 esc\x1b del\x7f",
      "unicode: ü ß 漢字 🚀",
      "line sep \u2028 para \u2029 nel \u0085 bom \ufeff",
      "c1 control \u0080 \u009f",
      "$(VAR) $$ ${X} `cmd`",
      "--- document marker",
      "...",
      "key: value\n  nested: 1\n- item",
      "{flow: map}",
      "[flow, seq]",
      "&anchor *alias !tag %directive @at `back",
      "| block",
      "> folded",
      "/dev/shm",
      "nvidia.com/gpu",
      "metadata.annotations['batch.kubernetes.io/job-completion-index']",
  };
  return kStrings;
}

ordered_json tricky_document() {
  ordered_json values = ordered_json::array();
  ordered_json map = ordered_json::object();
  for (const auto& s : tricky_strings()) {
    values.push_back(s);
    map[s.empty() ? "empty" : s] = s;
  }
  return {{"strings", values},
          {"as_keys", map},
          {"numbers", {0, 1, -5, 4096}},
          {"bools", {true, false}},
          {"empty_map", ordered_json::object()},
          {"empty_list", ordered_json::array()},
          {"nested", {{{"a", {{"b", {"x", {{"c", "d"}}}}}}}}},
          {"list_of_lists", {{"a", "b"}, ordered_json::array(), {"multi\nline"}}}};
}

json as_json(const ordered_json& o) { return json::parse(o.dump()); }

TEST(K8sYaml, PlainOnlyWhenUnambiguous) {
  EXPECT_EQ(yaml_scalar("trainer"), "trainer");
  EXPECT_EQ(yaml_scalar("nvcr.io/nvidia/nemo:25.11"), "nvcr.io/nvidia/nemo:25.11");
  EXPECT_EQ(yaml_scalar("/dev/shm"), "/dev/shm");
  EXPECT_EQ(yaml_scalar("8"), "\"8\"");
  EXPECT_EQ(yaml_scalar("y"), "\"y\"");
  EXPECT_EQ(yaml_scalar("NO"), "\"NO\"");
  EXPECT_EQ(yaml_scalar("-c"), "\"-c\"");
  EXPECT_EQ(yaml_scalar("a: b"), "\"a: b\"");
  EXPECT_EQ(yaml_scalar(""), "\"\"");
  EXPECT_EQ(yaml_scalar("say \"hi\"\n"), "\"say \\\"hi\\\"\\n\"");
  EXPECT_EQ(yaml_scalar("\x01"), "\"\\u0001\"");
  EXPECT_EQ(yaml_scalar("a\u2028b"), "\"a\\u2028b\"");
  EXPECT_EQ(yaml_scalar("ü"), "\"ü\"");
}

TEST(K8sYaml, LiteralBlockForReadableMultiLineText) {
  ordered_json doc{{"script", "set -eu\necho \"$X\"\n"}, {"noeol", "a\nb"}};
  EXPECT_EQ(to_yaml(doc), "script: |\n  set -eu\n  echo \"$X\"\nnoeol: |-\n  a\n  b\n");
}

TEST(K8sYaml, SequencesAndNestedMaps) {
  ordered_json doc{{"containers", {{{"name", "c"}, {"args", {"-m", "x"}}}}}, {"count", 3}};
  EXPECT_EQ(to_yaml(doc), "containers:\n- name: c\n  args:\n  - \"-m\"\n  - x\ncount: 3\n");
}

TEST(K8sYaml, MultiDocumentStream) {
  std::string s = to_yaml_stream({{{"a", 1}}, {{"b", 2}}}, {"first", "two\nlines"});
  EXPECT_EQ(s, "# first\n# two lines\n---\na: 1\n---\nb: 2\n");
}

TEST(K8sYaml, Utf8Validation) {
  EXPECT_TRUE(is_valid_utf8("plain ü 漢 🚀"));
  EXPECT_FALSE(is_valid_utf8("\xff"));
  EXPECT_FALSE(is_valid_utf8("\xc3"));          // truncated
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));      // overlong
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));  // surrogate
}

TEST(K8sYaml, RoundTripsThroughYamlCpp) {
  ordered_json doc = tricky_document();
  std::string text = to_yaml_stream({doc, doc});
  auto docs = testing::parse_yaml_docs(text);
  ASSERT_EQ(docs.size(), 2u) << text;
  EXPECT_EQ(docs[0], as_json(doc)) << text;
  EXPECT_EQ(docs[1], as_json(doc));
}

TEST(K8sYaml, RoundTripsThroughPyYaml) {
  if (testing::k8s_validator().empty()) GTEST_SKIP() << "/usr/bin/python3 with PyYAML needed";
  ordered_json doc = tricky_document();
  test::TempDir dir;
  std::string path = dir.write("doc.yaml", to_yaml_stream({doc}));
  auto r = test::run_command(
      {"/usr/bin/python3", "-c",
       "import json, sys, yaml\n"
       "print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1], encoding='utf-8')))))\n",
       path});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json back = json::parse(r.out);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], as_json(doc)) << test::read_file(path);
}

}  // namespace
}  // namespace bridge
