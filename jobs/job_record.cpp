#include "jobs/job_record.h"

#include "base/json_text.h"

namespace bridge {

namespace {

constexpr std::pair<JobState, const char*> kStateNames[] = {
    {JobState::kPending, "PENDING"},     {JobState::kRunning, "RUNNING"},
    {JobState::kSucceeded, "SUCCEEDED"}, {JobState::kFailed, "FAILED"},
    {JobState::kCancelled, "CANCELLED"}, {JobState::kUnknown, "UNKNOWN"}};

}  // namespace

const char* job_state_name(JobState s) {
  for (auto [state, name] : kStateNames)
    if (state == s) return name;
  return "UNKNOWN";
}

std::optional<JobState> parse_job_state(const std::string& name) {
  for (auto [state, n] : kStateNames)
    if (name == n) return state;
  return std::nullopt;
}

bool is_final(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

nlohmann::ordered_json shipped_code_to_json(const ShippedCode& c) {
  return {
      {"mode", c.mode},
      {"path", c.source},
      {"dir", c.dir},
      {"commit",
       c.commit.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.commit)},
      {"dirty", c.dirty ? nlohmann::ordered_json(*c.dirty) : nullptr},
      {"hash", c.hash.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(c.hash)},
      {"files", c.files},
      {"bytes", c.bytes}};
}

namespace {

std::optional<ShippedCode> shipped_code_from_json(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  auto str = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  auto count = [&](const char* k) {
    auto it = j.find(k);
    return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
  };
  ShippedCode c{str("mode"),  str("path"), str("dir"),     str("commit"),
                std::nullopt, str("hash"), count("files"), count("bytes")};
  if (auto it = j.find("dirty"); it != j.end() && it->is_boolean()) c.dirty = it->get<bool>();
  return c;
}

}  // namespace

nlohmann::ordered_json job_record_to_json(const JobRecord& r, RecordFields fields) {
  nlohmann::ordered_json j = json_object_with_room(32);  // room for every field below
  j["format"] = "bridge-launch-job/1";
  j["id"] = r.id;
  j["name"] = r.name;
  j["executor"] = r.executor;
  j["scheduler_id"] = r.scheduler_id;
  j["job_dir"] = r.job_dir;
  j["recipe_path"] = r.recipe_path;
  j["overrides"] = r.overrides;
  j["submitted_at"] = r.submitted_at;
  j["state"] = job_state_name(r.state);
  j["state_detail"] = r.state_detail;
  j["exit_code"] = r.exit_code ? nlohmann::ordered_json(*r.exit_code) : nullptr;
  j["namespace"] = r.namespace_;
  j["context"] = r.context;
  j["nodes"] = r.nodes;
  j["ranks"] = r.ranks;
  if (fields == RecordFields::kAll) {
    j["knobs"] = r.knobs;
    j["plan"] = r.plan_json;
    j["rendered"] = r.rendered;
  }
  j["started_at"] = r.started_at;
  j["ended_at"] = r.ended_at;
  j["progress_rank"] = r.progress_rank;
  if (r.code) j["code"] = shipped_code_to_json(*r.code);
  return j;
}

std::optional<JobRecord> job_record_from_json(const nlohmann::json& j) {
  // Every field is type-checked before use: an entry is a file a user (or a bad disk) may
  // have changed, and `value()` throws on a field of another type.
  if (!j.is_object()) return std::nullopt;
  auto format = j.find("format");
  if (format == j.end() || !format->is_string() || *format != "bridge-launch-job/1")
    return std::nullopt;
  auto str = [&](const char* k) -> std::optional<std::string> {
    auto it = j.find(k);
    if (it == j.end() || !it->is_string()) return std::nullopt;
    return it->get<std::string>();
  };
  JobRecord r;
  auto id = str("id"), name = str("name"), executor = str("executor"), state = str("state");
  if (!id || id->empty() || !name || !executor || !state) return std::nullopt;
  auto parsed = parse_job_state(*state);
  if (!parsed) return std::nullopt;
  r.id = *id;
  r.name = *name;
  r.executor = *executor;
  r.state = *parsed;
  r.scheduler_id = str("scheduler_id").value_or("");
  r.job_dir = str("job_dir").value_or("");
  r.recipe_path = str("recipe_path").value_or("");
  r.submitted_at = str("submitted_at").value_or("");
  r.state_detail = str("state_detail").value_or("");
  r.namespace_ = str("namespace").value_or("");
  r.context = str("context").value_or("");
  r.rendered = str("rendered").value_or("");
  r.started_at = str("started_at").value_or("");
  r.ended_at = str("ended_at").value_or("");
  if (auto it = j.find("overrides"); it != j.end() && it->is_array())
    for (const auto& o : *it)
      if (o.is_string()) r.overrides.push_back(o.get<std::string>());
  if (auto it = j.find("exit_code"); it != j.end() && it->is_number_integer())
    r.exit_code = it->get<int>();
  if (auto it = j.find("nodes"); it != j.end() && it->is_number_integer()) r.nodes = *it;
  if (auto it = j.find("ranks"); it != j.end() && it->is_number_integer()) r.ranks = *it;
  if (auto it = j.find("progress_rank"); it != j.end() && it->is_number_integer())
    r.progress_rank = *it;
  if (auto it = j.find("plan"); it != j.end()) r.plan_json = *it;
  if (auto it = j.find("code"); it != j.end()) r.code = shipped_code_from_json(*it);
  if (auto it = j.find("knobs"); it != j.end() && it->is_object())
    for (const auto& [k, v] : it->items())
      if (v.is_string()) r.knobs[k] = v.get<std::string>();
  return r;
}

std::vector<std::string> secret_env_names(const JobRecord& r) {
  std::vector<std::string> names;
  if (!r.plan_json.is_object() || !r.plan_json.contains("env") || !r.plan_json["env"].is_object())
    return names;
  for (const auto& [name, entry] : r.plan_json["env"].items())
    if (entry.is_object() && entry.value("secret", false) == true) names.push_back(name);
  return names;
}

}  // namespace bridge
