// The pod an admin accepts (executors/k8s_pod_shape.h): requests and QoS class from the node
// or the per-GPU floor, the /dev/shm limit, the security context, RDMA devices and the NCCL
// settings of executor.kubernetes.network, the active deadline and the TTL; probe-only
// variables only in bridge-probe pods; and the errors for values that would not give the
// pod the recipe asks for.
#include "executors/k8s_pod_shape.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "executors/k8s_render.h"
#include "support/k8s_testing.h"

namespace bridge {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<testing::K8sPlan> plan_with(const std::string& extra,
                                            std::vector<std::string> overrides = {}) {
  return testing::k8s_pod_plan(extra, std::move(overrides));
}

std::string codes(const Diagnostics& d) { return testing::diag_lines(d); }

struct Rendered {
  json jobset;
  std::string yaml;
};

Rendered render_ok(const std::string& extra, std::vector<std::string> overrides = {}) {
  auto p = plan_with(extra, std::move(overrides));
  EXPECT_TRUE(p->plan->complete) << codes(p->diags);
  K8sRenderOptions o;
  o.suffix = "a1b2";
  auto m = render_k8s_manifests(*p->plan, o, p->diags);
  EXPECT_TRUE(m) << codes(p->diags);
  if (!m) return {};
  auto docs = testing::parse_yaml_docs(m->yaml);
  return {docs.empty() ? json() : docs.back(), m->yaml};
}

std::string render_errors(const std::string& extra) {
  auto p = plan_with(extra);
  if (p->plan->complete) {
    K8sRenderOptions o;
    EXPECT_FALSE(render_k8s_manifests(*p->plan, o, p->diags)) << "rendered despite " << extra;
  }
  return codes(p->diags);
}

const json& pod_of(const json& jobset) {
  return jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
}
const json& trainer_of(const json& jobset) { return pod_of(jobset)["spec"]["containers"][0]; }

const json& shm_of(const json& jobset) {
  for (const auto& v : pod_of(jobset)["spec"]["volumes"])
    if (v["name"] == "dshm") return v["emptyDir"];
  static const json kNone;
  return kNone;
}

TEST(K8sPodShape, WithoutTheNodeThePodGetsThePerGpuFloorAndIsBurstable) {
  auto r = render_ok("");
  const json& res = trainer_of(r.jobset)["resources"];
  EXPECT_EQ(res["requests"]["cpu"], 32);  // 4 cores x 8 GPUs
  EXPECT_EQ(res["requests"]["memory"], "256Gi");
  EXPECT_EQ(res["requests"]["ephemeral-storage"], "64Gi");
  EXPECT_FALSE(res["limits"].contains("cpu"));
  EXPECT_FALSE(res["limits"].contains("memory"));
  EXPECT_EQ(res["limits"]["nvidia.com/gpu"], 8);
  EXPECT_EQ(shm_of(r.jobset)["sizeLimit"], "128Gi");
  EXPECT_EQ(shm_of(r.jobset)["medium"], "Memory");
  EXPECT_THAT(r.yaml, HasSubstr("# pod: QoS Burstable; requests cpu 32, memory 256Gi"));
  EXPECT_THAT(r.yaml, HasSubstr("set executor.kubernetes.node to size the pod"));
}

TEST(K8sPodShape, TheNodeSizesAGuaranteedPodWithLimitsEqualToRequests) {
  auto r = render_ok(R"(
    node: {cpu: "224", memory: 2000Gi, ephemeral_storage: 3500Gi}
    qos: guaranteed
)");
  const json& res = trainer_of(r.jobset)["resources"];
  EXPECT_EQ(res["requests"]["cpu"], 201);          // floor(224 x 0.9)
  EXPECT_EQ(res["requests"]["memory"], "1800Gi");  // 2000Gi x 0.9
  EXPECT_EQ(res["limits"]["cpu"], res["requests"]["cpu"]);
  EXPECT_EQ(res["limits"]["memory"], res["requests"]["memory"]);
  EXPECT_FALSE(res["limits"].contains("ephemeral-storage"));
  EXPECT_EQ(shm_of(r.jobset)["sizeLimit"], "900Gi");
  EXPECT_THAT(r.yaml, HasSubstr("# pod: QoS Guaranteed;"));
  EXPECT_THAT(r.yaml, HasSubstr("90 % of the node's whole share"));
}

TEST(K8sPodShape, APodOnPartOfANodeGetsItsGpusShare) {
  // gb200 trays hold 4 GPUs; a 2-GPU pod takes half the tray's share.
  auto p = testing::k8s_plan(R"(name: half
cluster: {gpu: gb200, num_gpus: 2, gpus_per_node: 2}
runtime: {command: [python, t.py], pass_overrides: false, container_image: img:1}
executor:
  kubernetes:
    node: {cpu: "144", memory: 800Gi}
)");
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  auto m = render_k8s_manifests(*p->plan, {}, p->diags);
  ASSERT_TRUE(m) << codes(p->diags);
  auto docs = testing::parse_yaml_docs(m->yaml);
  const json& res = trainer_of(docs.back())["resources"];
  EXPECT_EQ(res["requests"]["cpu"], 64);  // floor(144 / 2 x 0.9)
  EXPECT_EQ(res["requests"]["memory"], "360Gi");
  EXPECT_THAT(m->yaml, HasSubstr("node's 2/4 share"));
}

TEST(K8sPodShape, TheUsersRequestsWinAndShmSizeIsKept) {
  auto r = render_ok(R"(
    shm_size: 64Gi
    resources: {requests: {cpu: "100", memory: 1Ti}}
)");
  const json& res = trainer_of(r.jobset)["resources"];
  EXPECT_EQ(res["requests"]["cpu"], "100");
  EXPECT_EQ(res["requests"]["memory"], "1Ti");
  EXPECT_EQ(res["requests"]["ephemeral-storage"], "64Gi");
  EXPECT_EQ(shm_of(r.jobset)["sizeLimit"], "64Gi");
  EXPECT_THAT(r.yaml, HasSubstr("; cpu, memory from executor.kubernetes.resources)"));
}

TEST(K8sPodShape, ALimitWithoutARequestCapsTheDerivedRequest) {
  auto r = render_ok("    resources: {limits: {cpu: \"8\", memory: 64Gi}}\n");
  const json& res = trainer_of(r.jobset)["resources"];
  EXPECT_EQ(res["requests"]["cpu"], "8");
  EXPECT_EQ(res["requests"]["memory"], "64Gi");
  EXPECT_EQ(res["limits"]["cpu"], "8");
  EXPECT_THAT(r.yaml, HasSubstr("cpu capped at its limit; memory capped at its limit"));
}

TEST(K8sPodShape, EqualQuantitiesWrittenDifferentlyAreEqual) {
  auto r = render_ok(R"(
    qos: guaranteed
    node: {cpu: "64", memory: 1Ti, ephemeral-storage: 2Ti}
    resources: {requests: {cpu: "0.3", memory: 1Gi}, limits: {cpu: 300m, memory: 1024Mi}}
)");
  const json& res = trainer_of(r.jobset)["resources"];
  EXPECT_EQ(res["requests"]["cpu"], "0.3");
  EXPECT_EQ(res["requests"]["ephemeral-storage"], "1887436Mi") << "2Ti x 0.9, from the alias";
}

TEST(K8sPodShape, TheSecurityContextDropsEverythingByDefault) {
  auto r = render_ok("");
  const json& pod_sc = pod_of(r.jobset)["spec"]["securityContext"];
  EXPECT_EQ(pod_sc["seccompProfile"]["type"], "RuntimeDefault");
  EXPECT_EQ(pod_sc["runAsNonRoot"], false);
  const json& sc = trainer_of(r.jobset)["securityContext"];
  EXPECT_EQ(sc["allowPrivilegeEscalation"], false);
  EXPECT_EQ(sc["capabilities"]["drop"], json::parse(R"(["ALL"])"));
  EXPECT_FALSE(sc["capabilities"].contains("add"));
}

TEST(K8sPodShape, ANonRootUserAndAddedCapabilitiesAreConfigured) {
  auto r = render_ok(R"(
    security: {run_as_user: 1000, run_as_group: 1000, add_capabilities: [SYS_PTRACE]}
)");
  const json& pod_sc = pod_of(r.jobset)["spec"]["securityContext"];
  EXPECT_EQ(pod_sc["runAsUser"], 1000);
  EXPECT_EQ(pod_sc["runAsGroup"], 1000);
  EXPECT_EQ(pod_sc["runAsNonRoot"], true);
  EXPECT_EQ(trainer_of(r.jobset)["securityContext"]["capabilities"]["add"],
            json::parse(R"(["SYS_PTRACE"])"));
}

TEST(K8sPodShape, RdmaRequestsTheDevicesIpcLockAndTheNcclSettingsItNames) {
  auto p = plan_with(R"(
    network: {type: rdma, nccl_ib_hca: "mlx5_0,mlx5_1", nccl_socket_ifname: eth0}
)");
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  const EnvVar* hca = p->plan->env.find("NCCL_IB_HCA");
  ASSERT_NE(hca, nullptr);
  EXPECT_EQ(hca->value, "mlx5_0,mlx5_1");
  EXPECT_EQ(hca->source, "executor.kubernetes.network");
  EXPECT_EQ(p->plan->env.find("NCCL_IB_GID_INDEX"), nullptr);
  auto m = render_k8s_manifests(*p->plan, {}, p->diags);
  ASSERT_TRUE(m) << codes(p->diags);
  json js = testing::parse_yaml_docs(m->yaml).back();
  const json& c = trainer_of(js);
  EXPECT_EQ(c["resources"]["limits"]["rdma/ib"], 8);
  EXPECT_EQ(c["securityContext"]["capabilities"]["add"], json::parse(R"(["IPC_LOCK"])"));
  bool hca_in_pod = false;
  for (const auto& e : c["env"])
    if (e["name"] == "NCCL_IB_HCA") hca_in_pod = e["value"] == "mlx5_0,mlx5_1";
  EXPECT_TRUE(hca_in_pod);
  EXPECT_THAT(m->yaml, HasSubstr("# network: rdma, rdma/ib x 8 per pod"));
}

TEST(K8sPodShape, ANonRootRdmaPodGetsNoCapabilityItCouldNotUse) {
  auto r = render_ok("    network: rdma\n    security: {run_as_user: 1000}\n");
  EXPECT_FALSE(trainer_of(r.jobset)["securityContext"]["capabilities"].contains("add"));
  EXPECT_EQ(trainer_of(r.jobset)["resources"]["limits"]["rdma/ib"], 8);
}

TEST(K8sPodShape, WarningsForSettingsThatWorkAgainstThemselves) {
  auto p = plan_with(R"(
    qos: guaranteed
    node: {cpu: "64", memory: 100Gi}
    shm_size: 200Gi
    ttl_after_finished: 60
    security: {run_as_non_root: true}
)");
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  ASSERT_TRUE(render_k8s_manifests(*p->plan, {}, p->diags)) << codes(p->diags);
  std::string said = codes(p->diags);
  EXPECT_THAT(said, HasSubstr("k8s-shm-above-memory-limit"));
  EXPECT_THAT(said, HasSubstr("k8s-ttl-short"));
  EXPECT_THAT(said, HasSubstr("k8s-non-root-image-user"));
}

TEST(K8sPodShape, RdmaAsAWordUsesTheDefaultsAndSendsNoNcclSetting) {
  auto p = plan_with("    network: rdma\n");
  ASSERT_TRUE(p->plan->complete) << codes(p->diags);
  for (const auto& v : p->plan->env.vars) EXPECT_NE(v.source, "executor.kubernetes.network");
  auto m = render_k8s_manifests(*p->plan, {}, p->diags);
  ASSERT_TRUE(m);
  json js = testing::parse_yaml_docs(m->yaml).back();
  EXPECT_EQ(trainer_of(js)["resources"]["limits"]["rdma/ib"], 8);
}

TEST(K8sPodShape, TheTimeLimitIsTheActiveDeadlineAndNoRestartOutlivesIt) {
  auto r = render_ok("    time: \"04:00:00\"\n    ttl_after_finished: 3600\n");
  const json& spec = r.jobset["spec"];
  EXPECT_EQ(spec["ttlSecondsAfterFinished"], 3600);
  EXPECT_EQ(spec["replicatedJobs"][0]["template"]["spec"]["activeDeadlineSeconds"], 14400);
  EXPECT_EQ(spec["failurePolicy"]["rules"][0]["action"], "FailJobSet");
  EXPECT_EQ(spec["failurePolicy"]["rules"][0]["onJobFailureReasons"][0], "DeadlineExceeded");
  EXPECT_THAT(r.yaml, HasSubstr("active deadline 4h"));
}

TEST(K8sPodShape, FinishedObjectsAreKeptSevenDaysByDefaultOnBothApis) {
  auto r = render_ok("");
  EXPECT_EQ(r.jobset["spec"]["ttlSecondsAfterFinished"], 7 * 86400);
  EXPECT_FALSE(
      r.jobset["spec"]["replicatedJobs"][0]["template"]["spec"].contains("activeDeadlineSeconds"));
  auto job = render_ok("    api: job\n    time: 2-00:00:00\n");
  EXPECT_EQ(job.jobset["kind"], "Job");
  EXPECT_EQ(job.jobset["spec"]["ttlSecondsAfterFinished"], 7 * 86400);
  EXPECT_EQ(job.jobset["spec"]["activeDeadlineSeconds"], 2 * 86400);
}

TEST(K8sPodShape, ProbeVariablesOnlyReachBridgeProbePods) {
  auto has_probe_vars = [](const json& js) {
    for (const auto& e : trainer_of(js)["env"])
      if (e["name"] == "BRIDGE_EXPECTED_ENV" || e["name"] == "BRIDGE_OVERLAP_GRAD_REDUCE")
        return true;
    return false;
  };
  EXPECT_FALSE(has_probe_vars(render_ok("").jobset));
  EXPECT_TRUE(has_probe_vars(render_ok("", {"runtime.command=[bridge-probe]"}).jobset));
}

TEST(K8sPodShape, ValuesThatWouldNotGiveThePodAskedForAreErrorsAtTheirKey) {
  struct Case {
    std::string extra, expect;
  };
  for (const auto& c : std::vector<Case>{
           {"    qos: guaranteed\n", "qos guaranteed sets the cpu limit"},
           {"    qos: guaranteed\n    node: {cpu: \"64\", memory: 1Ti}\n"
            "    resources: {limits: {cpu: \"8\"}}\n",
            "needs the cpu limit equal to the request (57), but resources.limits.cpu is 8"},
           {"    node: {cpus: \"64\"}\n", "unknown node key `cpus` (did you mean `cpu`?)"},
           {"    node: {memory: lots}\n", "`lots` is not a positive Kubernetes quantity"},
           {"    security: {add_capabilities: [CAP_SYS_ADMIN]}\n",
            "`CAP_SYS_ADMIN` is not a Linux capability as Kubernetes writes it"},
           {"    security: {run_as_user: 0, run_as_non_root: true}\n", "run_as_user is 0"},
           {"    security: {run_as: 5}\n", "unknown security key `run_as`"},
           {"    time: 4h\n", "`4h` is not a time limit"},
           {"    network: infiniband\n", "network `infiniband` is not none or rdma"},
           {"    network: {type: rdma, per_pod: 0}\n", "per_pod `0` is not a whole number"},
           {"    network: {type: rdma, resource: ib}\n", "not an extended resource name"},
           {"    network: {type: rdma, nccl_ib_hca: \"mlx5 0\"}\n", "not a value for NCCL_IB_HCA"},
           {"    api: job\n    retries: 2\n    queue: team\n",
            "Kueue would start the suspended retry attempts at once"},
           {"    api: job\n    retries: 1\n    ttl_after_finished: 60\n",
            "a failed attempt can be deleted before bridge-launch starts the next one"},
           {"    resources: {requests: {cpu: \"64\"}, limits: {cpu: \"8\"}}\n",
            "the cpu request (64) is above its limit (8)"},
           {"    security: {run_as_user: -1}\n", "run_as_user must be a numeric id"},
           {"    node: {cpu: \"99999999999999999999\"}\n", "is not a positive Kubernetes quantity"},
           {"    resources: {requests: {memory: 9999999999999999999999Gi}}\n",
            "is not a Kubernetes quantity"},
           {"    network: {type: rdma, resource: nvidia.com/gpu}\n",
            "nvidia.com/gpu is the plan's GPU count"},
           {"    network: rdma\n    resources: {limits: {rdma/ib: 4}}\n",
            "rdma/ib is set by resources.limits and by network"},
           {"    resources: {requests: {rdma/ib: 4}, limits: {rdma/ib: 8}}\n",
            "rdma/ib is an extended resource: its request (4) must equal its limit (8)"},
           {"    resources: {requests: {example.com/fpga: 1}}\n",
            "Kubernetes needs its limit, not a request alone"},
           {"    node: {cpu: \"64\"}\n    resources: {requests: {cpu: \"300\"}}\n",
            "the cpu request (300) is more than the node holds"},
           {"    shm_size: \"0\"\n", "shm_size 0 is no size limit to Kubernetes"},
           {"    queue: Bad_Queue\n", "is not a valid Kueue queue name"},
       }) {
    EXPECT_THAT(render_errors(c.extra), HasSubstr(c.expect)) << c.extra;
  }
}

TEST(K8sPodShape, ANcclVariableSetTwiceNamesBothPlaces) {
  auto p = testing::k8s_pod_plan(
      "    network: {type: rdma, nccl_socket_ifname: eth0}\n"
      "env: {NCCL_SOCKET_IFNAME: ib0}\n");
  EXPECT_FALSE(p->plan->complete);
  EXPECT_THAT(codes(p->diags),
              HasSubstr("NCCL_SOCKET_IFNAME is set by executor.kubernetes.network and by"));
}

}  // namespace
}  // namespace bridge
