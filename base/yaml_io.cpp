// The recipe and override reader: libyaml's event parser, turned into YamlNode trees. libyaml
// is a C library that reports errors as return codes, so nothing here throws.
//
// Two passes. read_stream() turns the events into a Graph, in which an alias is one more
// reference to the anchored node (the anchor counts from its own start, as in YAML, so an
// alias inside its anchor makes a cycle). Converter then walks the graph from the root into a
// YamlNode tree, expanding aliases, and enforces the limits on the expanded tree: nesting,
// node count and text size, so that an alias bomb stops after a bounded amount of work,
// whatever its shape. What the second pass reports is reported only when the first read the
// stream without a syntax error: then that error is the only one.
#include <yaml.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "base/yaml_tree.h"

namespace bridge {

namespace {

constexpr int kMaxDepth = 64;
constexpr const char* kTooDeep = "nesting deeper than 64 levels";
// Levels of nesting the first pass reads before it stops (and reports kTooDeep at the node
// that starts the 500th level): deeper text is an error anyway, and the graph stays small.
constexpr size_t kMaxReadDepth = 499;
constexpr size_t kMaxNodes = 200000;  // far above any real recipe; stops alias bombs
// Text after expanding aliases: a 4 KiB string referenced 200000 times is an alias bomb too.
constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";
constexpr size_t kMaxScalarBytes = size_t{32} << 20;
// The most entries or items a collection is given room for before they are read.
constexpr size_t kReserveCap = 1024;

// ---------------------------------------------------------------------------------------
// The text as libyaml reads it, and positions in it.
//
// YAML text is UTF-8, and libyaml refuses a whole stream that holds a byte that is not, or a
// control character. A recipe with one stray byte gets a located diagnostic instead (an
// unknown key `mod\xffel`, a value that is not UTF-8), so such bytes are handed to libyaml as
// the private-use characters U+10FF00 + byte and put back in scalars (restore_bytes). The same
// is done for what libyaml takes for a line break where editors do not (U+0085, U+2028,
// U+2029, a CR without LF), so that line numbers stay the editor's; for a BOM after the
// start, which is text; and for that private-use range itself, so that putting back is exact.
//
// Positions are 1-based lines counted at '\n' and columns counted in bytes, after a leading
// BOM; libyaml counts characters, so its marks are mapped through byte_of_char.
struct Input {
  std::string_view text;  // without a leading UTF-8 BOM
  std::string copy;       // what libyaml reads when use_copy
  bool use_copy = false;
  bool has_escapes = false;            // scalars need restore_bytes()
  std::vector<uint32_t> byte_of_char;  // libyaml's character index -> byte; empty: the same
  std::vector<uint32_t> line_starts;   // byte offset of each line

  std::string_view parsed() const { return use_copy ? std::string_view(copy) : text; }
  size_t offset_of(const yaml_mark_t& m) const {
    if (byte_of_char.empty()) return std::min(m.index, text.size());
    return byte_of_char[std::min(m.index, byte_of_char.size() - 1)];
  }
  // (line, column) of a byte offset. The end of a text whose last line has no newline is
  // column 1 of that line, where yaml-cpp, the previous reader, put it: positions stay put.
  std::pair<int, int> position(size_t offset) const {
    size_t line = static_cast<size_t>(
        std::upper_bound(line_starts.begin(), line_starts.end(), offset) - line_starts.begin());
    size_t column = offset - line_starts[line - 1] + 1;
    if (offset >= text.size() && !text.empty() && text.back() != '\n') column = 1;
    return {static_cast<int>(line), static_cast<int>(column)};
  }
  std::pair<int, int> position(const yaml_mark_t& m) const { return position(offset_of(m)); }
  // (line, column) of where a token ends, the end of the text included (position's column 1
  // there is for starts only).
  std::pair<int, int> end_position(const yaml_mark_t& m) const {
    size_t offset = offset_of(m);
    size_t line = static_cast<size_t>(
        std::upper_bound(line_starts.begin(), line_starts.end(), offset) - line_starts.begin());
    return {static_cast<int>(line), static_cast<int>(offset - line_starts[line - 1] + 1)};
  }

