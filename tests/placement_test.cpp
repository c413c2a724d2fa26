// Placement: the GPU table's nodes (-gn refused above a node, gb200 trays of 4), the NUMA
// binding of every rank (the table's rule, and sysfs fixtures of two and four NUMA nodes run
// through the real binding program with a fake numactl), and the NVLink-domain segment of
// Slurm jobs on 4-GPU trays.
#include "model/placement.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "executors/numa_bind.h"
#include "executors/slurm_script.h"
#include "model/gpu_table.h"
#include "plan/plan.h"
#include "probe/binding_report.h"
#include "system/host_env.h"
#include "tests/support/map_environment.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::run_command;
using test::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kModel = R"(
model: {tensor_model_parallel_size: 1, num_layers: 4, hidden_size: 64, num_attention_heads: 8}
runtime: {command: [bridge-probe]}
executor: {default: slurm, slurm: {job_dir: /lustre/jobs}}
)";

Plan make_plan(const std::string& cluster, Diagnostics& diags,
               std::vector<std::string> overrides = {}) {
  MapEnvironment env({{"HOME", "/home/alice"}, {"USER", "alice"}});
  PlanRequest req;
  req.recipe_path = "placement.yaml";
  req.executor = "slurm";
  req.overrides = std::move(overrides);
  return build_plan_from_text("name: place\ncluster: " + cluster + "\n" + kModel, req, env,
                              plugin_registry(), diags);
}

std::string errors(const Diagnostics& diags) {
  std::string out;
  for (const auto& d : diags.items())
    if (d.severity == Severity::kError) out += format_diagnostic(d, false);
  return out;
}

std::string script(const Plan& plan, Diagnostics& diags) {
  auto s = render_sbatch_script(plan, {}, diags);
  return s ? s->text : "";
}

// ---- the GPU table ------------------------------------------------------------------------

TEST(GpuTable, NodesNumaLayoutsAndNvlinkDomains) {
  for (const char* name : {"h100", "h200", "b200", "b300"}) {
    const GpuType* g = find_gpu(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->node_gpus, 8) << name;
    EXPECT_EQ(g->numa_nodes, 2) << name;
    EXPECT_EQ(gpus_per_numa_node(*g), 4) << name;  // the harness's SLURM_LOCALID / 4
    EXPECT_EQ(nvlink_domain_nodes(*g), 0) << name;
  }
  for (const char* name : {"gb200", "gb300", "vr200"}) {
    const GpuType* g = find_gpu(name);
    ASSERT_NE(g, nullptr) << name;
    EXPECT_EQ(g->node_gpus, 4) << name;
    EXPECT_EQ(gpus_per_numa_node(*g), 2) << name;  // SLURM_LOCALID / 2 on a tray
    EXPECT_EQ(nvlink_domain_nodes(*g), 18) << name;
  }
  EXPECT_EQ(gpus_per_numa_node(*find_gpu("a100")), 0);  // left to sysfs
  EXPECT_EQ(find_gpu("r100")->node_gpus, 0);            // not known: no cap
}

TEST(GpuTable, GnAboveTheNodeIsRefusedWithTheTablesNumber) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: h100, num_gpus: 16}", diags, {"cluster.gpus_per_node=16"});
  EXPECT_FALSE(p.topology);
  std::string e = errors(diags);
  EXPECT_THAT(e, HasSubstr("gpus-per-node-above-node"));
  EXPECT_THAT(e, HasSubstr("gpus_per_node (16) is more than a h100 node holds: 8 GPUs per node"));
  EXPECT_THAT(e, HasSubstr("use -gn 8 or less (-ng 16 -gn 8 is 2 node(s))"));
  EXPECT_THAT(e, HasSubstr("cluster.gpus_per_node_max"));
}

