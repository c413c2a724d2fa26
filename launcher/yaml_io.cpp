// The only file that uses yaml-cpp; its exceptions stop here.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <sstream>

#include "launcher/yaml_tree.h"

namespace bridge {

namespace {

constexpr int kMaxDepth = 64;
// Also reported when yaml-cpp gives up on nesting deeper than 500 levels: its own message
// for that is "bad file".
constexpr const char* kTooDeep = "nesting deeper than 64 levels";
constexpr size_t kMaxNodes = 200000;  // far above any real recipe; stops alias bombs
// Text after expanding aliases: a 4 KiB string referenced 200000 times is an alias bomb too.
constexpr size_t kMaxScalarBytes = size_t{32} << 20;

// Records where each document starts, and nothing else: a cheap first pass over the stream.
class DocumentStarts : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override { starts.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

  std::vector<YAML::Mark> starts;
};

// Where the stream holds more than one document, the start of the second; where yaml-cpp
// would loop forever, the position it is stuck at (stuck = true).
//
// yaml-cpp 0.7 (Debian's) never consumes a token that cannot start a node, such as a `,`
// at the start of a document: YAML::LoadAll then adds empty documents until memory runs
// out (upstream issue #1040, fixed after 0.7). The parser is driven here one document at a
// time and stopped when a document starts where the previous one did.
std::optional<YAML::Mark> second_document(const std::string& text, bool& stuck) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentStarts docs;
  stuck = false;
  while (docs.starts.size() < 3 && parser.HandleNextDocument(docs)) {
    size_t n = docs.starts.size();
    if (n >= 2 && docs.starts[n - 1].pos == docs.starts[n - 2].pos) {
      stuck = true;
      return docs.starts[n - 1];
    }
  }
  if (docs.starts.size() > 1) return docs.starts[1];
  return std::nullopt;
}

// True when `text` certainly holds at most one document whose root does not start with `,`,
// so that YAML::Load alone is safe and complete. Any document marker, directive or a leading
// `,` sends the text through second_document first. A cheap text check: the extra parser
// pass costs a tenth of a dry-run, and almost no recipe needs it.
bool plainly_one_document(std::string_view t) {
  for (size_t line = 0; line < t.size();) {
    std::string_view rest = t.substr(line);
    if (rest.substr(0, 3) == "---" || rest.substr(0, 3) == "..." || rest.substr(0, 1) == "%" ||
        rest.substr(0, 3) == "\xEF\xBB\xBF")
      return false;
    size_t nl = t.find('\n', line);
    if (nl == std::string_view::npos) break;
    line = nl + 1;
  }
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  for (size_t i = 0; i < t.size();) {
    char c = t[i];
    if (blank(c)) {
      ++i;
    } else if (c == '#') {
      i = t.find('\n', i);
      if (i == std::string_view::npos) return true;
    } else if (c == '!' || c == '&') {  // a tag or an anchor before the root node
      while (i < t.size() && !blank(t[i])) ++i;
    } else {
      return c != ',';
    }
  }
  return true;
}

// The character at a yaml-cpp position, for messages (positions do not count a BOM).
std::string char_at(std::string_view text, int pos) {
  size_t at = static_cast<size_t>(std::max(pos, 0));
  if (text.substr(0, 3) == "\xEF\xBB\xBF") at += 3;
  return at < text.size() ? printable_text(text.substr(at, 1), 8) : "end of file";
}

struct Converter {
  std::string file;
  std::string override_arg;
  Diagnostics& diags;
  size_t nodes = 0;
  size_t scalar_bytes = 0;
  bool failed = false;

  SourceLoc loc_of(const YAML::Mark& m) const {
    SourceLoc l;
    l.file = file;
    l.override_arg = override_arg;
    if (override_arg.empty() && m.line >= 0) {
      l.line = m.line + 1;
      l.column = m.column + 1;
    }
    return l;
  }

