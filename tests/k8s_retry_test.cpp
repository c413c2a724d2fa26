// Retries away from a bad node on Kubernetes (executor.kubernetes.exclude_failed_nodes, Job
// API): the node blamed for a failed attempt, the patch that starts the next attempt off it,
// and the attempt lines of `status`. The Kubernetes suite runs the same on the control plane.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executors/k8s_render.h"
#include "executors/k8s_status.h"
#include "tests/support/k8s_testing.h"

namespace bridge {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

const char* const kRecipe = R"(name: retry
cluster: {gpu: h100, num_gpus: 16, gpus_per_node: 8}
runtime:
  command: [python, train.py]
  container_image: nvcr.io/nvidia/nemo:25.11
)";

json pod(const std::string& name, int index, int attempt, const std::string& node,
         const std::string& phase, int exit_code, const std::string& finished) {
  json p{{"kind", "Pod"},
         {"metadata",
          {{"name", name},
           {"labels",
            {{"bridge-launch/job", "x"}, {"bridge-launch/attempt", std::to_string(attempt)}}},
           {"annotations", {{"batch.kubernetes.io/job-completion-index", std::to_string(index)}}}}},
         {"spec", {{"nodeName", node}}},
         {"status", {{"phase", phase}}}};
  if (!finished.empty())
    p["status"]["containerStatuses"] = {
        {{"name", "trainer"},
         {"state", {{"terminated", {{"exitCode", exit_code}, {"finishedAt", finished}}}}}}};
  return p;
}

TEST(K8sRetry, TheNodeWhosePodFailedFirstIsBlamed) {
  std::vector<K8sPod> pods = all_pods({
      pod("a", 0, 0, "node-a", "Failed", 143, "2026-12-05T01:00:09Z"),  // stopped by the others
      pod("b", 1, 0, "node-b", "Failed", 1, "2026-12-05T01:00:05Z"),
      pod("c", 2, 0, "node-c", "Succeeded", 0, "2026-12-05T01:00:01Z"),
  });
  EXPECT_EQ(blamed_node(pods), "node-b");
  EXPECT_EQ(blamed_node(all_pods({pod("c", 0, 0, "node-c", "Succeeded", 0, "t")})), "");
  EXPECT_EQ(blamed_node({}), "");
  // As `why` orders: a pod lost with its node (no end) after one whose container ended.
  EXPECT_EQ(blamed_node(all_pods({pod("lost", 0, 0, "node-x", "Failed", 0, ""),
                                  pod("b", 1, 0, "node-b", "Failed", 1, "2026-12-05T01:00:05Z")})),
            "node-b");
}