TEST(GpuTable, GpusPerNodeMaxAcceptsUnusualNodes) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: h100, num_gpus: 32, gpus_per_node_max: 16}", diags,
                     {"cluster.gpus_per_node=16"});
  ASSERT_TRUE(p.topology) << errors(diags);
  EXPECT_EQ(p.topology->nodes, 2);
  Diagnostics more;
  Plan above = make_plan("{gpu: h100, num_gpus: 32, gpus_per_node_max: 16}", more,
                         {"cluster.gpus_per_node=32"});
  EXPECT_FALSE(above.topology);
  EXPECT_THAT(errors(more), HasSubstr("more than cluster.gpus_per_node_max (16)"));
  // Without gn, such nodes are filled.
  Diagnostics d3;
  Plan filled = make_plan("{gpu: h100, num_gpus: 32, gpus_per_node_max: 16}", d3);
  ASSERT_TRUE(filled.topology) << errors(d3);
  EXPECT_EQ(filled.topology->gpus_per_node, 16);
}

TEST(GpuTable, UnknownGpusAreNotCapped) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: x900, gpu_arch: blackwell, num_gpus: 16, gpus_per_node: 16}", diags);
  EXPECT_TRUE(p.topology) << errors(diags);
}

// ---- binding: the plan's rule ----------------------------------------------------------------

TEST(Binding, DefaultsFollowTheTable) {
  Diagnostics diags;
  Plan b200 = make_plan("{gpu: b200, num_gpus: 16}", diags);
  EXPECT_EQ(b200.binding.mode, BindingMode::kNuma);
  EXPECT_EQ(b200.binding.gpus_per_numa, 4);
  EXPECT_THAT(b200.binding.source, HasSubstr("default (b200 nodes have 2 NUMA nodes)"));
  Plan gb200 = make_plan("{gpu: gb200, num_gpus: 8}", diags);
  EXPECT_EQ(gb200.binding.gpus_per_numa, 2);
  Plan a100 = make_plan("{gpu: a100, num_gpus: 8}", diags);
  EXPECT_EQ(a100.binding.mode, BindingMode::kNone);
  Plan no_gpu = make_plan("{num_gpus: 8}", diags);
  EXPECT_EQ(no_gpu.binding.mode, BindingMode::kNone);
  EXPECT_FALSE(diags.has_errors()) << errors(diags);
}

TEST(Binding, NumaWithoutATableRuleReadsSysfs) {
  Diagnostics diags;
  Plan a100 = make_plan("{gpu: a100, num_gpus: 8}", diags, {"runtime.binding=numa"});
  EXPECT_EQ(a100.binding.mode, BindingMode::kNuma);
  EXPECT_EQ(a100.binding.gpus_per_numa, 0);
  EXPECT_THAT(a100.binding.rule, HasSubstr("sysfs"));
  Plan unusual = make_plan("{gpu: h100, num_gpus: 16, gpus_per_node_max: 16}", diags,
                           {"runtime.binding=numa"});
  EXPECT_EQ(unusual.binding.gpus_per_numa, 0);
  // The default keeps unusual nodes unbound rather than guess.
  Plan unusual_default = make_plan("{gpu: h100, num_gpus: 16, gpus_per_node_max: 16}", diags);
  EXPECT_EQ(unusual_default.binding.mode, BindingMode::kNone);
  EXPECT_FALSE(diags.has_errors()) << errors(diags);
}

TEST(Binding, NoneAndCustomBindNothing) {
  for (const char* mode : {"none", "custom"}) {
    Diagnostics diags;
    Plan p =
        make_plan("{gpu: b200, num_gpus: 16}", diags, {std::string("runtime.binding=") + mode});
    EXPECT_EQ(binding_mode_name(p.binding.mode), mode);
    EXPECT_EQ(numa_bind_program(p.binding), "");
    std::string s = script(p, diags);
    EXPECT_THAT(s, Not(HasSubstr("numactl"))) << mode;
  }
}

TEST(Binding, BadModeIsRefused) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: b200, num_gpus: 16}", diags, {"runtime.binding=socket"});
  EXPECT_THAT(errors(diags), HasSubstr("`runtime.binding` must be one of numa | none | custom"));
}