  YamlNode convert(const YAML::Node& n, int depth) {
    YamlNode out;
    if (failed) return out;
    out.loc = loc_of(n.Mark());
    if (++nodes > kMaxNodes) {
      fail(out.loc, "document too large (more than 200000 nodes; an alias bomb?)");
      return out;
    }
    if (depth > kMaxDepth) {
      fail(out.loc, kTooDeep);
      return out;
    }
    switch (n.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        out.kind = YamlNode::Kind::kNull;
        break;
      case YAML::NodeType::Scalar:
        out.kind = YamlNode::Kind::kScalar;
        scalar_bytes += n.Scalar().size();
        if (scalar_bytes > kMaxScalarBytes) {
          fail(out.loc,
               "document too large (more than 32 MiB of text once aliases are "
               "expanded; an alias bomb?)");
          return out;
        }
        out.scalar = n.Scalar();
        // A quoted scalar (tag "!") and an explicit `!!str` are strings, never numbers or
        // booleans; other explicit tags are refused below instead of being ignored.
        out.quoted = n.Tag() == "!" || n.Tag() == "tag:yaml.org,2002:str";
        if (!out.quoted && n.Tag() != "?" && n.Tag() != "tag:yaml.org,2002:int" &&
            n.Tag() != "tag:yaml.org,2002:bool" && n.Tag() != "tag:yaml.org,2002:float" &&
            n.Tag() != "tag:yaml.org,2002:null")
          diags.error("yaml-tag", "", out.loc,
                      "unsupported YAML tag `" + printable_text(n.Tag(), 60) + "`",
                      "remove the tag; quote the value (or write !!str) to make it a string");
        // YAML is Unicode text; other bytes would reach messages, JSON and job records.
        if (first_invalid_utf8(out.scalar) != std::string::npos)
          diags.error("yaml-not-utf8", "", out.loc,
                      "value is not UTF-8 text: `" + printable_text(out.scalar, 40) + "`",
                      "save the recipe as UTF-8");
        break;
      case YAML::NodeType::Sequence:
        out.kind = YamlNode::Kind::kSequence;
        for (const auto& item : n) out.items.push_back(convert(item, depth + 1));
        break;
      case YAML::NodeType::Map: {
        out.kind = YamlNode::Kind::kMap;
        std::set<std::string> seen;
        for (const auto& kv : n) {
          SourceLoc kloc = loc_of(kv.first.Mark());
          if (!kv.first.IsScalar()) {
            fail(kloc, "mapping keys must be plain names");
            continue;
          }
          std::string key = kv.first.Scalar();
          scalar_bytes += key.size();
          if (scalar_bytes > kMaxScalarBytes) {
            fail(kloc,
                 "document too large (more than 32 MiB of text once aliases are "
                 "expanded; an alias bomb?)");
            break;
          }
          // A key that is not UTF-8 can never be a known key: keep it, printable, so that
          // the schema reports it as unknown (with its position) without raw bytes.
          if (first_invalid_utf8(key) != std::string::npos)
            key = printable_text(key, std::string::npos);
          if (!seen.insert(key).second) {
            diags.error("duplicate-key", printable_text(key, 64), kloc,
                        "duplicate key `" + printable_text(key, 64) + "`",
                        "remove one of the two entries");
            continue;
          }
          out.entries.push_back(YamlEntry{key, kloc, convert(kv.second, depth + 1)});
        }
        break;
      }
    }
    return out;
  }

  void fail(const SourceLoc& l, const std::string& msg) {
    if (!failed) diags.error("yaml-limit", "", l, msg);
    failed = true;
  }
};

// yaml-cpp messages are already one line; keep them short and without the "yaml-cpp:" noise.
// They can quote input bytes ("unknown escape character: \xf3"), so they are made printable.
std::string reason(const YAML::Exception& e) {
  return e.msg.empty() ? std::string("invalid YAML") : printable_text(e.msg, 200);
}

}  // namespace

