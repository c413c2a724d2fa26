// Diagnostics: the error/warning list every pipeline stage appends to.
//
// Stages never throw and never print; they append Diagnostic values (severity, stable code,
// message, dotted recipe path, source location, fix hint) to a Diagnostics list owned by the
// caller. A location is either a file position (1-based line and column) or the command-line
// override that produced the value. Under --strict, warnings raised with `dropped()` (the
// user's request was silently turned off) are recorded as errors instead.
#pragma once

#include <string>
#include <vector>

#include "base/shared_text.h"

namespace bridge {

// Where a value came from: a recipe file position, a command-line override, the recipe base
// (the runtime's own recipe the plan names, model/recipe_base.h), or nowhere (a default).
// line == 0 means "no file position".
// The file and base names are SharedText: every value read from a file carries them, and a
// copy of a value then costs no copy of its file's name.
struct SourceLoc {
  SharedText file;
  int line = 0;
  int column = 0;
  std::string override_arg;  // e.g. "model.num_layers=" when the value came from the CLI
  SharedText base = {};      // e.g. "qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config"

  bool has_position() const { return line > 0; }
  bool from_override() const { return !override_arg.empty(); }
  bool from_base() const { return !base.empty(); }
  // "recipe.yaml:12:3", "override 'a.b=1'", "recipe base NAME", or "" for defaults.
  std::string describe() const;
};

// Where a value is written in a file: from (line, column) to just before (end_line,
// end_column); 1-based lines, byte columns.
struct SourceSpan {
  std::string file;
  int line = 0;
  int column = 0;
  int end_line = 0;
  int end_column = 0;

  bool operator==(const SourceSpan&) const = default;
};

enum class Severity { kError, kWarning, kInfo };
const char* severity_name(Severity s);

struct Diagnostic {
  Severity severity = Severity::kError;
  std::string code;     // stable, kebab-case: "unknown-key", "tp-overlap-disabled"
  std::string message;  // what is wrong
  std::string path;     // dotted recipe path, "" when none
  SourceLoc loc;
  std::string help;  // how to fix it, "" when obvious
};

class Diagnostics {
 public:
  explicit Diagnostics(bool strict = false) : strict_(strict) {}

  void error(std::string code, std::string path, SourceLoc loc, std::string message,
             std::string help = {});
  void warning(std::string code, std::string path, SourceLoc loc, std::string message,
               std::string help = {});
  void info(std::string code, std::string path, SourceLoc loc, std::string message,
            std::string help = {});
  // A warning meaning "your request was silently dropped": an error under --strict.
  void dropped(std::string code, std::string path, SourceLoc loc, std::string message,
               std::string help = {});

  // Each item of `other` as a warning here, its message followed by `why` (a step that
  // failed after the job was submitted: its errors can no longer stop the command).
  void add_as_warnings(const Diagnostics& other, const std::string& why = {});

  // A value no message may show (a secret env value known for the run): every message,
  // help and quoted override held here is scrubbed of it (base/secret_scrub.h), the items
  // already added and those added later, and format_diagnostic scrubs the source excerpt.
  void add_secret(const std::string& value);
  void add_secrets(const std::vector<std::string>& values);
  const std::vector<std::string>& secrets() const { return secrets_; }
  // Where a secret value is written in a recipe. The excerpt hides this text whatever its
  // spelling: a value found by add_secret as it reads is written with YAML escapes and quotes
  // there (`"pa\x41ss"`, `'it''s'`), which no scrubbing by value finds.
  void add_secret_source(const SourceSpan& span);
  const std::vector<SourceSpan>& secret_sources() const { return secret_sources_; }

  bool has_errors() const;
  bool strict() const { return strict_; }
  const std::vector<Diagnostic>& items() const { return items_; }
  // The items as users read them: those with a position in file order (file, line, column),
  // then the rest (command-line and whole-plan findings) in the order they were found.
  std::vector<Diagnostic> by_position() const;
  size_t count(Severity s) const;
  bool has_code(const std::string& code) const;

 private:
  void add(Severity s, std::string code, std::string path, SourceLoc loc, std::string message,
           std::string help);
  void scrub(Diagnostic& d, const Diagnostic& original) const;
  bool strict_;
  std::vector<Diagnostic> items_;
  // The items as added, before scrubbing: a secret learnt later is scrubbed from these with
  // every secret at once, so that one holding another is hidden whole.
  std::vector<Diagnostic> originals_;
  std::vector<std::string> secrets_;
  std::vector<SourceSpan> secret_sources_;
};

// Compiler-style rendering: "file:line:col: error: message [code]", the source line with a
// caret when the file is readable, then "  help: ...". `color` adds ANSI colours. The source
// line shows `secrets` and the text of `secret_sources` as <secret> and control bytes and
// bytes that are not UTF-8 as \xNN, the caret kept under the same text.
std::string format_diagnostic(const Diagnostic& d, bool color,
                              const std::vector<std::string>& secrets = {},
                              const std::vector<SourceSpan>& secret_sources = {});

}  // namespace bridge
