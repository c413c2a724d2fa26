// Shell quoting: the one home for turning bytes into POSIX shell words.
//
// Both results are a single word that any POSIX shell turns back into exactly the input
// bytes (tests/fuzz/fuzz_shell_quote.cpp checks this for arbitrary bytes):
// - shell_quote(s): always single-quoted, `'` written as '\''. For values whose look must
//   not depend on their content (exported env values, job dirs).
// - shell_word(s): `s` itself when it is non-empty and made only of [A-Za-z0-9_@%+=:,./-]
//   (nothing a shell expands or splits), else shell_quote(s). For readable command lines.
#pragma once

#include <string>
#include <string_view>

namespace bridge {

std::string shell_quote(std::string_view s);
std::string shell_word(std::string_view s);

}  // namespace bridge