// ---- binding: the program, run against sysfs fixtures -------------------------------------

// A sysfs tree: NUMA nodes, NVIDIA GPUs (bus id -> NUMA node), and other PCI devices between
// them (a NIC, an NVSwitch) that must not count as GPUs.
class SysfsFixture {
 public:
  SysfsFixture(int numa_nodes, const std::vector<std::pair<std::string, int>>& gpus) {
    for (int n = 0; n < numa_nodes; ++n)
      fs::create_directories(root() + "/devices/system/node/node" + std::to_string(n));
    for (const auto& [bus, node] : gpus) device(bus, "0x10de", "0x030200", node);
    device("0000:05:00.0", "0x15b3", "0x020700", 0);  // a ConnectX NIC
    device("0000:06:00.0", "0x10de", "0x068000", 0);  // an NVSwitch: NVIDIA, not a GPU
    fs::create_directories(bin());
    for (const char* tool : {"/bin/cat", "/usr/bin/cat"})
      if (fs::exists(tool) && !fs::exists(bin() + "/cat")) fs::create_symlink(tool, bin() + "/cat");
    executable(bin() + "/report", "#!/bin/sh\necho \"ran $*\"\n");
  }

  void install_numactl() const {
    executable(bin() + "/numactl", "#!/bin/sh\necho \"numactl $1 $2\"\nshift 2\nexec \"$@\"\n");
  }

  // A numactl that refuses NUMA node `node` as sched_setaffinity does for CPUs outside the
  // task's cpuset.
  void install_refusing_numactl(const std::string& node) const {
    executable(bin() + "/numactl",
               "#!/bin/sh\nif [ \"$1\" = \"--cpunodebind=" + node +
                   "\" ]; then echo 'sched_setaffinity: Invalid argument' >&2; exit 1; fi\n"
                   "echo \"numactl $1 $2\"\nshift 2\nexec \"$@\"\n");
  }

  // A numactl whose memory policy is refused, as a container's default seccomp profile refuses
  // set_mempolicy/mbind without CAP_SYS_NICE; CPUs alone bind.
  void install_membind_refusing_numactl() const {
    executable(bin() + "/numactl",
               "#!/bin/sh\ncase \"$2\" in --membind=*) echo 'set_mempolicy: Operation not "
               "permitted' >&2; exit 1;; esac\necho \"numactl $1\"\nshift\nexec \"$@\"\n");
  }

  // Runs the binding program as local rank `local_rank`; stdout and stderr.
  test::ChildResult run(const NumaBinding& b, int local_rank, const std::string& cvd = "") const {
    return run_command({"/bin/bash", "-c", numa_bind_program(b, root()), "bridge-rank",
                        bin() + "/report", "train"},
                       {{"LOCAL_RANK", std::to_string(local_rank)},
                        {"RANK", std::to_string(100 + local_rank)},
                        {"CUDA_VISIBLE_DEVICES", cvd},
                        {"PATH", bin()}});
  }

  std::string root() const { return dir_.path() + "/sys"; }

 private:
  std::string bin() const { return dir_.path() + "/bin"; }

  void device(const std::string& bus, const char* vendor, const char* cls, int node) const {
    std::string d = root() + "/bus/pci/devices/" + bus;
    fs::create_directories(d);
    std::ofstream(d + "/vendor") << vendor << "\n";
    std::ofstream(d + "/class") << cls << "\n";
    std::ofstream(d + "/numa_node") << node << "\n";
  }

  static void executable(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    chmod(path.c_str(), 0755);
  }

  TempDir dir_;
};

NumaBinding table_rule(int gpus_per_numa) {
  return NumaBinding{BindingMode::kNuma, gpus_per_numa, "test", ""};
}
NumaBinding sysfs_rule() { return NumaBinding{BindingMode::kNuma, 0, "test", ""}; }

