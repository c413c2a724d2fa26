// libFuzzer target: a job registry entry (<registry>/jobs/<id>.json) read exactly as
// JobRegistry::list reads one (read_job_entry, jobs/registry.h: the depth check of
// base/json_limits.h, nlohmann::json::parse without exceptions, a pending entry's
// committed lines, then job_record_from_json). Any bytes must give a record or nullopt, never a
// crash, an exception or a sanitizer report. A record read must survive the round trip the registry
// makes: job_record_to_json written as the registry writes it, read back the same way, gives
// the same record, and writing that again gives the same bytes.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "jobs/job_record.h"
#include "jobs/registry.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// JobRegistry::list, for one entry's text (a pending entry's committed lines included).
std::optional<bridge::JobRecord> read_entry(const std::string& text) {
  return bridge::read_job_entry(text);
}

// JobRegistry::put, for one record.
std::string write_entry(const bridge::JobRecord& r) {
  return bridge::job_record_to_json(r).dump(2, ' ', false,
                                            nlohmann::json::error_handler_t::replace) +
         "\n";
}

void same(bool equal, const char* field) {
  if (!equal) bridge::fuzz::fail(std::string("round trip changed the field ") + field);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::optional<bridge::JobRecord> r = read_entry(text);
  if (!r) return 0;
  if (r->id.empty()) bridge::fuzz::fail("a record without an id");
  if (!bridge::parse_job_state(bridge::job_state_name(r->state)))
    bridge::fuzz::fail("a record whose state has no name");

  std::string written = write_entry(*r);
  std::optional<bridge::JobRecord> back = read_entry(written);
  if (!back) bridge::fuzz::fail("the registry cannot read the entry it wrote:\n" + written);
  same(back->id == r->id, "id");
  same(back->name == r->name, "name");
  same(back->executor == r->executor, "executor");
  same(back->scheduler_id == r->scheduler_id, "scheduler_id");
  same(back->job_dir == r->job_dir, "job_dir");
  same(back->recipe_path == r->recipe_path, "recipe_path");
  same(back->overrides == r->overrides, "overrides");
  same(back->submitted_at == r->submitted_at, "submitted_at");
  same(back->state == r->state, "state");
  same(back->state_detail == r->state_detail, "state_detail");
  same(back->exit_code == r->exit_code, "exit_code");
  same(back->namespace_ == r->namespace_, "namespace");
  same(back->context == r->context, "context");
  same(back->nodes == r->nodes, "nodes");
  same(back->ranks == r->ranks, "ranks");
  same(back->knobs == r->knobs, "knobs");
  same(back->plan_json == r->plan_json, "plan");
  same(back->rendered == r->rendered, "rendered");
  if (write_entry(*back) != written) bridge::fuzz::fail("writing the entry again changed it");
  return 0;
}