  // Replaces the character libyaml counts as `char_index` (a tab) by a space.
  void blank_out(size_t char_index) {
    if (!use_copy) {
      copy.assign(text);
      use_copy = true;
    }
    size_t at = char_index;
    if (!byte_of_char.empty()) {  // the copy holds multi-byte characters: count them
      at = 0;
      for (size_t chars = 0; at < copy.size(); ++at)
        if ((static_cast<unsigned char>(copy[at]) & 0xC0) != 0x80 && chars++ == char_index) break;
    }
    if (at < copy.size()) copy[at] = ' ';
  }
};

bool is_plain_ascii(unsigned char c) {
  return (c >= 0x20 && c < 0x7F) || c == '\n' || c == '\t' || c == '\r';
}

// Characters libyaml reads as they are (everything else is escaped, see Input).
bool libyaml_takes(uint32_t cp) {
  if (cp < 0x80) return is_plain_ascii(static_cast<unsigned char>(cp));
  if (cp < 0xA0 || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF) return false;
  if (cp >= 0xD800 && cp < 0xE000) return false;
  if (cp == 0xFFFE || cp == 0xFFFF) return false;
  return cp < 0x10FF00;
}

Input prepare(std::string_view text) {
  Input in;
  if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);
  in.text = text;
  in.line_starts.push_back(0);
  for (size_t nl = text.find('\n'); nl != std::string_view::npos; nl = text.find('\n', nl + 1))
    in.line_starts.push_back(static_cast<uint32_t>(nl + 1));
  auto ascii_as_is = [&](size_t at) {
    auto c = static_cast<unsigned char>(text[at]);
    return is_plain_ascii(c) && (c != '\r' || (at + 1 < text.size() && text[at + 1] == '\n'));
  };
  size_t i = 0;
  while (i < text.size() && ascii_as_is(i)) ++i;
  if (i == text.size()) return in;  // libyaml reads the text itself, and index == byte

  in.use_copy = true;
  in.copy.reserve(text.size() + 16);
  in.copy.append(text.substr(0, i));
  in.byte_of_char.reserve(text.size() + 1);
  for (size_t k = 0; k < i; ++k) in.byte_of_char.push_back(static_cast<uint32_t>(k));
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    Utf8Char ch = c < 0x80 ? Utf8Char{c, 1, true} : decode_utf8(text, i);
    if (c < 0x80 ? ascii_as_is(i) : ch.valid && libyaml_takes(ch.code_point)) {
      in.byte_of_char.push_back(static_cast<uint32_t>(i));
      in.copy.append(text.substr(i, ch.length));
    } else {
      for (size_t k = 0; k < ch.length; ++k) {
        in.byte_of_char.push_back(static_cast<uint32_t>(i + k));
        append_utf8(in.copy, 0x10FF00 + static_cast<unsigned char>(text[i + k]));
      }
      in.has_escapes = true;
    }
    i += ch.length;
  }
  in.byte_of_char.push_back(static_cast<uint32_t>(text.size()));
  return in;
}

// Puts back the bytes prepare() escaped: U+10FF00 + byte is F4 8F BC..BF 80..BF in UTF-8.
void restore_bytes(std::string& s) {
  size_t out = 0;
  for (size_t at = 0; at < s.size();) {
    auto b = [&](size_t k) { return static_cast<unsigned char>(s[at + k]); };
    if (at + 3 < s.size() && b(0) == 0xF4 && b(1) == 0x8F && (b(2) & 0xFC) == 0xBC) {
      s[out++] = static_cast<char>(((b(2) & 0x03) << 6) | (b(3) & 0x3F));
      at += 4;
    } else {
      s[out++] = s[at++];
    }
  }
  s.resize(out);
}

bool is_blank(char c) { return c == ' ' || c == '\t'; }
bool is_space(char c) { return is_blank(c) || c == '\n' || c == '\r'; }