// An 8-GPU HGX board: GPUs 0-3 on NUMA node 0, 4-7 on node 1 (bus ids as on a DGX H100).
const std::vector<std::pair<std::string, int>> kTwoNodes{
    {"0000:1b:00.0", 0}, {"0000:43:00.0", 0}, {"0000:52:00.0", 0}, {"0000:61:00.0", 0},
    {"0000:9d:00.0", 1}, {"0000:c3:00.0", 1}, {"0000:d1:00.0", 1}, {"0000:df:00.0", 1}};
// Four NUMA nodes, two GPUs each, and not in rank order (node 3 first, as on a DGX A100).
const std::vector<std::pair<std::string, int>> kFourNodes{
    {"0000:07:00.0", 3}, {"0000:0f:00.0", 3}, {"0000:47:00.0", 1}, {"0000:4e:00.0", 1},
    {"0000:87:00.0", 2}, {"0000:90:00.0", 2}, {"0000:b7:00.0", 0}, {"0000:bd:00.0", 0}};

std::string bound_to(const test::ChildResult& r) {
  auto at = r.out.find("numactl --cpunodebind=");
  return at == std::string::npos ? "unbound" : r.out.substr(at, r.out.find('\n', at) - at);
}

TEST(BindingProgram, TableRuleOnTwoNumaNodes) {
  SysfsFixture sys(2, kTwoNodes);
  sys.install_numactl();
  for (int rank = 0; rank < 8; ++rank) {
    auto r = sys.run(table_rule(4), rank);
    int node = rank / 4;
    EXPECT_EQ(bound_to(r), fmt::format("numactl --cpunodebind={0} --membind={0}", node)) << r.err;
    EXPECT_THAT(r.out, HasSubstr("ran train"));
    EXPECT_THAT(r.err, HasSubstr(fmt::format("bridge-launch: rank {}: numactl --cpunodebind={} "
                                             "--membind={} (local rank {} / 4)",
                                             100 + rank, node, node, rank)));
  }
}

TEST(BindingProgram, SysfsRuleOnTwoAndFourNumaNodes) {
  for (const auto* layout : {&kTwoNodes, &kFourNodes}) {
    int nodes = layout == &kTwoNodes ? 2 : 4;
    SysfsFixture sys(nodes, *layout);
    sys.install_numactl();
    for (int rank = 0; rank < 8; ++rank) {
      auto r = sys.run(sysfs_rule(), rank);
      int node = (*layout)[static_cast<size_t>(rank)].second;
      EXPECT_EQ(bound_to(r), fmt::format("numactl --cpunodebind={0} --membind={0}", node))
          << nodes << " nodes, rank " << rank << ": " << r.err;
      EXPECT_THAT(r.err, HasSubstr("GPU " + (*layout)[static_cast<size_t>(rank)].first));
      EXPECT_THAT(r.out, HasSubstr("ran train"));
    }
  }
}

TEST(BindingProgram, SysfsRuleFollowsCudaVisibleDevices) {
  SysfsFixture sys(4, kFourNodes);
  sys.install_numactl();
  // One GPU per task (e.g. --gpus-per-task=1): its only entry is the GPU, whatever the rank.
  EXPECT_EQ(bound_to(sys.run(sysfs_rule(), 0, "6")), "numactl --cpunodebind=0 --membind=0");
  // A list: the rank's entry.
  EXPECT_EQ(bound_to(sys.run(sysfs_rule(), 1, "4,2,0")), "numactl --cpunodebind=1 --membind=1");
  // UUIDs are not indices: the local rank decides.
  EXPECT_EQ(bound_to(sys.run(sysfs_rule(), 2, "GPU-1234,GPU-5678")),
            "numactl --cpunodebind=1 --membind=1");
}

TEST(BindingProgram, OneNumaNodeHostsBindToNodeZeroWithoutAGpu) {
  SysfsFixture sys(1, {});
  sys.install_numactl();
  auto r = sys.run(sysfs_rule(), 3);
  EXPECT_EQ(bound_to(r), "numactl --cpunodebind=0 --membind=0") << r.err;
  EXPECT_THAT(r.err, HasSubstr("one NUMA node on this host"));
}

