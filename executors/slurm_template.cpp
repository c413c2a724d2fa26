#include "executors/slurm_template.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "base/utf8.h"

namespace bridge {

void TemplateData::set(std::string name, std::string text) {
  Value v;
  v.kind = Value::Kind::kText;
  v.text = std::move(text);
  values_.insert_or_assign(std::move(name), std::move(v));
}

void TemplateData::set_lazy(std::string name, std::function<std::string()> make) {
  Value v;
  v.kind = Value::Kind::kText;
  v.make = std::move(make);
  values_.insert_or_assign(std::move(name), std::move(v));
}

void TemplateData::set_bool(std::string name, bool value) {
  Value v;
  v.kind = Value::Kind::kBool;
  v.flag = value;
  values_.insert_or_assign(std::move(name), std::move(v));
}

void TemplateData::ensure_list(const std::string& name) {
  Value& v = values_[name];
  if (v.kind != Value::Kind::kList) {
    v = Value{};
    v.kind = Value::Kind::kList;
  }
}

void TemplateData::add_item(const std::string& name, TemplateData item) {
  ensure_list(name);
  values_[name].items.push_back(std::move(item));
}

void TemplateData::add_text_item(const std::string& name, std::string text) {
  TemplateData item;
  item.set(".", std::move(text));
  add_item(name, std::move(item));
}

const TemplateData::Value* TemplateData::find(std::string_view name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {

constexpr size_t kMaxSectionDepth = 64;

// A node's text is a view of the template's text, which outlives the tree.
struct Node {
  enum class Kind { kText, kVar, kSection, kInverted } kind = Kind::kText;
  std::string_view text;  // literal text, or the tag name
  int line = 0;
  std::vector<Node> children;
};

struct TemplateError {
  int line = 0;
  std::string message;
};

bool is_blank(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

// Parses the template into a tree. Returns false and fills `error` on a syntax error.
class Parser {
 public:
  explicit Parser(std::string_view text) : t_(text) {}

  bool parse(std::vector<Node>& out, TemplateError& error) {
    std::vector<Node*> stack;
    std::vector<Node> root;
    auto current = [&]() -> std::vector<Node>& {
      return stack.empty() ? root : stack.back()->children;
    };
    size_t pos = 0;
    while (pos < t_.size()) {
      size_t open = t_.find("{{", pos);
      if (open == std::string_view::npos) {
        add_text(current(), t_.substr(pos));
        break;
      }
      size_t close = t_.find("}}", open + 2);
      int line = line_of(open);
      if (close == std::string_view::npos) {
        error = {line, "`{{` without a closing `}}`"};
        return false;
      }
      std::string_view tag = t_.substr(open + 2, close - open - 2);
      size_t end = close + 2;
      char sigil = tag.empty() ? '\0' : tag[0];
      bool standalone_kind = sigil == '#' || sigil == '^' || sigil == '/' || sigil == '!';
      // A standalone tag line is removed entirely: the blanks before it on its line and the
      // line break after it.
      size_t text_end = open;
      if (standalone_kind) {
        size_t line_start = open;
        while (line_start > pos && is_blank(t_[line_start - 1])) --line_start;
        bool starts_line = line_start == 0 || t_[line_start - 1] == '\n';
        size_t after = end;
        while (after < t_.size() && is_blank(t_[after])) ++after;
        bool ends_line = after == t_.size() || t_[after] == '\n' ||
                         (t_[after] == '\r' && after + 1 < t_.size() && t_[after + 1] == '\n');
        if (starts_line && ends_line) {
          text_end = line_start;
          end = after == t_.size() ? after : after + (t_[after] == '\r' ? 2 : 1);
        }
      }
      add_text(current(), t_.substr(pos, text_end - pos));
      pos = end;
      std::string_view name =
          trim(sigil == '#' || sigil == '^' || sigil == '/' || sigil == '!' ? tag.substr(1) : tag);
      switch (sigil) {
        case '!':
          break;
        case '#':
        case '^': {
          if (name.empty()) {
            error = {line, "a section tag needs a name"};
            return false;
          }
          // Rendering and freeing the tree recurse per level: 50 000 nested sections once
          // overflowed the stack. Real templates nest two or three levels.
          if (stack.size() >= kMaxSectionDepth) {
            error = {line, fmt::format("sections are nested deeper than {}", kMaxSectionDepth)};
            return false;
          }
          Node n;
          n.kind = sigil == '#' ? Node::Kind::kSection : Node::Kind::kInverted;
          n.text = name;
          n.line = line;
          current().push_back(std::move(n));
          stack.push_back(&current().back());
          break;
        }
        case '/':
          if (stack.empty()) {
            error = {line, fmt::format("`{{{{/{}}}}}` closes no open section", name)};
            return false;
          }
          if (stack.back()->text != name) {
            error = {line, fmt::format("`{{{{/{}}}}}` does not match the open section `{}` "
                                       "(line {})",
                                       name, stack.back()->text, stack.back()->line)};
            return false;
          }
          stack.pop_back();
          break;
        case '{':
        case '&':
          error = {line,
                   "`{{{` and `{{&` are not supported: values are never escaped, use "
                   "`{{name}}`"};
          return false;
        case '>':
          error = {line, "partials (`{{>`) are not supported"};
          return false;
        case '=':
          error = {line, "delimiter changes (`{{=`) are not supported"};
          return false;
        default: {
          if (name.empty()) {
            error = {line, "empty tag `{{}}`"};
            return false;
          }
          Node n;
          n.kind = Node::Kind::kVar;
          n.text = name;
          n.line = line;
          current().push_back(std::move(n));
        }
      }
    }
    if (!stack.empty()) {
      error = {stack.back()->line, fmt::format("section `{}` is never closed", stack.back()->text)};
      return false;
    }
    out = std::move(root);
    return true;
  }

 private:
  static void add_text(std::vector<Node>& nodes, std::string_view text) {
    if (text.empty()) return;
    Node n;
    n.text = text;
    nodes.push_back(std::move(n));
  }

  // Tags are visited left to right, so counting resumes from the previous tag: counting from
  // the start each time made parsing quadratic in the template size (seen in a profile). The
  // line breaks are found with memchr: a byte-by-byte count was 3 % of a dry-run's
  // instructions (docs/performance.md, round 9).
  int line_of(size_t offset) {
    const char* at = t_.data() + counted_;
    const char* end = t_.data() + offset;
    while (const void* nl = std::memchr(at, '\n', static_cast<size_t>(end - at))) {
      ++line_;
      at = static_cast<const char*>(nl) + 1;
    }
    counted_ = offset;
    return line_;
  }

  std::string_view t_;
  size_t counted_ = 0;
  int line_ = 1;
};

// Bounds on one rendering: nested list sections multiply (22 nested sections over a
// 3-item list are 3^22 passes), so the work and the output are capped, and a template that
// reaches a cap is an error instead of a hang. A real sbatch script is a few KiB.
constexpr size_t kMaxRenderSteps = 1'000'000;
constexpr size_t kMaxRenderedBytes = 16 << 20;

class Renderer {
 public:
  bool render(const std::vector<Node>& nodes, std::vector<const TemplateData*>& stack,
              std::string& out, TemplateError& error) {
    for (const Node& n : nodes) {
      if (++steps_ > kMaxRenderSteps || out.size() > kMaxRenderedBytes) {
        error = {n.line, fmt::format("the template does more than {} steps or writes more than "
                                     "{} MiB (nested list sections multiply)",
                                     kMaxRenderSteps, kMaxRenderedBytes >> 20)};
        return false;
      }
      if (n.kind == Node::Kind::kText) {
        out += n.text;
        continue;
      }
      const TemplateData::Value* v = lookup(stack, n.text);
      if (n.kind == Node::Kind::kVar) {
        if (!v) {
          error = {n.line, fmt::format("unknown variable `{}`", n.text)};
          return false;
        }
        if (v->kind == TemplateData::Value::Kind::kList) {
          error = {n.line, fmt::format("`{}` is a list: use it as a section", n.text)};
          return false;
        }
        out += v->kind == TemplateData::Value::Kind::kBool ? (v->flag ? "true" : "false")
                                                           : text_of(*v);
        continue;
      }
      bool truthy = v && (v->kind == TemplateData::Value::Kind::kList   ? !v->items.empty()
                          : v->kind == TemplateData::Value::Kind::kBool ? v->flag
                                                                        : !text_of(*v).empty());
      if (n.kind == Node::Kind::kInverted) {
        if (!truthy && !render(n.children, stack, out, error)) return false;
        continue;
      }
      if (!truthy) continue;
      if (v->kind == TemplateData::Value::Kind::kList) {
        for (const TemplateData& item : v->items) {
          stack.push_back(&item);
          bool ok = render(n.children, stack, out, error);
          stack.pop_back();
          if (!ok) return false;
        }
      } else if (!render(n.children, stack, out, error)) {
        return false;
      }
    }
    return true;
  }

 private:
  // A text value; a lazy one is computed at its first use in this rendering and kept: a
  // section that tests it and then prints it, or a list section around it, computes it once
  // (the step cap bounds the steps, not what each costs).
  const std::string& text_of(const TemplateData::Value& v) {
    if (!v.make) return v.text;
    auto [it, first_use] = made_.try_emplace(&v);
    if (first_use) it->second = v.make();
    return it->second;
  }

  static const TemplateData::Value* lookup(const std::vector<const TemplateData*>& stack,
                                           std::string_view name) {
    if (name == ".") return stack.back()->find(".");
    for (auto it = stack.rbegin(); it != stack.rend(); ++it)
      if (const auto* v = (*it)->find(name)) return v;
    return nullptr;
  }

  size_t steps_ = 0;
  std::map<const TemplateData::Value*, std::string> made_;  // lazy values computed so far
};

}  // namespace

std::optional<std::string> render_template(std::string_view text, const TemplateData& data,
                                           const std::string& template_name, Diagnostics& diags) {
  std::vector<Node> tree;
  TemplateError error;
  if (!Parser(text).parse(tree, error)) {
    // Messages quote tag names from the template: escaped, since it may hold any bytes.
    diags.error("template-syntax", "executor.slurm.template", {},
                fmt::format("template {} line {}: {}", printable_text(template_name, 200),
                            error.line, printable_text(error.message, 300)));
    return std::nullopt;
  }
  std::string out;
  // A script is about as long as its template; half as much again leaves room for long values.
  out.reserve(text.size() + text.size() / 2);
  std::vector<const TemplateData*> stack{&data};
  if (!Renderer().render(tree, stack, out, error)) {
    diags.error("template-render", "executor.slurm.template", {},
                fmt::format("template {} line {}: {}", printable_text(template_name, 200),
                            error.line, printable_text(error.message, 300)),
                "the variables a template can use are listed in docs/executors/slurm.md");
    return std::nullopt;
  }
  return out;
}

}  // namespace bridge