// Byte offset of the first token at or after `at`: blanks, line breaks and comments skipped.
size_t next_token(std::string_view t, size_t at) {
  while (at < t.size()) {
    if (is_space(t[at])) {
      ++at;
    } else if (t[at] == '#' && (at == 0 || is_space(t[at - 1]))) {
      at = t.find('\n', at);
      if (at == std::string_view::npos) return t.size();
    } else {
      break;
    }
  }
  return at;
}

// True when only blanks precede byte `at` on its line, and a token follows it there (the
// line is not blank, nor only a comment).
bool indents_a_token(std::string_view t, size_t at) {
  size_t start = at;
  while (start > 0 && is_blank(t[start - 1])) --start;
  if (start > 0 && t[start - 1] != '\n') return false;
  while (at < t.size() && is_blank(t[at])) ++at;
  return at < t.size() && t[at] != '\n' && t[at] != '\r' && t[at] != '#';
}

// ---------------------------------------------------------------------------------------
// First pass: events -> Graph.

struct GraphNode {
  YamlNode::Kind kind = YamlNode::Kind::kNull;
  // A scalar's tag: "?" for a plain scalar without one, "!" for a quoted or block scalar
  // without one (and for the explicit non-specific tag `!`), else the tag in full, as
  // "tag:yaml.org,2002:str" for `!!str`. A collection's: "" without one, else as written.
  std::string tag;
  std::string text;
  int line = 0;
  int column = 0;
  int end_line = 0;  // a scalar's: where its source text ends (YamlNode::end_line)
  int end_column = 0;
  std::vector<uint32_t> children;  // items; for a mapping key, value, key, value, ...
};

struct Graph {
  std::vector<GraphNode> nodes;
  bool has_root = false;   // the document's root is nodes[0]
  bool cut_short = false;  // stopped at the node limit: the conversion fails before the end
};

struct ReadError {
  enum class Kind { kNone, kSyntax, kMultipleDocuments, kNestedTooDeep } kind = Kind::kNone;
  int line = 1;
  int column = 1;
  std::string reason;
  std::string help;
  bool no_value_start = false;  // the text's first token cannot start a value
  // libyaml's character index of a tab it refused where a token should start
  size_t tab = std::string::npos;
  bool tab_indents = false;  // that tab is in the indentation of a line with a token
};

std::string line_column(const std::pair<int, int>& p) {
  return "line " + std::to_string(p.first) + ", column " + std::to_string(p.second);
}

// libyaml's problem and context as one line: "did not find expected ',' or ']' (while
// parsing a flow sequence that starts at line 2, column 8)", a few problems in plainer words.
// `in_document`: a document has started; `after_end`: it ended with `...`.
ReadError syntax_error(const Input& in, const yaml_parser_t& p, bool in_document, bool after_end) {
  ReadError e;
  e.kind = ReadError::Kind::kSyntax;
  if (p.error == YAML_MEMORY_ERROR || !p.problem) {
    e.reason = "out of memory";
    return e;
  }
  size_t at = in.offset_of(p.problem_mark);
  std::tie(e.line, e.column) = in.position(at);
  std::string problem = p.problem;
  auto char_there = [&] {
    return printable_text(in.text.substr(at, decode_utf8(in.text, at).length), 8);
  };
  if (problem == "did not find expected node content") {
    e.no_value_start = next_token(in.text, 0) == at;
    if (at < in.text.size()) {
      e.reason = "unexpected `" + char_there() + "` where a value should start";
      e.help = "quote the value if the character is part of it";
    } else if (p.context && std::string_view(p.context) == "while parsing a flow node") {
      e.reason = "the text ends inside a `[` or `{` that is not closed";
    } else {
      e.reason = "the text ends where a value should start";
    }
    return e;
  }
  if (problem == "did not find expected <document start>") {
    if (!in_document)
      e.reason = "a `%` directive line must be followed by a `---` line";
    else if (after_end)  // text after `...` is a second document, even without `---`
      e.kind = ReadError::Kind::kMultipleDocuments;
    else
      e.reason = "text after the end of the document (is this line indented less than the first?)";
    return e;
  }
  bool between_tokens = problem == "found character that cannot start any token" ||
                        problem == "found a tab character that violates indentation";
  if (between_tokens && at < in.text.size() && in.text[at] == '\t') {
    e.tab = p.problem_mark.index;
    e.tab_indents = indents_a_token(in.text, at);
  }
  if (problem == "found character that cannot start any token")
    problem = "found character `" + char_there() + "` that cannot start any token";
  e.reason = problem;
  if (p.context) {
    e.reason += std::string(" (") + p.context;
    auto started = in.position(p.context_mark);
    if (started != std::pair{e.line, e.column})
      e.reason += " that starts at " + line_column(started);
    e.reason += ")";
  }
  e.reason = printable_text(e.reason, 200);
  return e;
}

