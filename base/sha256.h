// SHA-256 (FIPS 180-4) of a byte stream, for fingerprints that must not collide by accident:
// the hash of a code snapshot shipped into a job (plan/code_tree.h), recorded in the registry.
//
// Contract: feed bytes with update() in any split; hex() ends the stream and returns the
// digest as 64 lowercase hexadecimal digits; the object is then spent (a new one is needed
// for another stream). Pure, no allocation beyond the result. Example:
// Sha256().hex() == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855".
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace bridge {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view bytes);
  std::string hex();

 private:
  void compress(const unsigned char* block);

  std::array<std::uint32_t, 8> state_{};
  std::array<unsigned char, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

}  // namespace bridge