TEST(BindingProgram, FallsBackUnboundWithAWarning) {
  {  // numactl absent
    SysfsFixture sys(2, kTwoNodes);
    auto r = sys.run(table_rule(4), 5);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(bound_to(r), "unbound");
    EXPECT_THAT(r.out, HasSubstr("ran train"));
    EXPECT_THAT(r.err, HasSubstr("bridge-launch: rank 105: numactl not found; running unbound "
                                 "instead of on NUMA node 1 (local rank 5 / 4)"));
  }
  {  // the table's node is not on this host
    SysfsFixture sys(1, {});
    sys.install_numactl();
    auto r = sys.run(table_rule(4), 6);
    EXPECT_EQ(bound_to(r), "unbound");
    EXPECT_THAT(r.out, HasSubstr("ran train"));
    EXPECT_THAT(r.err, HasSubstr("NUMA node 1 (local rank 6 / 4) is not on this host; running "
                                 "unbound"));
  }
  {  // numactl refuses the node (a step whose cgroup holds no CPU of it): the rank still runs
    SysfsFixture sys(2, kTwoNodes);
    sys.install_refusing_numactl("1");
    auto r = sys.run(table_rule(4), 5);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(bound_to(r), "unbound") << r.out;
    EXPECT_THAT(r.out, HasSubstr("ran train"));
    EXPECT_THAT(r.err, HasSubstr("bridge-launch: rank 105: numactl cannot bind to NUMA node 1 "
                                 "(local rank 5 / 4; this task may use CPUs "));
    EXPECT_THAT(r.err, HasSubstr("); running unbound"));
    auto other = sys.run(table_rule(4), 1);  // node 0 binds as before
    EXPECT_EQ(bound_to(other), "numactl --cpunodebind=0 --membind=0") << other.err;
  }
  {  // no memory policy allowed (a pod without CAP_SYS_NICE): the CPUs alone, said so
    SysfsFixture sys(2, kTwoNodes);
    sys.install_membind_refusing_numactl();
    auto r = sys.run(table_rule(4), 5);
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(bound_to(r), "numactl --cpunodebind=1") << r.out << r.err;
    EXPECT_THAT(r.out, HasSubstr("ran train"));
    EXPECT_THAT(r.err, HasSubstr("bridge-launch: rank 105: numactl --cpunodebind=1 (local rank 5 "
                                 "/ 4; CPUs only: a memory policy is not permitted here"));
  }
  {  // two NUMA nodes and no GPU in sysfs: nothing to go by
    SysfsFixture sys(2, {});
    sys.install_numactl();
    auto r = sys.run(sysfs_rule(), 0);
    EXPECT_EQ(bound_to(r), "unbound");
    EXPECT_THAT(r.err, HasSubstr("no NUMA node for its GPU (no GPU 0 in sysfs); running unbound"));
  }
}

// ---- Slurm: binding and segment in the script ------------------------------------------------

TEST(SlurmPlacement, B200SixteenGpusBindsLocalRanksByHalves) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: b200, num_gpus: 16}", diags);
  std::string s = script(p, diags);
  ASSERT_FALSE(s.empty()) << errors(diags);
  EXPECT_THAT(s, HasSubstr("#SBATCH --nodes=2\n"));
  EXPECT_THAT(s, Not(HasSubstr("--segment")));  // 8-GPU nodes: NVLink stays in the node
  // The script holds the table's program; run as each local rank, it binds 0-3 to node 0.
  EXPECT_THAT(s, HasSubstr("n=$((LOCAL_RANK / 4))"));
  SysfsFixture sys(2, kTwoNodes);
  sys.install_numactl();
  for (int rank = 0; rank < 8; ++rank)
    EXPECT_EQ(bound_to(sys.run(p.binding, rank)),
              fmt::format("numactl --cpunodebind={0} --membind={0}", rank < 4 ? 0 : 1));
  EXPECT_THAT(s, HasSubstr("each rank bound to its GPU's NUMA node: NUMA node = local rank / 4"));
}

