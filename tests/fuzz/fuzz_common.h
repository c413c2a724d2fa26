// Helpers shared by the libFuzzer targets (tests/fuzz/README.md).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/diagnostics.h"
#include "base/utf8.h"
#include "plan/plan_output.h"

namespace bridge::fuzz {

// Stops the run with a message libFuzzer shows next to the crashing input.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz invariant violated: %s\n", what.c_str());
  std::abort();
}

// Everything the CLI does with diagnostics must work for any input: the compiler-style text
// and the JSON of `validate/plan --format json` (nlohmann throws on invalid UTF-8, which
// would turn a bad recipe into an "internal error").
inline void render_diagnostics(const Diagnostics& diags) {
  for (const auto& d : diags.items()) {
    if (d.message.empty()) fail("a diagnostic without a message (code " + d.code + ")");
    (void)format_diagnostic(d, false);
  }
  (void)diagnostics_to_json(diags).dump(2);
}

// True when `s` is safe to print on a terminal in the sense of printable_text
// (base/utf8.h): well-formed UTF-8 without control characters (U+0000..U+001F, U+007F).
inline bool is_printable_safe(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    Utf8Char c = decode_utf8(s, i);
    if (!c.valid || c.code_point < 0x20 || c.code_point == 0x7F) return false;
    i += c.length;
  }
  return true;
}

}  // namespace bridge::fuzz
