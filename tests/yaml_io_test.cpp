// The YAML reader (base/yaml_io.cpp, libyaml's event parser): what a recipe's text becomes
// as a YamlNode tree (scalars, quoting, tags, nulls, anchors and aliases, positions), the
// limits on the expanded tree, and the diagnostics for text it cannot read. The recipe-level
// consequences (unknown keys, wrong types) are in recipe_loader_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <utility>

#include "base/yaml_tree.h"

namespace bridge {
namespace {

using ::testing::HasSubstr;

struct Parsed {
  YamlNode root;
  Diagnostics diags;
};

Parsed parse(const std::string& text) {
  Parsed p;
  p.root = parse_yaml_document(text, "r.yaml", p.diags);
  return p;
}

Parsed parse_value(const std::string& text) {
  Parsed p;
  p.root = parse_yaml_value(text, "k=" + text, p.diags);
  return p;
}

std::string dump(const Diagnostics& d) {
  std::string out;
  for (const auto& x : d.items())
    out += x.code + " " + std::to_string(x.loc.line) + ":" + std::to_string(x.loc.column) + " " +
           x.message + "\n";
  return out;
}

// The only diagnostic, which must have `code`.
Diagnostic single(const Parsed& p, const std::string& code) {
  EXPECT_EQ(p.diags.items().size(), 1u) << dump(p.diags);
  if (p.diags.items().empty()) return {};
  EXPECT_EQ(p.diags.items()[0].code, code) << dump(p.diags);
  return p.diags.items()[0];
}

std::pair<int, int> at(const SourceLoc& l) { return {l.line, l.column}; }

TEST(YamlIoTest, ScalarsKeepTheirTextAndWhetherTheyWereQuoted) {
  Parsed p = parse(
      "a: \"1\"\nb: '2'\nc: |\n  3\nd: !!str 4\ne: 5\nf: plain text\n"
      "g: ! 6\n");
  ASSERT_FALSE(p.diags.has_errors()) << dump(p.diags);
  const YamlNode& r = p.root;
  ASSERT_TRUE(r.is_map());
  EXPECT_EQ(r.find("a")->scalar, "1");
  EXPECT_TRUE(r.find("a")->quoted);
  EXPECT_TRUE(r.find("b")->quoted);
  EXPECT_EQ(r.find("c")->scalar, "3\n");
  EXPECT_TRUE(r.find("c")->quoted) << "a block scalar is text";
  EXPECT_TRUE(r.find("d")->quoted) << "!!str makes a string";
  EXPECT_FALSE(r.find("e")->quoted);
  EXPECT_EQ(r.find("f")->scalar, "plain text");
  EXPECT_FALSE(r.find("f")->quoted);
  EXPECT_TRUE(r.find("g")->quoted) << "the non-specific tag `!` makes a string";
}

// Only `!!str` and `!` are taken (they make a scalar a string); every other explicit tag,
// core ones included, is refused with its position, also on mappings and lists, and an
// aliased tagged node is reported once.
TEST(YamlIoTest, ExplicitTagsOtherThanStrAreRefused) {
  for (const char* value : {"!!float 2", "!!null 2", "!!bool 2", "!!int 2",
                            "!<tag:yaml.org,2002:int> 2", "!!set {a, b}", "!!omap [a: 1]",
                            "!!pairs [a: 1]", "!!map {a: 1}", "!!seq [1]", "!custom 8", "!!null"}) {
    Parsed p = parse(std::string("x: ") + value + "\n");
    Diagnostic d = single(p, "yaml-tag");
    EXPECT_EQ(at(d.loc), std::pair(1, 4)) << value;
    EXPECT_NE(d.message.find("unsupported YAML tag `!"), std::string::npos) << d.message;
  }
  Parsed core = parse("x: !!float 2\n");
  EXPECT_NE(single(core, "yaml-tag").message.find("`!!float`"), std::string::npos);
  Parsed aliased = parse("a: &t !!int 1\nb: [*t, *t, *t]\n");
  EXPECT_EQ(aliased.diags.count(Severity::kError), 1u) << dump(aliased.diags);
  Parsed fine = parse("a: !!str 1\nb: ! 2\nc: ! {d: 1}\ne: !!str\n");
  EXPECT_FALSE(fine.diags.has_errors()) << dump(fine.diags);
}

TEST(YamlIoTest, NullSpellingsAndAbsentValues) {
  Parsed p = parse("a: ~\nb: null\nc: Null\nd: NULL\ne: nULL\nf: ''\ng: \"~\"\nh:\ni: !!str ~\n");
  ASSERT_FALSE(p.diags.has_errors()) << dump(p.diags);
  for (const char* k : {"a", "b", "c", "d", "h"}) EXPECT_TRUE(p.root.find(k)->is_null()) << k;
  for (const char* k : {"e", "f", "g", "i"}) EXPECT_TRUE(p.root.find(k)->is_scalar()) << k;
  // An absent value is placed at the token after it (comments and blank lines skipped), as the
  // diagnostics about it have always pointed.
  Parsed empty = parse("a:\nb: 1\nc:   # note\n\nd: [x]\n");
  ASSERT_FALSE(empty.diags.has_errors()) << dump(empty.diags);
  EXPECT_EQ(at(empty.root.find("a")->loc), std::pair(2, 1));
  EXPECT_EQ(at(empty.root.find("c")->loc), std::pair(5, 1));
  // An empty text, or comments only, is a null without a position.
  Parsed none = parse("# nothing\n");
  EXPECT_FALSE(none.diags.has_errors());
  EXPECT_TRUE(none.root.is_null());
  EXPECT_EQ(none.root.loc.line, 0);
}

TEST(YamlIoTest, PositionsAreLinesAndByteColumns) {
  Parsed p = parse("name: x\nmodel:\n  \xc3\xa9t\xc3\xa9: [1, \"\xc3\xa9\", 3]\n");
  ASSERT_FALSE(p.diags.has_errors()) << dump(p.diags);
  const YamlNode& model = *p.root.find("model");
  EXPECT_EQ(at(p.root.entries[1].key_loc), std::pair(2, 1));
  EXPECT_EQ(at(model.entries[0].key_loc), std::pair(3, 3));
  const YamlNode& list = model.entries[0].value;
  EXPECT_EQ(at(list.loc), std::pair(3, 10)) << "columns count bytes: é is two";
  EXPECT_EQ(at(list.items[2].loc), std::pair(3, 20));
  // A leading BOM is not counted; U+0085 and U+2028 are text, not line breaks.
  Parsed bom = parse("\xEF\xBB\xBFname: x\nmodel: {a: 1}\n");
  EXPECT_EQ(at(bom.root.entries[0].key_loc), std::pair(1, 1));
  Parsed nel = parse("a: x\xC2\x85y\xE2\x80\xA8z\nb: 1\n");
  ASSERT_FALSE(nel.diags.has_errors()) << dump(nel.diags);
  EXPECT_EQ(nel.root.find("a")->scalar, "x\xC2\x85y\xE2\x80\xA8z");
  EXPECT_EQ(at(nel.root.entries[1].key_loc), std::pair(2, 1));
}

TEST(YamlIoTest, BytesLibyamlRefusesReachTheTreeAsTheyAre) {
  // Not UTF-8: the value is reported with its position, the key stays printable (the schema
  // reports it as an unknown key).
  Parsed p = parse(
      "name: caf\xe9\nmod\xff"
      "el: 1\n");
  Diagnostic d = single(p, "yaml-not-utf8");
  EXPECT_EQ(at(d.loc), std::pair(1, 7));
  EXPECT_EQ(p.root.entries[1].key, "mod\\xffel");
  EXPECT_EQ(at(p.root.entries[1].value.loc), std::pair(2, 9));
  // A control character and a lone CR are part of the value, and do not end the line.
  Parsed ctl = parse("a: x\x1by\x7fz\rw\nb: 1\n");
  ASSERT_FALSE(ctl.diags.has_errors()) << dump(ctl.diags);
  EXPECT_EQ(ctl.root.find("a")->scalar, "x\x1by\x7fz\rw");
  EXPECT_EQ(at(ctl.root.entries[1].key_loc), std::pair(2, 1));
  // Private-use characters of the range used for those bytes are kept too.
  Parsed pua = parse("a: \xF4\x8F\xBC\x80 \xff\n");
  EXPECT_EQ(pua.root.find("a")->scalar, "\xF4\x8F\xBC\x80 \xff");
}

TEST(YamlIoTest, SyntaxErrorsNameLibyamlsProblemAndPosition) {
  Diagnostic d = single(parse("name: x\nmodel:\n  num_layers: 4: 5\n"), "yaml-syntax");
  EXPECT_EQ(d.message, "invalid YAML: mapping values are not allowed in this context");
  EXPECT_EQ(at(d.loc), std::pair(3, 16));
  EXPECT_EQ(d.loc.file, "r.yaml");

  d = single(parse("name: x\nmodel: {num_layers: 4\n"), "yaml-syntax");
  EXPECT_EQ(d.message,
            "invalid YAML: did not find expected ',' or '}' (while parsing a flow mapping that "
            "starts at line 2, column 8)");
  EXPECT_EQ(at(d.loc), std::pair(3, 1));

  d = single(parse("name: x\nmodel: [\n"), "yaml-syntax");
  EXPECT_EQ(d.message, "invalid YAML: the text ends inside a `[` or `{` that is not closed");

  d = single(parse("a: @x\n"), "yaml-syntax");
  EXPECT_THAT(d.message, HasSubstr("found character `@` that cannot start any token"));
  EXPECT_EQ(at(d.loc), std::pair(1, 4));

  d = single(parse("a: ]\n"), "yaml-syntax");
  EXPECT_EQ(d.message, "invalid YAML: unexpected `]` where a value should start");
  EXPECT_EQ(d.help, "quote the value if the character is part of it");

  // Text after the top-level value is an error (it used to be dropped without a word).
  d = single(parse("  a: 1\nb: 2\n"), "yaml-syntax");
  EXPECT_THAT(d.message, HasSubstr("text after the end of the document"));
  EXPECT_EQ(at(d.loc), std::pair(2, 1));

  d = single(parse("%YAML 1.1\na: 1\n"), "yaml-syntax");
  EXPECT_THAT(d.message, HasSubstr("directive line must be followed by a `---` line"));
}

TEST(YamlIoTest, SecondDocumentIsTheErrorWhateverItHolds) {
  Diagnostic d = single(parse("a: 1\n---\nb: [\n"), "yaml-multiple-documents");
  EXPECT_EQ(at(d.loc), std::pair(2, 1));
  d = single(parse("a: 1\n...\nb: 2\n"), "yaml-multiple-documents");
  EXPECT_EQ(at(d.loc), std::pair(3, 1));
  EXPECT_FALSE(parse("---\na: 1\n...\n").diags.has_errors());
}

TEST(YamlIoTest, TabsSeparateTokensButDoNotIndent) {
  Parsed p = parse("a:\tb\nc:\n  -\td\n");
  ASSERT_FALSE(p.diags.has_errors()) << dump(p.diags);
  EXPECT_EQ(p.root.find("a")->scalar, "b");
  EXPECT_EQ(p.root.find("c")->items.at(0).scalar, "d");
  // A tab inside a value is kept.
  Parsed kept = parse("a: 'x\ty'\nb: |\n  -\tz\n");
  ASSERT_FALSE(kept.diags.has_errors()) << dump(kept.diags);
  EXPECT_EQ(kept.root.find("a")->scalar, "x\ty");
  EXPECT_EQ(kept.root.find("b")->scalar, "-\tz\n");
  std::string many;
  for (int i = 0; i < 300; ++i) many += "k" + std::to_string(i) + ":\tv\n";
  Parsed all = parse(many);
  ASSERT_FALSE(all.diags.has_errors()) << dump(all.diags);
  EXPECT_EQ(all.root.entries.size(), 300u);
  // On a blank line or before a comment a tab is a blank.
  EXPECT_FALSE(parse("a: 1\n\t\n \t# c\nb: 2\n").diags.has_errors());
  Diagnostic d = single(parse("a:\n\tb: 1\n"), "yaml-tab-indent");
  EXPECT_EQ(at(d.loc), std::pair(2, 1));
}

TEST(YamlIoTest, AliasesAreExpandedWithTheAnchorsPositions) {
  Parsed p = parse("base: &b {x: 1}\ncopy: *b\nlist: [*b, *b]\n");
  ASSERT_FALSE(p.diags.has_errors()) << dump(p.diags);
  const YamlNode& copy = *p.root.find("copy");
  ASSERT_TRUE(copy.is_map());
  EXPECT_EQ(copy.find("x")->scalar, "1");
  EXPECT_EQ(at(copy.loc), std::pair(1, 7)) << "where the anchored node is";
  EXPECT_EQ(p.root.find("list")->items.size(), 2u);
  // Merge keys are not special: `<<` is a key like any other.
  Parsed merge = parse("a: &a {x: 1}\nb: {<<: *a}\n");
  ASSERT_FALSE(merge.diags.has_errors());
  EXPECT_NE(merge.root.find("b")->find("<<"), nullptr);

  Diagnostic d = single(parse("a: *nope\n"), "yaml-syntax");
  EXPECT_EQ(d.message, "invalid YAML: the alias `*nope` has no anchor `&nope` before it");
  EXPECT_EQ(at(d.loc), std::pair(1, 4));
  // What an anchored node reports, it reports at every use.
  Parsed twice = parse("x: &a {k: 1, k: 2}\ny: *a\n");
  EXPECT_EQ(twice.diags.count(Severity::kError), 2u) << dump(twice.diags);
}

TEST(YamlIoTest, AnAliasInsideItsAnchorIsTooDeep) {
  Diagnostic d = single(parse("a: &a [1, *a]\n"), "yaml-limit");
  EXPECT_EQ(d.message, "nesting deeper than 64 levels");
}

TEST(YamlIoTest, ExpandedAliasesAreLimited) {
  // 4 x 4 KiB strings, referenced 4^9 times: 4 GiB of text once expanded.
  std::string s(4096, 'x');
  std::string text = "a: &a [\"" + s + "\", \"" + s + "\", \"" + s + "\", \"" + s + "\"]\n";
  std::string prev = "a";
  for (char c = 'b'; c <= 'j'; ++c) {
    text += std::string("l") + c + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" +
            prev + "]\n";
    prev = std::string(1, c);
  }
  auto start = std::chrono::steady_clock::now();
  Diagnostic d = single(parse(text), "yaml-limit");
  EXPECT_THAT(d.message, HasSubstr("more than 32 MiB of text once aliases are expanded"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));

  // Nodes: without aliases too; the reader stops at the limit instead of reading on.
  std::string many = "a: [";
  for (int i = 0; i < 300000; ++i) many += "1,";
  many += "]\n";
  d = single(parse(many), "yaml-limit");
  EXPECT_THAT(d.message, HasSubstr("more than 200000 nodes"));
  EXPECT_EQ(at(d.loc), std::pair(1, 400001)) << "the 200001st node";
}

TEST(YamlIoTest, DeepNestingIsStoppedEarly) {
  std::string text = "a: " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  Diagnostic d = single(parse(text), "yaml-limit");
  EXPECT_EQ(d.message, "nesting deeper than 64 levels");
  EXPECT_EQ(at(d.loc), std::pair(1, 502)) << "the reader stops at 500 levels";
  d = single(parse("a: " + std::string(70, '[') + std::string(70, ']') + "\n"), "yaml-limit");
  EXPECT_EQ(at(d.loc), std::pair(1, 68)) << "the 65th level";
}

TEST(YamlIoTest, OverrideValues) {
  Parsed list = parse_value("[a, 'b', {c: 1}]");
  ASSERT_FALSE(list.diags.has_errors()) << dump(list.diags);
  ASSERT_TRUE(list.root.is_sequence());
  EXPECT_TRUE(list.root.items[1].quoted);
  EXPECT_EQ(list.root.loc.override_arg, "k=[a, 'b', {c: 1}]");
  EXPECT_EQ(list.root.loc.line, 0) << "an override has no file position";
  // Blanks, tabs too, around the value are not part of it.
  EXPECT_EQ(parse_value("\t4 ").root.scalar, "4");

  Diagnostic d = single(parse_value(","), "bad-override");
  EXPECT_EQ(d.message, "value starts with a character that cannot start a YAML value");
  d = single(parse_value("[a,"), "bad-override");
  EXPECT_EQ(d.message,
            "value is not a YAML scalar or list: the text ends inside a `[` or `{` that is not "
            "closed");
  EXPECT_EQ(d.help, "quote strings containing ':' or '#', write lists as [a,b]");
  // `%` starts a directive: the value is refused rather than read as nothing.
  EXPECT_EQ(single(parse_value("%d"), "bad-override").code, "bad-override");
  d = single(parse_value("a\n---\nb"), "bad-override");
  EXPECT_EQ(d.message, "value holds more than one YAML document");
  d = single(parse_value(std::string(1000, '[')), "bad-override");
  EXPECT_EQ(d.message, "nesting deeper than 64 levels");
  // A document marker alone (or before a value) is no value: it once unset the key.
  for (const char* marker : {"---", " ...", "--- 5", "---\t"}) {
    d = single(parse_value(marker), "bad-override");
    EXPECT_NE(d.message.find("document marker"), std::string::npos) << marker;
  }
  for (const char* text : {"---x", "'---'", "-5", "...x"}) {
    Parsed fine = parse_value(text);
    EXPECT_FALSE(fine.diags.has_errors()) << text << ": " << dump(fine.diags);
  }
}

}  // namespace
}  // namespace bridge
