// What a rank says about its NUMA binding (executors/numa_bind.h), checked the same way for
// every executor whose ranks run on this host (the Slurm and Kubernetes test clusters).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/test_util.h"

namespace bridge::test {

// The NUMA nodes of this host: the test cluster's nodes run here, so the ranks see the same.
inline int host_numa_nodes() {
  int n = 0;
  while (std::filesystem::exists("/sys/devices/system/node/node" + std::to_string(n))) ++n;
  return n;
}

// Checks one rank's log: the binding program's line for NUMA node `node` (holding `how`, its
// reason), and bridge-probe's report of the CPUs and memory nodes the rank actually got.
inline void expect_binding_reported(const std::string& log, int rank, int node,
                                    const std::string& how, bool numactl) {
  std::string who = "bridge-launch: rank " + std::to_string(rank) + ": ";
  size_t at = log.find(who);
  ASSERT_NE(at, std::string::npos) << log;
  std::string said = log.substr(at, log.find('\n', at) - at);
  std::string n = std::to_string(node);
  bool bound = false;
  if (node >= std::max(host_numa_nodes(), 1)) {
    EXPECT_THAT(said, ::testing::HasSubstr("NUMA node " + n + " (")) << said;
    EXPECT_THAT(said, ::testing::HasSubstr(") is not on this host; running unbound")) << said;
  } else if (!numactl) {
    EXPECT_THAT(said, ::testing::HasSubstr(
                          "numactl not found; running unbound instead of on NUMA node " + n))
        << said;
  } else {
    EXPECT_THAT(said, ::testing::HasSubstr("numactl --cpunodebind=" + n + " --membind=" + n))
        << said;
    bound = true;
  }
  EXPECT_THAT(said, ::testing::HasSubstr(how)) << said;
  std::smatch m;
  std::string line = "bridge-probe: rank " + std::to_string(rank) +
                     R"( binding: cpus ([0-9,-]+) mems ([0-9,-]+) \(/proc/self/status\))";
  ASSERT_TRUE(std::regex_search(log, m, std::regex(line))) << log;
  if (bound) {
    EXPECT_EQ(m[2].str(), std::to_string(node)) << "memory bound to the rank's node";
    std::string cpulist =
        test::read_file("/sys/devices/system/node/node" + std::to_string(node) + "/cpulist");
    while (!cpulist.empty() && cpulist.back() == '\n') cpulist.pop_back();
    EXPECT_EQ(m[1].str(), cpulist) << "CPUs of NUMA node " << node;
  } else if (host_numa_nodes() == 1) {
    EXPECT_EQ(m[2].str(), "0") << "unbound on a one-node host: all its memory";
  }
}

}  // namespace bridge::test