class EventReader {
 public:
  EventReader(const Input& in, Graph& g) : in_(in), g_(g) {}

  ReadError read() {
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
      ReadError e;
      e.kind = ReadError::Kind::kSyntax;
      e.reason = "out of memory";
      return e;
    }
    std::string_view src = in_.parsed();
    yaml_parser_set_input_string(&parser, reinterpret_cast<const unsigned char*>(src.data()),
                                 src.size());
    yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING);
    ReadError result = loop(parser);
    yaml_parser_delete(&parser);
    return result;
  }

 private:
  struct Open {
    uint32_t node;
    bool in_key;        // the collection is a mapping key or inside one
    size_t key_offset;  // a mapping's: where its latest key starts
  };

  ReadError loop(yaml_parser_t& parser) {
    for (;;) {
      yaml_event_t ev;
      if (!yaml_parser_parse(&parser, &ev))
        return syntax_error(in_, parser, started_document_, ended_explicitly_);
      ReadError e = handle(ev);
      bool end = ev.type == YAML_STREAM_END_EVENT;
      yaml_event_delete(&ev);
      if (e.kind != ReadError::Kind::kNone) return e;
      if (end || g_.cut_short) return {};
    }
  }

  ReadError handle(const yaml_event_t& ev) {
    switch (ev.type) {
      case YAML_DOCUMENT_START_EVENT:
        // A second document is the error, whatever it holds: stop at its start.
        if (started_document_) {
          ReadError e;
          e.kind = ReadError::Kind::kMultipleDocuments;
          std::tie(e.line, e.column) = in_.position(ev.start_mark);
          return e;
        }
        started_document_ = true;
        return {};
      case YAML_DOCUMENT_END_EVENT:
        ended_explicitly_ = !ev.data.document_end.implicit;
        return {};
      case YAML_SCALAR_EVENT:
        return scalar(ev);
      case YAML_ALIAS_EVENT:
        return alias(ev);
      case YAML_SEQUENCE_START_EVENT:
      case YAML_MAPPING_START_EVENT: {
        bool seq = ev.type == YAML_SEQUENCE_START_EVENT;
        const yaml_char_t* anchor =
            seq ? ev.data.sequence_start.anchor : ev.data.mapping_start.anchor;
        ReadError e = place(ev.start_mark);
        if (e.kind != ReadError::Kind::kNone) return e;
        auto index = static_cast<uint32_t>(g_.nodes.size() - 1);
        g_.nodes[index].kind = seq ? YamlNode::Kind::kSequence : YamlNode::Kind::kMap;
        const yaml_char_t* tag = seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag;
        if (tag) g_.nodes[index].tag = reinterpret_cast<const char*>(tag);
        open_.push_back(Open{index, placed_in_key_, 0});
        if (anchor) anchors_[reinterpret_cast<const char*>(anchor)] = index;
        return {};
      }
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        if (!open_.empty()) open_.pop_back();
        return {};
      default:
        return {};
    }
  }

  // Adds a node (or, for an alias, one more reference to the anchored node) where the next
  // node goes.
  ReadError place(const yaml_mark_t& start, uint32_t alias_of = UINT32_MAX) {
    if (open_.size() >= kMaxReadDepth) {
      ReadError e;
      e.kind = ReadError::Kind::kNestedTooDeep;
      std::tie(e.line, e.column) = in_.position(start);
      return e;
    }
    uint32_t index = alias_of;
    if (index == UINT32_MAX) {
      index = static_cast<uint32_t>(g_.nodes.size());
      g_.nodes.emplace_back();
      std::tie(g_.nodes.back().line, g_.nodes.back().column) = in_.position(start);
    }
    placed_in_key_ = false;
    if (open_.empty()) {
      g_.has_root = true;
    } else {
      Open& parent = open_.back();
      std::vector<uint32_t>& siblings = g_.nodes[parent.node].children;
      bool is_key = g_.nodes[parent.node].kind == YamlNode::Kind::kMap && siblings.size() % 2 == 0;
      if (is_key) parent.key_offset = in_.offset_of(start);
      placed_in_key_ = parent.in_key || is_key;
      siblings.push_back(index);
    }
    // Every node outside keys is converted at least once, so more of them than the
    // conversion allows means that it fails, at or before this node: reading on would only
    // cost memory.
    if (!placed_in_key_ && ++value_nodes_ > kMaxNodes) g_.cut_short = true;
    return {};
  }

  // Where a node that is not in the text (`key:` with nothing after it) is placed: at the
  // token that follows, or at the `?` of an explicit key that has no value.
  size_t absent_node_offset(size_t at) const {
    if (!open_.empty() && g_.nodes[open_.back().node].kind == YamlNode::Kind::kMap &&
        g_.nodes[open_.back().node].children.size() % 2 == 1 &&
        (at == 0 || in_.text[at - 1] != ':')) {
      size_t key = open_.back().key_offset;
      while (key > 0 && is_space(in_.text[key - 1])) --key;
      if (key > 0 && in_.text[key - 1] == '?') return key - 1;
    }
    return next_token(in_.text, at);
  }

  ReadError scalar(const yaml_event_t& ev) {
    const auto& s = ev.data.scalar;
    bool absent = s.length == 0 && !s.tag && !s.anchor && s.style == YAML_PLAIN_SCALAR_STYLE;
    size_t absent_at = absent ? absent_node_offset(in_.offset_of(ev.start_mark)) : 0;
    // A tag with nothing after it at the end of the text is a null, not an empty string.
    bool bare_tag = s.length == 0 && s.tag && open_.empty() &&
                    next_token(in_.text, in_.offset_of(ev.end_mark)) >= in_.text.size();
    ReadError e = place(ev.start_mark);
    if (e.kind != ReadError::Kind::kNone) return e;
    GraphNode& n = g_.nodes.back();
    if (absent) std::tie(n.line, n.column) = in_.position(absent_at);
    std::tie(n.end_line, n.end_column) = in_.end_position(ev.end_mark);
    n.text.assign(reinterpret_cast<const char*>(s.value), s.length);
    if (in_.has_escapes) restore_bytes(n.text);
    // A NUL written as an escape ("abc\0def"): no file name, program argument or environment
    // value can carry one (the C string ends there: a rank would get "abc", a log path would
    // be cut), so it is refused where it is written, whatever key it is for.
    if (n.text.find('\0') != std::string::npos) {
      ReadError nul;
      nul.kind = ReadError::Kind::kSyntax;
      std::tie(nul.line, nul.column) = in_.position(ev.start_mark);
      nul.reason =
          "this value holds a NUL byte (\\0), which no file name, argument or environment "
          "value can carry";
      nul.help = "remove the \\0 escape from the value";
      return nul;
    }
    if (s.tag)
      n.tag = reinterpret_cast<const char*>(s.tag);
    else
      n.tag = s.style == YAML_PLAIN_SCALAR_STYLE ? "?" : "!";
    const std::string& t = n.text;
    bool null_text = t.empty() || t == "~" || t == "null" || t == "Null" || t == "NULL";
    n.kind =
        (n.tag == "?" && null_text) || bare_tag ? YamlNode::Kind::kNull : YamlNode::Kind::kScalar;
    if (s.anchor)
      anchors_[reinterpret_cast<const char*>(s.anchor)] =
          static_cast<uint32_t>(g_.nodes.size() - 1);
    return {};
  }

  ReadError alias(const yaml_event_t& ev) {
    std::string name = reinterpret_cast<const char*>(ev.data.alias.anchor);
    auto it = anchors_.find(name);
    if (it == anchors_.end()) {
      ReadError e;
      e.kind = ReadError::Kind::kSyntax;
      std::tie(e.line, e.column) = in_.position(ev.start_mark);
      e.reason = "the alias `*" + printable_text(name, 60) + "` has no anchor `&" +
                 printable_text(name, 60) + "` before it";
      return e;
    }
    return place(ev.start_mark, it->second);
  }

  const Input& in_;
  Graph& g_;
  std::vector<Open> open_;
  std::unordered_map<std::string, uint32_t> anchors_;
  size_t value_nodes_ = 0;
  bool placed_in_key_ = false;
  bool started_document_ = false;
  bool ended_explicitly_ = false;
};