const YamlNode* YamlNode::find(std::string_view key) const {
  for (const auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

YamlNode* YamlNode::find(std::string_view key) {
  for (auto& e : entries)
    if (e.key == key) return &e.value;
  return nullptr;
}

const char* YamlNode::kind_name() const {
  switch (kind) {
    case Kind::kNull:
      return "null";
    case Kind::kScalar:
      return "a scalar";
    case Kind::kSequence:
      return "a list";
    case Kind::kMap:
      return "a mapping";
  }
  return "?";
}

namespace {

// (line, column), 1-based, of the first tab in the leading whitespace of a line at or before
// `up_to_line`.
std::optional<std::pair<int, int>> indentation_tab(std::string_view text, int up_to_line) {
  int line = 1;
  size_t start = 0;
  while (start <= text.size() && line <= up_to_line) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    for (size_t i = start; i < end && (text[i] == ' ' || text[i] == '\t'); ++i)
      if (text[i] == '\t') return std::pair{line, static_cast<int>(i - start) + 1};
    start = end + 1;
    ++line;
  }
  return std::nullopt;
}

}  // namespace

YamlNode parse_yaml_document(std::string_view text, const std::string& file, Diagnostics& diags) {
  if (text.find('\0') != std::string_view::npos) {
    SourceLoc l{file, 1, 1, {}};
    diags.error("yaml-syntax", "", l, "file contains NUL bytes; not a YAML text file");
    return {};
  }
  try {
    std::string owned(text);
    bool stuck = false;
    std::optional<YAML::Mark> second;
    if (!plainly_one_document(owned)) second = second_document(owned, stuck);
    if (second) {
      SourceLoc l{file, second->line + 1, second->column + 1, {}};
      if (stuck)
        diags.error("yaml-syntax", "", l,
                    "invalid YAML: unexpected `" + char_at(owned, second->pos) +
                        "` where a value should start",
                    "quote the value if the character is part of it");
      else
        diags.error("yaml-multiple-documents", "", l,
                    "recipe holds more than one YAML document ('---')",
                    "put one job per recipe file");
      return {};
    }
    // At most one document, so Load (which reads one) sees the whole stream.
    YAML::Node doc = YAML::Load(owned);
    Converter c{file, {}, diags};
    return c.convert(doc, 0);
  } catch (const YAML::DeepRecursion& e) {
    diags.error("yaml-limit", "", SourceLoc{file, e.mark.line + 1, e.mark.column + 1, {}},
                kTooDeep);
  } catch (const YAML::Exception& e) {
    SourceLoc l{file,
                e.mark.line >= 0 ? e.mark.line + 1 : 1,
                e.mark.column >= 0 ? e.mark.column + 1 : 1,
                {}};
    // yaml-cpp's words for a tab in the indentation ("illegal map value", "end of map not
    // found") do not name it; the tab is the likely cause when one indents a line up to here.
    if (auto tab = indentation_tab(text, l.line)) {
      diags.error("yaml-tab-indent", "", SourceLoc{file, tab->first, tab->second, {}},
                  "invalid YAML: a tab in the indentation (YAML indents with spaces only)",
                  "replace the tab with spaces");
      return {};
    }
    diags.error("yaml-syntax", "", l, "invalid YAML: " + reason(e));
  } catch (const std::exception& e) {
    diags.error("yaml-syntax", "", SourceLoc{file, 1, 1, {}},
                std::string("invalid YAML: ") + e.what());
  }
  return {};
}

YamlNode parse_yaml_value(std::string_view text, const std::string& override_arg,
                          Diagnostics& diags) {
  SourceLoc where;
  where.override_arg = override_arg;
  if (first_invalid_utf8(text) != std::string_view::npos ||
      text.find('\0') != std::string_view::npos) {
    diags.error("bad-override", "", where, "value is not UTF-8 text without NUL bytes");
    return {};
  }
  try {
    std::string owned(text);
    bool stuck = false;
    if (!plainly_one_document(owned) && second_document(owned, stuck)) {
      diags.error("bad-override", "", where,
                  stuck ? "value starts with a character that cannot start a YAML value"
                        : "value holds more than one YAML document",
                  "quote strings containing ':' or '#', write lists as [a,b]");
      return {};
    }
    YAML::Node n = YAML::Load(owned);
    Converter c{{}, override_arg, diags};
    return c.convert(n, 0);
  } catch (const YAML::DeepRecursion&) {
    diags.error("bad-override", "", where, kTooDeep);
  } catch (const YAML::Exception& e) {
    diags.error("bad-override", "", where, "value is not a YAML scalar or list: " + reason(e),
                "quote strings containing ':' or '#', write lists as [a,b]");
  } catch (const std::exception& e) {
    diags.error("bad-override", "", where, std::string("invalid value: ") + e.what());
  }
  return {};
}

}  // namespace bridge
