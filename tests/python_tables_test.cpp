// The Python program (python/bridge_config_check.py) repeats two C++ tables because it runs
// alone in the training container: the GPU table (as the capability torch.cuda reports) and
// the 14 overlap fields. These tests keep the copies equal to the C++ ones, so that a GPU or a
// field added on one side and forgotten on the other fails here, not in a conformance run.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "model/gpu_table.h"
#include "model/overlap.h"
#include "tests/support/build_paths.h"

namespace bridge {
namespace {

std::string python_program() {
  std::ifstream in(std::string(BRIDGE_SOURCE_DIR) + "/python/bridge_config_check.py");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The text of `NAME = <open> ... <close>` at the start of a line.
std::string python_block(const std::string& program, const std::string& name, char close) {
  const std::string head = "\n" + name + " = ";
  size_t start = program.find(head);
  if (start == std::string::npos) return "";
  size_t end = program.find(std::string("\n") + close, start);
  return end == std::string::npos ? "" : program.substr(start, end - start);
}

TEST(PythonTables, OverlapFieldsAreTheCppListInTheSameOrder) {
  std::string block = python_block(python_program(), "OVERLAP_FIELDS", ']');
  ASSERT_FALSE(block.empty()) << "OVERLAP_FIELDS not found";
  std::vector<std::string> names;
  std::regex entry(R"re(\("(\w+)", "(model|ddp|optimizer)"\))re");
  for (std::sregex_iterator it(block.begin(), block.end(), entry), end; it != end; ++it)
    names.push_back((*it)[1]);
  EXPECT_EQ(names, overlap_field_names());
}

TEST(PythonTables, GpusAreTheGpuTableWithTheCapabilityOfTheirArchitecture) {
  std::string block = python_block(python_program(), "GPUS", '}');
  ASSERT_FALSE(block.empty()) << "GPUS not found";
  std::map<std::string, int> major_by_gpu;
  std::regex entry(R"re("(\w+)": \(\((\d+), \d+\))re");
  for (std::sregex_iterator it(block.begin(), block.end(), entry), end; it != end; ++it)
    major_by_gpu[(*it)[1]] = std::stoi((*it)[2]);
  // The compute capability's major version of each architecture.
  const std::map<GpuArch, int> kMajor{{GpuArch::kAmpere, 8},
                                      {GpuArch::kHopper, 9},
                                      {GpuArch::kBlackwell, 10},
                                      {GpuArch::kRubin, 11}};
  EXPECT_EQ(major_by_gpu.size(), gpu_table().size());
  for (const GpuType& gpu : gpu_table()) {
    std::string name(gpu.name);
    ASSERT_TRUE(major_by_gpu.count(name)) << name << " is missing from GPUS";
    EXPECT_EQ(major_by_gpu[name], kMajor.at(gpu.arch)) << name;
  }
}

}  // namespace
}  // namespace bridge