TEST(SlurmPlacement, TorchrunWorkersAreBound) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: gb200, num_gpus: 8}", diags, {"runtime.launcher=torchrun"});
  std::string s = script(p, diags);
  ASSERT_FALSE(s.empty()) << errors(diags);
  EXPECT_THAT(s, HasSubstr("--no-python bash -c"));
  EXPECT_THAT(s, HasSubstr("bridge-worker \"$@\""));
  EXPECT_THAT(s, HasSubstr("LOCAL_RANK / 2"));
}

TEST(SlurmPlacement, Gb200SeventyTwoGpusIsEighteenTraysInOneSegment) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: gb200, num_gpus: 72}", diags);
  std::string s = script(p, diags);
  ASSERT_FALSE(s.empty()) << errors(diags);
  EXPECT_THAT(s, HasSubstr("#SBATCH --nodes=18\n"));
  EXPECT_THAT(s, HasSubstr("#SBATCH --gpus-per-node=4\n"));
  EXPECT_THAT(s, HasSubstr("#SBATCH --segment=18\n"));
}

TEST(SlurmPlacement, DefaultSegmentIsTheLargestDivisorWithinADomain) {
  for (auto [nodes, segment] : std::vector<std::pair<int, int>>{
           {1, 1}, {5, 5}, {18, 18}, {20, 10}, {36, 18}, {38, 2}, {19, 1}, {54, 18}}) {
    Topology t;
    t.gpu = "gb300";
    t.nodes = nodes;
    EXPECT_EQ(default_nvlink_segment(t), segment) << nodes;
  }
  Topology h100;
  h100.gpu = "h100";
  h100.nodes = 4;
  EXPECT_EQ(default_nvlink_segment(h100), 0);
}

TEST(SlurmPlacement, RecipeSegmentWinsAndMustDivideTheNodes) {
  Diagnostics diags;
  Plan p = make_plan("{gpu: gb200, num_gpus: 144}", diags, {"executor.slurm.segment=9"});
  EXPECT_THAT(script(p, diags), HasSubstr("#SBATCH --segment=9\n"));
  Plan off = make_plan("{gpu: gb200, num_gpus: 144}", diags, {"executor.slurm.segment=0"});
  EXPECT_THAT(script(off, diags), Not(HasSubstr("--segment")));
  EXPECT_FALSE(diags.has_errors()) << errors(diags);
  Diagnostics bad;
  Plan q = make_plan("{gpu: gb200, num_gpus: 72}", bad, {"executor.slurm.segment=4"});
  EXPECT_EQ(script(q, bad), "");
  EXPECT_THAT(errors(bad), HasSubstr("slurm-segment-does-not-divide"));
  EXPECT_THAT(errors(bad), HasSubstr("the job's 18 node(s) cannot be split into NVLink-domain "
                                     "segments of 4 node(s)"));
}

// ---- bridge-probe: the binding a rank reports ---------------------------------------------

TEST(ProbeBinding, ReadsTheAllowedListsOfProcStatus) {
  probe::Binding b = probe::binding_from_status(
      "Name:\tbridge-probe\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8-11\n"
      "Mems_allowed:\t00000001\nMems_allowed_list:\t0\n");
  EXPECT_EQ(b.cpus, "0-3,8-11");
  EXPECT_EQ(b.mems, "0");
  probe::Binding none = probe::binding_from_status("Name:\tx\n");
  EXPECT_EQ(none.cpus, "?");
  EXPECT_EQ(none.mems, "?");
  // This process: the kernel's own lists.
  EXPECT_THAT(probe::binding_report_line(7),
              ::testing::MatchesRegex("bridge-probe: rank 7 binding: cpus [0-9,-]+ mems "
                                      "[0-9,-]+ \\(/proc/self/status\\)"));
}

}  // namespace
}  // namespace bridge