// libyaml refuses a tab between tokens where a key could start (after `key:`, `-` or `?` in
// a block, as in `key:<TAB>value`, and on a blank line): such a tab is blanked out and the
// text read again, up to 64 MiB of reading in all. A tab that indents a token stays an error
// in a recipe (yaml-tab-indent) unless `indentation_tabs` (an override value, where it is a
// leading blank).
ReadError read_stream(Input& in, Graph& g, bool indentation_tabs) {
  constexpr size_t kMaxBytesRead = size_t{64} << 20;
  for (size_t read = 0;; read += in.text.size() + 1) {
    g = Graph{};
    // About one node per dozen bytes in a recipe: most of the graph without regrowing it.
    g.nodes.reserve(std::min<size_t>(in.text.size() / 12 + 16, 16 * kReserveCap));
    ReadError e = EventReader(in, g).read();
    if (e.tab == std::string::npos || (e.tab_indents && !indentation_tabs) || read > kMaxBytesRead)
      return e;
    in.blank_out(e.tab);
  }
}

// ---------------------------------------------------------------------------------------
// Second pass: Graph -> YamlNode, with the limits.

struct Converter {
  const Graph& g;
  SharedText file;  // one name, shared by every node's location
  std::string override_arg;
  // libyaml reads only UTF-8 and writes only UTF-8: a scalar can hold other bytes only when
  // prepare() escaped some (Input::has_escapes), and is checked only then.
  bool may_hold_other_bytes;
  Diagnostics& diags;
  size_t nodes = 0;
  size_t scalar_bytes = 0;
  bool failed = false;
  std::set<uint32_t> tag_reported;  // an aliased node is converted each time, reported once