TEST(K8sRetry, TheNextAttemptStartsWithTheNodesExcludedFromEveryAffinityTerm) {
  json plain = next_attempt_patch(json::object(), {});
  EXPECT_EQ(plain, json::parse(R"({"spec": {"suspend": false}})"));

  json next = json::parse(R"({"kind": "Job", "spec": {"template": {"spec": {"affinity": {
      "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["gb"]}]},
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["h"]}]}]}}}}}}})");
  json patch = next_attempt_patch(next, {"node-a", "node-b"});
  EXPECT_EQ(patch["spec"]["suspend"], false);
  EXPECT_EQ(patch["metadata"]["annotations"][kK8sExcludedNodesAnnotation], "node-a,node-b");
  const json& terms = patch["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                           ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
  ASSERT_EQ(terms.size(), 2u) << "the recipe's terms stay, each with the exclusion";
  // One value per node field selector (the API refuses NotIn with more): one per node.
  for (const auto& term : terms) {
    EXPECT_EQ(term["matchExpressions"].size(), 1u);
    EXPECT_EQ(term["matchFields"], json::parse(R"([
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-a"]},
        {"key": "metadata.name", "operator": "NotIn", "values": ["node-b"]}])"));
  }
  json bare = next_attempt_patch(json::object(), {"node-a"});
  EXPECT_EQ(bare["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
                    .size(),
            1u);
  json excluded{
      {"metadata",
       {{"annotations", {{kK8sExcludedNodesAnnotation, "node-a,,Not A Node,$(id),node-b"}}}}}};
  EXPECT_EQ(excluded_nodes_of(excluded), (std::vector<std::string>{"node-a", "node-b"}))
      << "only node names are taken from an annotation anyone may edit";
}

TEST(K8sRetry, StatusListsEveryStartedAttemptWithItsNodes) {
  auto job = [](const std::string& name, int attempt, const std::string& condition,
                const std::string& excluded) {
    json j{{"kind", "Job"},
           {"metadata",
            {{"name", name},
             {"labels",
              {{"bridge-launch/job", "x"}, {"bridge-launch/attempt", std::to_string(attempt)}}},
             {"annotations", {{"bridge-launch/attempts", "3"}}}}},
           {"spec", {{"suspend", condition == "Suspended"}}},
           {"status", {{"conditions", {{{"type", condition}, {"status", "True"}}}}}}};
    if (!excluded.empty()) j["metadata"]["annotations"][kK8sExcludedNodesAnnotation] = excluded;
    return j;
  };
  std::vector<json> items{job("x", 0, "Failed", ""),
                          job("x-r1", 1, "Complete", "node-b"),
                          job("x-r2", 2, "Suspended", ""),
                          pod("p0", 0, 0, "node-a", "Failed", 143, "2026-12-05T01:00:09Z"),
                          pod("p1", 1, 0, "node-b", "Failed", 1, "2026-12-05T01:00:05Z"),
                          pod("q0", 0, 1, "node-a", "Succeeded", 0, "2026-12-05T01:05:00Z"),
                          pod("q1", 1, 1, "node-a", "Succeeded", 0, "2026-12-05T01:05:00Z")};
  std::vector<std::string> lines = job_api_attempt_lines("x", items);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "1: Job x FAILED on node-a,node-b; failure blamed on node-b");
  EXPECT_EQ(lines[1], "2: Job x-r1 SUCCEEDED on node-a, excluding node-b");
}

// The recipe side: the Job API's attempts carry the annotation (on by default with retries);
// a JobSet cannot keep a node out and says so when asked to.
TEST(K8sRetry, TheJobApiAsksForItAndAJobSetRefusesIt) {
  auto p =
      testing::k8s_plan(kRecipe, {"executor.kubernetes.api=job", "executor.kubernetes.retries=2"});
  auto m = render_k8s_manifests(*p->plan, K8sRenderOptions{}, p->diags);
  ASSERT_TRUE(m.has_value());
  int marked = 0;
  for (const auto& d : m->docs)
    if (d.value("kind", "") == "Job" &&
        d["metadata"]["annotations"].value(kK8sExcludeFailedNodesAnnotation, "") == "true")
      ++marked;
  EXPECT_EQ(marked, 3);
  EXPECT_THAT(m->yaml, HasSubstr("each away from the nodes the failures were blamed on"));

  auto off =
      testing::k8s_plan(kRecipe, {"executor.kubernetes.api=job", "executor.kubernetes.retries=2",
                                  "executor.kubernetes.exclude_failed_nodes=false"});
  auto m_off = render_k8s_manifests(*off->plan, K8sRenderOptions{}, off->diags);
  ASSERT_TRUE(m_off.has_value());
  EXPECT_EQ(m_off->yaml.find(kK8sExcludeFailedNodesAnnotation), std::string::npos);

  auto js = testing::k8s_plan(
      kRecipe, {"executor.kubernetes.retries=2", "executor.kubernetes.exclude_failed_nodes=true"});
  EXPECT_FALSE(render_k8s_manifests(*js->plan, K8sRenderOptions{}, js->diags).has_value());
  EXPECT_TRUE(js->diags.has_code("k8s-exclude-needs-job-api"));
}

}  // namespace
}  // namespace bridge
