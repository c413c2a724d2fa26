#include "executors/k8s_names.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>

#include "probe/env_hash.h"

namespace bridge {

const std::vector<K8sApi>& k8s_apis() {
  static const std::vector<K8sApi> kApis = {
      {"jobset", "JobSet", "jobsets.jobset.x-k8s.io", "JobSet", "trainer",
       "jobsets.jobset.x-k8s.io,secrets,configmaps"},
      {"job", "Job", "jobs.batch", "Indexed Job + headless Service", "trainer",
       "jobs.batch,services,secrets,configmaps"},
      // The Trainer controller makes the JobSet (same name, owned by the TrainJob); the
      // runtime's trainer container is `node`.
      {"trainjob", "TrainJob", "trainjobs.trainer.kubeflow.org", "Kubeflow Trainer TrainJob",
       "node", "trainjobs.trainer.kubeflow.org,secrets,configmaps"},
  };
  return kApis;
}

const K8sApi* k8s_api(std::string_view name) {
  for (const auto& a : k8s_apis())
    if (name == a.name) return &a;
  return nullptr;
}

namespace {

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

std::string trim_dashes(std::string s) {
  while (!s.empty() && s.back() == '-') s.pop_back();
  size_t first = s.find_first_not_of('-');
  return first == std::string::npos ? std::string() : s.substr(first);
}

}  // namespace

std::string sanitize_k8s_name(const std::string& recipe_name) {
  std::string out;
  for (char c : recipe_name) {
    char l = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower_alnum(l))
      out += l;
    else if (!out.empty() && out.back() != '-')
      out += '-';
  }
  out = trim_dashes(out);
  if (out.empty()) return "job";
  if (!(out[0] >= 'a' && out[0] <= 'z')) out = "job-" + out;
  return out;
}

std::string k8s_short_hash(const std::string& text) {
  uint64_t h = fnv1a64(text);
  return fmt::format("{:04x}", (h ^ (h >> 16) ^ (h >> 32) ^ (h >> 48)) & 0xffff);
}

std::string k8s_submission_suffix(const std::string& job_id) { return k8s_short_hash(job_id); }

size_t decimal_digits(int64_t n) {
  size_t d = 1;
  for (; n >= 10; n /= 10) ++d;
  return d;
}

size_t jobset_reserved(int64_t nodes) {
  // "-<rjob>-0-<pod index>"
  return 1 + std::string(kK8sReplicatedJob).size() + 3 + decimal_digits(nodes > 0 ? nodes - 1 : 0);
}

size_t job_reserved(int64_t nodes, int64_t retries) {
  size_t attempt = retries > 0 ? 2 + decimal_digits(retries) : 0;  // "-r<k>"
  return attempt + 1 + decimal_digits(nodes > 0 ? nodes - 1 : 0);  // "-<index>"
}

std::string k8s_base_name(const std::string& recipe_name, const std::string& suffix,
                          size_t reserved) {
  std::string tail = "-" + suffix;
  size_t budget = kK8sMaxLabel > reserved + tail.size() ? kK8sMaxLabel - reserved - tail.size() : 0;
  std::string prefix = sanitize_k8s_name(recipe_name);
  if (prefix.size() > budget) {
    std::string hash = "-" + k8s_short_hash(recipe_name);
    size_t keep = budget > hash.size() ? budget - hash.size() : 0;
    prefix = trim_dashes(prefix.substr(0, keep));
    if (prefix.empty()) prefix = "j";
    prefix += hash;
  }
  return prefix + tail;
}

std::string jobset_child_job_name(const std::string& jobset, const std::string& rjob,
                                  int64_t job_index) {
  return fmt::format("{}-{}-{}", jobset, rjob, job_index);
}

std::string jobset_pod_hostname(const std::string& jobset, const std::string& rjob,
                                int64_t job_index, int64_t pod_index) {
  return fmt::format("{}-{}", jobset_child_job_name(jobset, rjob, job_index), pod_index);
}

std::string jobset_subdomain(const std::string& jobset) { return jobset; }

std::string jobset_master_addr(const std::string& jobset, const std::string& rjob) {
  return jobset_pod_hostname(jobset, rjob, 0, 0) + "." + jobset_subdomain(jobset);
}

std::string job_attempt_name(const std::string& base, int64_t attempt) {
  return attempt == 0 ? base : fmt::format("{}-r{}", base, attempt);
}

std::string job_service_name(const std::string& job) { return job; }

std::string job_pod_hostname(const std::string& job, int64_t index) {
  return fmt::format("{}-{}", job, index);
}

std::string job_master_addr(const std::string& job) {
  return job_pod_hostname(job, 0) + "." + job_service_name(job);
}

bool is_rfc1123_label(const std::string& s) {
  if (s.empty() || s.size() > kK8sMaxLabel) return false;
  if (!lower_alnum(s.front()) || !lower_alnum(s.back())) return false;
  for (char c : s)
    if (!lower_alnum(c) && c != '-') return false;
  return true;
}

bool is_rfc1035_label(const std::string& s) {
  return is_rfc1123_label(s) && s[0] >= 'a' && s[0] <= 'z';
}

bool is_rfc1123_subdomain(const std::string& s) {
  if (s.empty() || s.size() > 253) return false;
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (!is_rfc1123_label(part)) return false;
    if (dot == std::string::npos) return true;
    start = dot + 1;
  }
}

std::optional<double> k8s_quantity_value(std::string_view s) {
  if (!is_k8s_quantity(s)) return std::nullopt;
  struct Suffix {
    std::string_view text;
    double factor;
  };
  static constexpr Suffix kSuffixes[] = {
      {"Ki", 0x1p10}, {"Mi", 0x1p20}, {"Gi", 0x1p30}, {"Ti", 0x1p40}, {"Pi", 0x1p50},
      {"Ei", 0x1p60}, {"k", 1e3},     {"M", 1e6},     {"G", 1e9},     {"T", 1e12},
      {"P", 1e15},    {"E", 1e18},    {"m", 1e-3}};
  double factor = 1;
  for (const auto& suffix : kSuffixes)
    if (s.size() > suffix.text.size() && s.substr(s.size() - suffix.text.size()) == suffix.text) {
      s.remove_suffix(suffix.text.size());
      factor = suffix.factor;
      break;
    }
  double value = 0, scale = 1;
  bool fraction = false;
  for (char c : s) {
    if (c == '.') {
      fraction = true;
      continue;
    }
    if (fraction) scale /= 10;
    value = value * 10 + (c - '0');
  }
  double result = value * scale * factor;
  // Past 10^18 (an exabyte, a billion billion cores) a value is a typo, and it would not fit
  // the whole numbers the requests are written in.
  if (!std::isfinite(result) || result > 1e18) return std::nullopt;
  return result;
}

bool is_k8s_quantity(std::string_view s) {
  auto digits = [](std::string_view d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  for (std::string_view suffix :
       {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "k", "M", "G", "T", "P", "E", "m"})
    if (s.size() > suffix.size() && s.substr(s.size() - suffix.size()) == suffix) {
      s.remove_suffix(suffix.size());
      break;
    }
  size_t dot = s.find('.');
  if (dot == std::string_view::npos) return digits(s);
  return digits(s.substr(0, dot)) && digits(s.substr(dot + 1));
}

}  // namespace bridge
