// Fixtures the code-shipping tests share (tests/code_ship_test.cpp,
// tests/code_snapshot_test.cpp): writing a tree's files and the snapshot plan of a tree.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "plan/code_plan.h"

namespace bridge::test {

// `text` into `p`, creating its directories.
inline void write_tree_file(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
}

// A snapshot of `path` as a recipe at recipe.yaml:7:11 asks for it (512 MiB limit).
inline CodePlan snapshot_of(const std::string& path) {
  CodePlan code;
  code.source = path;
  code.loc = SourceLoc{"recipe.yaml", 7, 11, {}};
  code.max_bytes = std::uint64_t{512} << 20;
  code.python_path = ".";
  code.snapshot_root = "/shared/jobs/x/code";
  return code;
}

}  // namespace bridge::test