  SourceLoc loc_of(const GraphNode& n) const {
    SourceLoc l;
    l.file = file;
    l.override_arg = override_arg;
    if (override_arg.empty()) {
      l.line = n.line;
      l.column = n.column;
    }
    return l;
  }

  // A recipe's mappings hold a few keys: comparing with those already read costs no
  // allocation. A mapping past kLinearKeys (a hostile one has 100 000) is checked through
  // `seen`, which then holds every key, so the check stays O(log n) per key.
  static bool is_duplicate(const std::vector<YamlEntry>& entries, std::set<std::string>& seen,
                           const std::string& key) {
    constexpr size_t kLinearKeys = 32;
    if (entries.size() < kLinearKeys) {
      for (const YamlEntry& e : entries)
        if (e.key == key) return true;
      return false;
    }
    if (seen.empty())
      for (const YamlEntry& e : entries) seen.insert(e.key);
    return !seen.insert(key).second;
  }

  // A mapping's entries, each key checked: a plain scalar, UTF-8 (else kept printable, so
  // that the schema reports it as unknown), not a duplicate.
  void convert_map(const GraphNode& n, int depth, YamlNode& out) {
    out.kind = YamlNode::Kind::kMap;
    // No moves of the entries read so far; capped, since an alias bomb's mappings are
    // large and the conversion may stop at the node limit before it fills them.
    out.entries.reserve(std::min<size_t>(n.children.size() / 2, kReserveCap));
    std::set<std::string> seen;  // only for large mappings: see is_duplicate
    for (size_t k = 0; k + 1 < n.children.size(); k += 2) {
      const GraphNode& key_node = g.nodes[n.children[k]];
      SourceLoc kloc = loc_of(key_node);
      if (key_node.kind != YamlNode::Kind::kScalar) {
        fail(kloc, "mapping keys must be plain names");
        continue;
      }
      std::string key = key_node.text;
      scalar_bytes += key.size();
      if (scalar_bytes > kMaxScalarBytes) {
        fail(kloc,
             "document too large (more than 32 MiB of text once aliases are "
             "expanded; an alias bomb?)");
        break;
      }
      // A key that is not UTF-8 can never be a known key: keep it, printable, so that
      // the schema reports it as unknown (with its position) without raw bytes.
      if (may_hold_other_bytes && first_invalid_utf8(key) != std::string::npos)
        key = printable_text(key, std::string::npos);
      if (is_duplicate(out.entries, seen, key)) {
        diags.error("duplicate-key", printable_text(key, 64), kloc,
                    "duplicate key `" + printable_text(key, 64) + "`",
                    "remove one of the two entries");
        continue;
      }
      YamlNode value = convert(n.children[k + 1], depth + 1);
      out.entries.push_back(YamlEntry{std::move(key), std::move(kloc), std::move(value)});
    }
  }

