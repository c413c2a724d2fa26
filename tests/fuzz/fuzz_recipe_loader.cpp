// libFuzzer target: load_recipe_text on arbitrary bytes. Any input must give a Recipe or
// error diagnostics, never a crash, an exception, a sanitizer report or a leak; a failed
// load must say why.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/recipe_loader.h"
#include "tests/fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  bridge::Diagnostics diags;
  auto recipe = bridge::load_recipe_text(text, "fuzz.yaml", {}, diags);
  if (!recipe && !diags.has_errors()) bridge::fuzz::fail("no recipe and no error");
  if (recipe && diags.has_errors()) bridge::fuzz::fail("a recipe despite errors");
  bridge::fuzz::render_diagnostics(diags);
  return 0;
}
