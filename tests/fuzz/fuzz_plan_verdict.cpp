// libFuzzer target: the plan confirmation's verdict (<job dir>/plan_confirmation.json, written
// by the job: any bytes) read as `status` and `why` read it (parse_plan_confirmation,
// plan/plan_confirm.h, behind read_plan_confirmation). Any bytes must give a verdict or
// nullopt, never a crash, an exception or a sanitizer report. A verdict read must reach the
// terminal escaped and bounded: every text printable (no control character, valid UTF-8), at
// most 50 differences and 200 uncompared fields, a rank that is a rank number, and its line
// and its JSON (`status --format json`) built without an exception.
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>

#include "plan/plan_confirm.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

void printable(const std::string& text, const char* what) {
  if (!bridge::fuzz::is_printable_safe(text))
    bridge::fuzz::fail(std::string("the verdict's ") + what + " is not escaped: " + text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<bridge::PlanConfirmationVerdict> v = bridge::parse_plan_confirmation(text);
  if (!v) return 0;
  printable(v->note, "note");
  printable(v->versions, "versions");
  if (v->differences.size() > 50) bridge::fuzz::fail("more than 50 differences kept");
  if (v->not_compared.size() > 200) bridge::fuzz::fail("more than 200 uncompared fields kept");
  for (const auto& d : v->differences) {
    printable(d.field, "difference field");
    printable(d.key, "difference key");
    printable(d.planned, "planned value");
    printable(d.actual, "actual value");
  }
  for (const auto& f : v->not_compared) printable(f, "uncompared field");
  if (v->rank && *v->rank < 0) bridge::fuzz::fail("a negative rank");
  printable(bridge::plan_confirmation_line(*v), "line");
  try {
    // Strict: a byte that is not UTF-8 would throw here, as `status --format json` would.
    (void)bridge::plan_confirmation_to_json(*v).dump(2);
  } catch (const std::exception& e) {
    bridge::fuzz::fail(std::string("the verdict's JSON throws: ") + e.what());
  }
  return 0;
}
