// FNV-1a 64-bit hash of environment values, shared by bridge-launch and bridge-probe.
//
// Contract: fnv1a64_hex(value) returns the FNV-1a 64-bit hash (offset basis 0xcbf29ce484222325,
// prime 0x100000001b3, one round per byte) of the exact bytes of `value`, written as exactly 16
// lowercase hexadecimal digits, zero-padded. The launcher writes these hashes into
// BRIDGE_EXPECTED_ENV (`NAME=HEX` entries) and every probe rank recomputes them from its own
// environment. Header-only; depends on the standard library only. Example:
// fnv1a64_hex("") == "cbf29ce484222325", fnv1a64_hex("a") == "af63dc4c8601ec8c".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace bridge {

inline std::uint64_t fnv1a64(std::string_view bytes) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

inline std::string fnv1a64_hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::uint64_t hash = fnv1a64(bytes);
  std::string out(16, '0');
  for (int i = 15; i >= 0; --i) {
    out[static_cast<std::size_t>(i)] = kDigits[hash & 0xFU];
    hash >>= 4;
  }
  return out;
}

}  // namespace bridge