  YamlNode convert(uint32_t index, int depth) {
    YamlNode out;
    if (failed) return out;
    const GraphNode& n = g.nodes[index];
    out.loc = loc_of(n);
    if (refused_tag(n) && tag_reported.insert(index).second) report_tag(n, out.loc);
    if (++nodes > kMaxNodes) {
      fail(out.loc, "document too large (more than 200000 nodes; an alias bomb?)");
      return out;
    }
    if (depth > kMaxDepth) {
      fail(out.loc, kTooDeep);
      return out;
    }
    switch (n.kind) {
      case YamlNode::Kind::kNull:
        break;
      case YamlNode::Kind::kScalar:
        out.kind = YamlNode::Kind::kScalar;
        scalar_bytes += n.text.size();
        if (scalar_bytes > kMaxScalarBytes) {
          fail(out.loc,
               "document too large (more than 32 MiB of text once aliases are "
               "expanded; an alias bomb?)");
          return out;
        }
        out.scalar = n.text;
        if (override_arg.empty()) {
          out.end_line = n.end_line;
          out.end_column = n.end_column;
        }
        // A quoted scalar (tag "!") and an explicit `!!str` are strings, never numbers or
        // booleans; other explicit tags are refused (check_tag) instead of being ignored.
        out.quoted = n.tag == "!" || n.tag == kStrTag;
        // YAML is Unicode text; other bytes would reach messages, JSON and job records.
        // The value is not quoted: it may be a secret, whose `secret: true` is not read yet.
        if (size_t bad = may_hold_other_bytes ? first_invalid_utf8(out.scalar) : std::string::npos;
            bad != std::string::npos)
          diags.error("yaml-not-utf8", "", out.loc,
                      "value is not UTF-8 text (its byte " + std::to_string(bad + 1) +
                          " is not part of a UTF-8 character)",
                      "save the recipe as UTF-8");
        break;
      case YamlNode::Kind::kSequence:
        out.kind = YamlNode::Kind::kSequence;
        out.items.reserve(std::min<size_t>(n.children.size(), kReserveCap));
        for (uint32_t item : n.children) out.items.push_back(convert(item, depth + 1));
        break;
      case YamlNode::Kind::kMap:
        convert_map(n, depth, out);
        break;
    }
    return out;
  }

  // Explicit tags mean different things to different YAML readers (`!!float 2` is 2.0 to
  // one and 2 to another, `!!null 2` a null or a 2, `!!set` a mapping or an error), and
  // bridge-launch reads each value by its key's type: only `!!str` (and `!`), which make a
  // scalar a string, are taken; any other tag is refused, never ignored.
  static bool refused_tag(const GraphNode& n) {
    bool scalar_like = n.kind == YamlNode::Kind::kScalar || n.kind == YamlNode::Kind::kNull;
    return !n.tag.empty() && n.tag != "!" && !(scalar_like && (n.tag == "?" || n.tag == kStrTag));
  }

