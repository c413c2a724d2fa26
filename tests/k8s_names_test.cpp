// Kubernetes names: RFC 1035 labels within 63 characters including every generated suffix,
// a stable hash when truncated, and MASTER_ADDR built from the same functions.
#include "executors/k8s_names.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace bridge {
namespace {

const std::regex kRfc1035("[a-z]([-a-z0-9]*[a-z0-9])?");

TEST(K8sNames, Sanitize) {
  EXPECT_EQ(sanitize_k8s_name("qwen3-30b"), "qwen3-30b");
  EXPECT_EQ(sanitize_k8s_name("Qwen3_30B.A3B  EP overlap"), "qwen3-30b-a3b-ep-overlap");
  EXPECT_EQ(sanitize_k8s_name("--x--"), "x");
  EXPECT_EQ(sanitize_k8s_name("70b"), "job-70b");
  EXPECT_EQ(sanitize_k8s_name("___"), "job");
  EXPECT_EQ(sanitize_k8s_name("ünïcode"), "n-code");
}

TEST(K8sNames, ShortNameKeepsRecipeNameAndSuffix) {
  EXPECT_EQ(k8s_base_name("My_Recipe", "ab12", jobset_reserved(2)), "my-recipe-ab12");
}

TEST(K8sNames, LongNamesAreTruncatedWithAStableHash) {
  std::string name(120, 'x');
  name = "Very_Long.Recipe_NAME_" + name;
  for (int64_t nodes : {1, 8, 512, 100000}) {
    size_t reserved = jobset_reserved(nodes);
    std::string a = k8s_base_name(name, "ab12", reserved);
    std::string b = k8s_base_name(name, "ab12", reserved);
    EXPECT_EQ(a, b);
    EXPECT_LE(a.size() + reserved, 63u) << a;
    EXPECT_TRUE(std::regex_match(a, kRfc1035)) << a;
    EXPECT_NE(a.find("-" + k8s_short_hash(name) + "-ab12"), std::string::npos) << a;
    std::string host = jobset_pod_hostname(a, kK8sReplicatedJob, 0, nodes - 1);
    EXPECT_LE(host.size(), 63u) << host;
    EXPECT_TRUE(std::regex_match(host, kRfc1035)) << host;
  }
  // Two long names with the same prefix still differ.
  EXPECT_NE(k8s_base_name(name + "-a", "ab12", 11), k8s_base_name(name + "-b", "ab12", 11));
}

TEST(K8sNames, JobApiBudgetCoversAttemptsAndIndexes) {
  std::string name(200, 'q');
  for (int64_t retries : {0, 3, 12}) {
    size_t reserved = job_reserved(512, retries);
    std::string base = k8s_base_name(name, "ffff", reserved);
    std::string last = job_pod_hostname(job_attempt_name(base, retries), 511);
    EXPECT_LE(last.size(), 63u) << last;
    EXPECT_TRUE(std::regex_match(last, kRfc1035)) << last;
  }
}

TEST(K8sNames, MasterAddrIsPodZerosDnsName) {
  EXPECT_EQ(jobset_master_addr("demo-ab12", "node"), "demo-ab12-node-0-0.demo-ab12");
  EXPECT_EQ(job_master_addr("demo-ab12"), "demo-ab12-0.demo-ab12");
  EXPECT_EQ(job_master_addr(job_attempt_name("demo-ab12", 2)), "demo-ab12-r2-0.demo-ab12-r2");
}

TEST(K8sNames, SubmissionSuffixesAreHexStablePerJobIdAndVaryAcrossIds) {
  std::set<std::string> seen;
  for (int i = 0; i < 50; ++i) {
    std::string id = fmt::format("demo-20261130-141500-{:04x}", i * 7919);
    std::string s = k8s_submission_suffix(id);
    EXPECT_TRUE(std::regex_match(s, std::regex("[0-9a-f]{4}"))) << s;
    EXPECT_EQ(s, k8s_submission_suffix(id)) << "same job id, same names";
    seen.insert(s);
  }
  EXPECT_GT(seen.size(), 45u);
}

TEST(K8sNames, Validators) {
  EXPECT_TRUE(is_rfc1035_label("a-1"));
  EXPECT_FALSE(is_rfc1035_label("1a"));
  EXPECT_FALSE(is_rfc1035_label("a-"));
  EXPECT_FALSE(is_rfc1035_label(std::string(64, 'a')));
  EXPECT_TRUE(is_rfc1123_label("1a"));
  EXPECT_TRUE(is_rfc1123_subdomain("my.secret-1"));
  EXPECT_FALSE(is_rfc1123_subdomain("My_Secret"));
  EXPECT_FALSE(is_rfc1123_subdomain("a..b"));
}

TEST(K8sNames, DecimalDigits) {
  EXPECT_EQ(decimal_digits(0), 1u);
  EXPECT_EQ(decimal_digits(9), 1u);
  EXPECT_EQ(decimal_digits(10), 2u);
  EXPECT_EQ(decimal_digits(511), 3u);
}

}  // namespace
}  // namespace bridge
