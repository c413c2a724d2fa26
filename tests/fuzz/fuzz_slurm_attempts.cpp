// libFuzzer target: a Slurm job's `attempts` file (<job dir>/attempts, appended by the batch
// script of a job with retries: any bytes once the job or a user touched it) read as `status`,
// `why` and `cancel` read it (parse_slurm_attempts, executors/slurm_retry.h, behind
// read_slurm_attempts), then what they make of it: the newest and the newest started attempt's
// Slurm id, the status headline and the per-attempt lines. Any bytes must give attempts, never
// a crash, an exception or a sanitizer report, and the attempts must be a record the readers
// can trust: numbered 1..100001 in strictly rising order, every word without a blank or a line
// break (the file is split into key=value words), the Slurm ids chosen among the attempts'.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "executors/slurm_retry.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

bool one_word(const std::string& s) { return s.find_first_of(" \t\n\v\f\r") == std::string::npos; }

void check_words(const bridge::SlurmAttempt& a) {
  for (const std::string* w :
       {&a.slurm_job, &a.nodes, &a.started_at, &a.ended_at, &a.signature, &a.failure_class, &a.host,
        &a.excluded, &a.next_slurm_job, &a.not_retried})
    if (!one_word(*w)) bridge::fuzz::fail("an attempt's word holds a blank: " + *w);
  // `unit` is the one word whose '_' become blanks ("rank_3" is "rank 3").
  if (a.unit.find_first_of("\t\n\v\f\r") != std::string::npos)
    bridge::fuzz::fail("an attempt's unit holds a line break: " + a.unit);
}

// Whether `id` is "" or the Slurm id of one of `attempts` that `ok` accepts.
template <typename Ok>
bool one_of(const std::string& id, const std::vector<bridge::SlurmAttempt>& attempts, Ok ok) {
  if (id.empty()) return true;
  for (const auto& a : attempts)
    if (a.slurm_job == id && ok(a)) return true;
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<bridge::SlurmAttempt> attempts = bridge::parse_slurm_attempts(text);
  int before = 0;
  for (const auto& a : attempts) {
    if (a.number <= before || a.number > 100001)
      bridge::fuzz::fail("attempt numbers out of order or range: " + std::to_string(a.number));
    before = a.number;
    if (a.of < 0) bridge::fuzz::fail("a negative number of attempts allowed");
    check_words(a);
  }
  if (!one_of(bridge::latest_slurm_job(attempts), attempts, [](const auto&) { return true; }))
    bridge::fuzz::fail("the newest Slurm id is no attempt's");
  if (!one_of(bridge::started_slurm_job(attempts), attempts,
              [](const auto& a) { return !a.started_at.empty(); }))
    bridge::fuzz::fail("the newest started Slurm id is no started attempt's");
  if (bridge::attempt_headline(attempts).empty() != (attempts.size() < 2))
    bridge::fuzz::fail("a headline without a second attempt, or none with one");
  if (bridge::attempt_lines(attempts).size() != attempts.size())
    bridge::fuzz::fail("not one line per attempt");
  return 0;
}
