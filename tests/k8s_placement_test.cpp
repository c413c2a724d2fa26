// Placement of a Kubernetes job (docs/executors/kubernetes.md, "Placement"): the NVLink-domain
// request (Kueue topology-aware scheduling, or pod affinity without Kueue) and the NUMA
// binding line, as rendered; the Kubernetes suite checks that both reach the created pods.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "executors/k8s_render.h"
#include "tests/support/k8s_testing.h"

namespace bridge {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A GB200 NVL72 job: 4 GPUs per node, 18 nodes per NVLink domain.
const char* const kGb200 = R"(name: nvl
cluster: {gpu: gb200, num_gpus: 8, gpus_per_node: 4}
runtime:
  adapter: probe
  command: [bridge-probe]
  container_image: nvcr.io/nvidia/nemo:25.04
)";

struct Rendered {
  std::optional<K8sManifests> m;
  Diagnostics diags;
  json pod;  // the JobSet's pod template
};

Rendered render(std::vector<std::string> overrides) {
  auto p = testing::k8s_plan(kGb200, std::move(overrides));
  Rendered r;
  r.diags = p->diags;
  r.m = render_k8s_manifests(*p->plan, K8sRenderOptions{}, r.diags);
  if (r.m)
    for (const auto& d : r.m->docs)
      if (d.value("kind", "") == "JobSet")
        r.pod = json::parse(d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"].dump());
  return r;
}

// By default a preference (a required one leaves the pods Pending on nodes without the
// label); `topology: required` makes it a requirement.
TEST(K8sPlacement, AJobWithinOneNvlinkDomainGetsPodAffinityWithoutKueue) {
  Rendered r = render({"executor.kubernetes.topology_label=example.com/nvl-domain"});
  ASSERT_TRUE(r.m.has_value());
  const json& weighted = r.pod["spec"]["affinity"]["podAffinity"]
                              ["preferredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(weighted["weight"], 100);
  EXPECT_EQ(weighted["podAffinityTerm"]["topologyKey"], "example.com/nvl-domain");
  EXPECT_EQ(weighted["podAffinityTerm"]["labelSelector"]["matchLabels"]["bridge-launch/job"],
            r.m->name);
  EXPECT_THAT(r.m->yaml, HasSubstr("# binding: every rank on its GPU's NUMA node: NUMA node = "
                                   "local rank / 2"));

  Rendered required = render({"executor.kubernetes.topology=required"});
  const json& term = required.pod["spec"]["affinity"]["podAffinity"]
                                 ["requiredDuringSchedulingIgnoredDuringExecution"][0];
  EXPECT_EQ(term["topologyKey"], "nvidia.com/gpu.clique");
  EXPECT_THAT(required.m->yaml,
              HasSubstr("# placement: 2 nodes per NVLink domain, default (gb200: an NVLink "
                        "domain of 18 nodes); pod affinity among the job's pods, required, "
                        "topologyKey nvidia.com/gpu.clique\n"));

  // One node: nothing to keep together.
  Rendered one = render({"cluster.num_gpus=4"});
  ASSERT_TRUE(one.m.has_value());
  EXPECT_FALSE(one.pod["spec"].contains("affinity"));
  EXPECT_THAT(one.m->yaml, Not(HasSubstr("# placement:")));
}

// Kueue admits a topology request only on a flavor with a Topology: asked for only when the
// recipe sets topology (or segment), said by name otherwise.
TEST(K8sPlacement, WithKueueTheWholeJobOrEachSliceIsATopologyRequest) {
  Rendered unasked = render({"executor.kubernetes.queue=gpu-queue"});
  ASSERT_TRUE(unasked.m.has_value());
  EXPECT_FALSE(unasked.pod["metadata"].contains("annotations")) << unasked.pod.dump();
  EXPECT_TRUE(unasked.diags.has_code("k8s-topology-not-requested"));
  EXPECT_THAT(unasked.m->yaml, HasSubstr("# placement: not by NVLink domain (set "
                                         "executor.kubernetes.topology to ask Kueue)"));

  Rendered whole =
      render({"executor.kubernetes.queue=gpu-queue", "executor.kubernetes.topology=required"});
  ASSERT_TRUE(whole.m.has_value());
  EXPECT_EQ(whole.pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"],
            "nvidia.com/gpu.clique");
  EXPECT_FALSE(whole.pod["spec"].contains("affinity")) << "Kueue places it, not pod affinity";

  Rendered pref =
      render({"executor.kubernetes.queue=gpu-queue", "executor.kubernetes.topology=preferred"});
  EXPECT_EQ(pref.pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-preferred-topology"],
            "nvidia.com/gpu.clique");

  // 24 nodes: blocks of 12 (the largest divisor within a domain of 18).
  Rendered sliced = render({"executor.kubernetes.queue=gpu-queue", "cluster.num_gpus=96",
                            "executor.kubernetes.topology=required"});
  ASSERT_TRUE(sliced.m.has_value());
  const json& a = sliced.pod["metadata"]["annotations"];
  EXPECT_EQ(a["kueue.x-k8s.io/podset-slice-required-topology"], "nvidia.com/gpu.clique");
  EXPECT_EQ(a["kueue.x-k8s.io/podset-slice-size"], "12");
  EXPECT_FALSE(a.contains("kueue.x-k8s.io/podset-required-topology"));
}

TEST(K8sPlacement, BlocksWithoutKueueAreSaidByNameAndNothingIsPlaced) {
  Rendered r = render({"cluster.num_gpus=96"});
  ASSERT_TRUE(r.m.has_value());
  EXPECT_TRUE(r.diags.has_code("k8s-segment-needs-kueue"));
  EXPECT_FALSE(r.pod["spec"].contains("affinity"));
  EXPECT_THAT(r.m->yaml, HasSubstr("# placement: not by NVLink domain (blocks of 12 nodes need "
                                   "Kueue)"));
}

TEST(K8sPlacement, BadSegmentsAndLabelsAreErrorsAndZeroPlacesNothing) {
  Rendered uneven = render({"executor.kubernetes.segment=3", "cluster.num_gpus=16"});
  EXPECT_FALSE(uneven.m.has_value());
  EXPECT_TRUE(uneven.diags.has_code("k8s-segment-does-not-divide"));

  Rendered label = render({"executor.kubernetes.topology_label=not a label"});
  EXPECT_FALSE(label.m.has_value());
  bool named = false;
  for (const auto& d : label.diags.items())
    named = named || d.path == "executor.kubernetes.topology_label";
  EXPECT_TRUE(named);

  Rendered none = render({"executor.kubernetes.segment=0"});
  ASSERT_TRUE(none.m.has_value());
  EXPECT_FALSE(none.pod["spec"].contains("affinity"));
  EXPECT_THAT(none.m->yaml, Not(HasSubstr("# placement:")));

  // An H100 job has no NVLink domain beyond its node: nothing to place.
  auto h100 =
      testing::k8s_plan(std::string(kGb200).replace(std::string(kGb200).find("gb200"), 5, "h100"));
  EXPECT_EQ(h100->plan->nvlink.segment, 0);
}

// A podAffinity of the recipe's replaces the executor's; its other affinity kinds are added.
TEST(K8sPlacement, TheRecipesOwnPodAffinityWinsAndOtherKindsAreAdded) {
  Rendered node_affinity = render(
      {"executor.kubernetes.affinity={nodeAffinity: {requiredDuringSchedulingIgnoredDuring"
       "Execution: {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: "
       "[gb]}]}]}}}"});
  ASSERT_TRUE(node_affinity.m.has_value());
  EXPECT_TRUE(node_affinity.pod["spec"]["affinity"].contains("nodeAffinity"));
  EXPECT_TRUE(node_affinity.pod["spec"]["affinity"].contains("podAffinity"));

  Rendered own =
      render({"executor.kubernetes.affinity={podAffinity: {preferredDuringSchedulingIgnoredDuring"
              "Execution: [{weight: 1, podAffinityTerm: {topologyKey: rack, labelSelector: "
              "{matchLabels: {team: a}}}}]}}"});
  ASSERT_TRUE(own.m.has_value());
  const json& pa = own.pod["spec"]["affinity"]["podAffinity"];
  EXPECT_FALSE(pa.contains("requiredDuringSchedulingIgnoredDuringExecution"));
  EXPECT_EQ(
      pa["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]["topologyKey"],
      "rack");
}

}  // namespace
}  // namespace bridge
