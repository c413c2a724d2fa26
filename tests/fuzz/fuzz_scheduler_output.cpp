// libFuzzer target: what bridge-launch reads from the schedulers' client commands. The same
// bytes go to every reader: the Slurm parsers (parse_sbatch_id, parse_squeue, parse_sacct,
// parse_scontrol_jobs, executors/slurm_scheduler.h) with to_job_status/map_slurm_state on
// each job and slurm_error_text on the text as a failed command's output, and the kubectl
// reader (parse_kubectl_items, executors/k8s_status.h) with jobset_status, job_status,
// job_api_status, find_jobset and latest_attempt_pods on the items. No input may crash,
// throw or trip a sanitizer; job ids never hold a line break; text the code promises to
// escape for the terminal (a Slurm reason, slurm_error_text) holds no control characters.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/utf8.h"
#include "executors/k8s_status.h"
#include "executors/slurm_scheduler.h"
#include "jobs/failure_triage.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

using nlohmann::json;

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

void check_slurm_job(const bridge::SlurmJobInfo& info, const char* parser) {
  std::string where = std::string(parser) + ": ";
  if (info.id.empty()) bridge::fuzz::fail(where + "a job without an id");
  if (info.id.find('\n') != std::string::npos) bridge::fuzz::fail(where + "an id with a newline");
  bridge::JobStatus st = bridge::to_job_status(info);
  if (st.state != bridge::map_slurm_state(info.state))
    bridge::fuzz::fail(where + "to_job_status disagrees with map_slurm_state");
  // The state, the exit code and the reason are escaped (and bounded) for `status`
  // (slurm_scheduler.cpp): the detail starts with the state as shown and is always safe.
  if (st.detail.rfind(bridge::printable_text(info.state, 200), 0) != 0)
    bridge::fuzz::fail(where + "the detail does not start with Slurm's state as shown");
  if (!bridge::fuzz::is_printable_safe(st.detail))
    bridge::fuzz::fail(where + "Slurm's text reached the status detail unescaped");
}

void check_slurm(const std::string& text) {
  if (auto id = bridge::parse_sbatch_id(text); id && !all_digits(*id))
    bridge::fuzz::fail("parse_sbatch_id: an id that is not a number: " + *id);
  for (const auto& info : bridge::parse_squeue(text)) check_slurm_job(info, "parse_squeue");
  for (const auto& info : bridge::parse_sacct(text)) {
    if (!all_digits(info.id)) bridge::fuzz::fail("parse_sacct: a step or non-numeric id");
    check_slurm_job(info, "parse_sacct");
  }
  for (const auto& info : bridge::parse_scontrol_jobs(text))
    check_slurm_job(info, "parse_scontrol_jobs");
  (void)bridge::map_slurm_state(text);
  (void)bridge::is_transient_slurm_error(text);

  // The text as a batch stderr file: srun's task reports, then the triage of `why` over
  // units whose logs are these lines. Task lists are bounded; what triage returns for
  // display is printable.
  std::vector<std::string> batch_lines;
  for (size_t start = 0; start <= text.size();) {
    size_t nl = text.find('\n', start);
    batch_lines.push_back(
        text.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  bridge::FailureEvidence evidence;
  int order = 0;
  for (const auto& r : bridge::parse_srun_task_reports(batch_lines)) {
    if (r.tasks.size() > 65536) bridge::fuzz::fail("parse_srun_task_reports: unbounded task list");
    bridge::RankEvidence u;
    u.label = "rank " + std::to_string(r.tasks.front());
    u.rank = r.tasks.front();
    u.exit_code = r.exit_code;
    u.signal = r.signal;
    u.ended = r.text;
    u.failure_order = order++;
    u.lines = batch_lines;
    evidence.units.push_back(std::move(u));
    if (evidence.units.size() >= 8) break;
  }
  evidence.scheduler_lines = batch_lines;
  bridge::Triage t = bridge::triage(evidence);
  if (t.first) {
    for (const auto& l : t.first->excerpt)
      if (!bridge::fuzz::is_printable_safe(l)) bridge::fuzz::fail("triage: an unescaped excerpt");
    if (t.first->finding && !bridge::fuzz::is_printable_safe(t.first->finding->line))
      bridge::fuzz::fail("triage: an unescaped finding");
  }

  // The text as a failed command's stderr (or stdout, when stderr is blank): at most 20
  // lines of at most ~2000 bytes each, control bytes escaped.
  for (int variant = 0; variant < 3; ++variant) {
    bridge::CommandResult r;
    r.exit_code = 1;
    (variant == 1 ? r.out : r.err) = text;
    r.timed_out = variant == 2;
    std::string msg = bridge::slurm_error_text("squeue", r);
    if (msg.empty()) bridge::fuzz::fail("slurm_error_text: an empty message");
    size_t lines = 1, line_start = 0;
    for (size_t nl = msg.find('\n'); nl != std::string::npos; nl = msg.find('\n', nl + 1)) {
      if (!bridge::fuzz::is_printable_safe(msg.substr(line_start, nl - line_start)))
        bridge::fuzz::fail("slurm_error_text: control characters in the message");
      line_start = nl + 1;
      ++lines;
    }
    if (!bridge::fuzz::is_printable_safe(msg.substr(line_start)))
      bridge::fuzz::fail("slurm_error_text: control characters in the message");
    if (lines > 20 || msg.size() > 20 * 2100)
      bridge::fuzz::fail("slurm_error_text: an unbounded message");
  }
}

// A string member found by a JSON pointer, "" when absent or not a string.
std::string string_at(const json& j, const char* pointer) {
  json::json_pointer p(pointer);
  if (!j.is_object() || !j.contains(p)) return {};
  const json& v = j.at(p);
  return v.is_string() ? v.get<std::string>() : std::string();
}

void check_k8s(const std::string& text) {
  bridge::StatusOr<std::vector<json>> items = bridge::parse_kubectl_items(text);
  if (!items.ok()) {
    if (items.why().empty()) bridge::fuzz::fail("parse_kubectl_items: failed without a reason");
    return;
  }
  std::set<std::string> bases{"fuzz-job"};
  for (const json& item : *items) {
    (void)bridge::jobset_status(item);
    (void)bridge::job_status(item);
    std::string name = string_at(item, "/metadata/name");
    const json* js = bridge::find_jobset(name, *items);
    if (js && !js->is_object()) bridge::fuzz::fail("find_jobset: not an object");
    std::string base = string_at(item, "/metadata/labels/bridge-launch~1job");
    if (!base.empty()) bases.insert(base);
  }
  for (const std::string& base : bases) {
    bridge::K8sAttemptStatus a = bridge::job_api_status(base, *items);
    if (!a.found && (!a.start_next.empty() || !a.status.detail.empty()))
      bridge::fuzz::fail("job_api_status: a status for a job that was not found");
    if (!a.start_next.empty() && a.status.state != bridge::JobState::kPending)
      bridge::fuzz::fail("job_api_status: a Job to start, but not PENDING");
  }
  std::vector<bridge::K8sPod> pods = bridge::latest_attempt_pods(*items);
  for (size_t i = 0; i < pods.size(); ++i) {
    if (pods[i].name.empty() || pods[i].index < 0)
      bridge::fuzz::fail("latest_attempt_pods: a pod without a name or index");
    if (pods[i].attempt != pods[0].attempt)
      bridge::fuzz::fail("latest_attempt_pods: pods of two attempts");
    if (i > 0 && pods[i - 1].index > pods[i].index)
      bridge::fuzz::fail("latest_attempt_pods: not sorted by node index");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  check_slurm(text);
  check_k8s(text);
  return 0;
}
