// A small logic-less template renderer (a Mustache subset) for the sbatch template.
//
// Supported tags: `{{name}}` (the value, inserted verbatim: no escaping of any kind, the
// script builder quotes values itself), `{{#name}}...{{/name}}` (a section: repeated once per
// item of a list, rendered once for `true` or a non-empty text, skipped otherwise),
// `{{^name}}...{{/name}}` (inverted section: rendered when the value is false, empty or
// missing) and `{{! comment }}`. `{{.}}` is the current list item's text. A line holding only
// a section or comment tag (and blanks) leaves no line behind, as in Mustache.
// Not supported (reported as errors): partials, delimiter changes, `{{{...}}}`/`{{&...}}`.
// A variable that is not defined is an error, so a typo in a user template fails loudly at
// render time instead of producing a broken script. render_template never throws, provided
// the functions given to set_lazy do not. A lazy value is computed at most once per
// rendering, and only where the template uses it.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"

namespace bridge {

class TemplateData {
 public:
  void set(std::string name, std::string text);
  // A text that is computed when the template first uses it, and never when it does not (the
  // retry program of a job without retries cost a twentieth of a dry-run otherwise).
  void set_lazy(std::string name, std::function<std::string()> make);
  void set_bool(std::string name, bool value);
  // Appends an item to the list `name` (the list is created empty on first use).
  void add_item(const std::string& name, TemplateData item);
  void add_text_item(const std::string& name, std::string text);
  void ensure_list(const std::string& name);  // defines `name` as a (possibly empty) list

  struct Value {
    enum class Kind { kText, kBool, kList } kind = Kind::kText;
    std::string text;
    std::function<std::string()> make;  // set_lazy's: the text, computed when used
    bool flag = false;
    std::vector<TemplateData> items;
  };
  const Value* find(std::string_view name) const;

 private:
  std::map<std::string, Value, std::less<>> values_;
};

// Renders `text` with `data`. On any error (syntax or unknown variable) adds one error
// diagnostic naming `template_name` and the line, and returns nullopt.
std::optional<std::string> render_template(std::string_view text, const TemplateData& data,
                                           const std::string& template_name, Diagnostics& diags);

}  // namespace bridge