  void report_tag(const GraphNode& n, const SourceLoc& l) {
    constexpr std::string_view kCore = "tag:yaml.org,2002:";
    std::string shown = n.tag.rfind(kCore, 0) == 0 ? "!!" + n.tag.substr(kCore.size()) : n.tag;
    diags.error("yaml-tag", "", l, "unsupported YAML tag `" + printable_text(shown, 60) + "`",
                "remove the tag: bridge-launch reads each value as its key's type; quote the "
                "value (or write !!str) to make it a string");
  }

  void fail(const SourceLoc& l, const std::string& msg) {
    if (!failed) diags.error("yaml-limit", "", l, msg);
    failed = true;
  }
};

YamlNode convert_root(const Graph& g, const Input& in, const SharedText& file,
                      const std::string& override_arg, Diagnostics& diags) {
  if (!g.has_root) {  // no document at all: empty, or only comments
    YamlNode out;
    out.loc.file = file;
    out.loc.override_arg = override_arg;
    return out;
  }
  Converter c{g, file, override_arg, in.has_escapes, diags, 0, 0, false, {}};
  return c.convert(0, 0);
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
  Input in = prepare(text);
  Graph g;
  ReadError e = read_stream(in, g, false);
  const SharedText shared_file = file;  // one allocation for every location of the document
  if (e.kind == ReadError::Kind::kNone) return convert_root(g, in, shared_file, {}, diags);
  SourceLoc l{shared_file, e.line, e.column, {}};
  switch (e.kind) {
    case ReadError::Kind::kNone:
      break;
    case ReadError::Kind::kMultipleDocuments:
      diags.error("yaml-multiple-documents", "", l,
                  "recipe holds more than one YAML document ('---')",
                  "put one job per recipe file");
      break;
    case ReadError::Kind::kNestedTooDeep:
      diags.error("yaml-limit", "", l, kTooDeep);
      break;
    case ReadError::Kind::kSyntax:
      // libyaml's words for a tab in the indentation ("found character that cannot start any
      // token") do not name it; the tab is the likely cause when one indents a line up to here.
      if (auto tab = indentation_tab(text, l.line)) {
        diags.error("yaml-tab-indent", "", SourceLoc{shared_file, tab->first, tab->second, {}},
                    "invalid YAML: a tab in the indentation (YAML indents with spaces only)",
                    "replace the tab with spaces");
        break;
      }
      diags.error("yaml-syntax", "", l, "invalid YAML: " + e.reason, e.help);
      break;
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
  const char* help = "quote strings containing ':' or '#', write lists as [a,b]";
  // `---` and `...` start and end a document: as a value they would leave it empty, and so
  // unset the key (`model.num_layers=---`), which nobody means.
  size_t first = text.find_first_not_of(" \t");
  std::string_view start = first == std::string_view::npos ? "" : text.substr(first, 4);
  if ((start.substr(0, 3) == "---" || start.substr(0, 3) == "...") &&
      (start.size() == 3 || start[3] == ' ' || start[3] == '\t' || start[3] == '\n' ||
       start[3] == '\r')) {
    diags.error(
        "bad-override", "", where,
        "value starts with the YAML document marker `" + std::string(start.substr(0, 3)) + "`",
        "quote it to give the text, or write KEY=null to unset the key");
    return {};
  }
  Input in = prepare(text);
  Graph g;
  ReadError e = read_stream(in, g, true);
  switch (e.kind) {
    case ReadError::Kind::kNone:
      return convert_root(g, in, {}, override_arg, diags);
    case ReadError::Kind::kMultipleDocuments:
      diags.error("bad-override", "", where, "value holds more than one YAML document", help);
      break;
    case ReadError::Kind::kNestedTooDeep:
      diags.error("bad-override", "", where, kTooDeep);
      break;
    case ReadError::Kind::kSyntax:
      diags.error("bad-override", "", where,
                  e.no_value_start
                      ? std::string("value starts with a character that cannot start a YAML value")
                      : "value is not a YAML scalar or list: " + e.reason,
                  help);
      break;
  }
  return {};
}

}  // namespace bridge
