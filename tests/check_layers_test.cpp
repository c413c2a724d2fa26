// scripts/check-layers.sh, the build's check of docs/architecture.md's claims, run on a planted
// tree: an include up a layer, an executor-name comparison outside executors/, a second
// catch-all and a std::string error out-parameter are each refused by file and line; the same
// tree without them passes, and so does the repository (the build runs the script).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class CheckLayersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs::create_directories(dir_.path() + "/scripts");
    fs::copy_file(std::string(test::kSourceDir) + "/scripts/check-layers.sh",
                  dir_.path() + "/scripts/check-layers.sh");
    for (const char* layer :
         {"probe", "base", "system", "model", "plugins", "plan", "jobs", "executors", "launcher"}) {
      fs::create_directories(dir_.path() + "/" + layer);
      dir_.write(std::string(layer) + "/ok.h", "#pragma once\n");
    }
    dir_.write("launcher/main.cpp", "int main() {\n  try {\n  } catch (...) {\n  }\n}\n");
    dir_.write(
        "base/parallel.cpp",
        "void f() {\n  try {\n  } catch (...) {\n    p = std::current_exception();\n  }\n}\n");
    // The executor names the script reads from the table's rows.
    dir_.write("model/executor_kind.cpp",
               "{.name = \"local\",\n{.name = \"slurm\",\n{.name = \"kubernetes\",\n");
    dir_.write("executors/registry.cpp",
               "bool is_k8s(const X& x) { return x.executor == \"kubernetes\"; }\n");
  }
  test::ChildResult check() const {
    return test::run_command({"/bin/bash", dir_.path() + "/scripts/check-layers.sh"});
  }
  test::TempDir dir_;
};

TEST_F(CheckLayersTest, ACleanTreePasses) {
  test::ChildResult r = check();
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("check-layers: 13 files, 0 includes, all point down a layer"));
}

TEST_F(CheckLayersTest, EachClaimOfTheArchitectureIsCheckedByFileAndLine) {
  dir_.write("model/up.cpp", "#include \"plan/plan.h\"\n");
  dir_.write("plan/plan.cpp", "void f() {\n  if (plan.executor == \"kubernetes\") g();\n}\n");
  dir_.write("launcher/names.cpp", "bool local(const O& o) { return \"local\" != o.executor; }\n");
  dir_.write("jobs/swallow.cpp", "void f() {\n  try {\n    g();\n  } catch (...) {\n  }\n}\n");
  dir_.write("system/out.h",
             "bool read(const std::string& path,\n          std::string& error);\n");
  dir_.write("probe/out.cpp", "bool connect(int port, std::string* why) { return false; }\n");
  test::ChildResult r = check();
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("model/up.cpp:1: includes \"plan/plan.h\""));
  EXPECT_THAT(r.out, HasSubstr("plan/plan.cpp:2: compares an executor's name"));
  EXPECT_THAT(r.out, HasSubstr("launcher/names.cpp:1: compares an executor's name"));
  EXPECT_THAT(r.out, HasSubstr("jobs/swallow.cpp:4: a catch-all outside launcher/main.cpp"));
  EXPECT_THAT(r.out, HasSubstr("system/out.h:2: a std::string& error out-parameter"));
  EXPECT_THAT(r.out, HasSubstr("probe/out.cpp:1: a std::string& error out-parameter"));
  EXPECT_THAT(r.out, HasSubstr("6 violation(s)"));
  // What is allowed: main's catch-all, one that carries the exception to another thread, and
  // an executor comparing names inside executors/.
  const std::string lines = "\n" + r.out;  // each finding starts a line with its file
  EXPECT_THAT(lines, Not(HasSubstr("\nlauncher/main.cpp:")));
  EXPECT_THAT(lines, Not(HasSubstr("\nbase/parallel.cpp:")));
  EXPECT_THAT(lines, Not(HasSubstr("\nexecutors/registry.cpp:")));
}

TEST(CheckLayers, TheRepositoryPasses) {
  test::ChildResult r =
      test::run_command({"/bin/bash", std::string(test::kSourceDir) + "/scripts/check-layers.sh"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace bridge
