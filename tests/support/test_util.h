// Test helpers: run a command as a subprocess and capture its exit code, stdout and stderr.
//
//   ChildResult r = run_command({BRIDGE_LAUNCH_BIN, "--version"});
//   EXPECT_EQ(r.exit_code, 0);
//
// The child inherits the test's environment plus `extra_env` (which wins), reads `stdin_text`
// on its standard input, and has NO_COLOR=1 set so output is plain. exit_code is the process
// exit status (128 + the signal's number for a killed child, as model/command_runner
// reports it), or -1 when it could not be started. Header-only so that any test file can
// include it.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/diagnostics.h"
#include "system/command_runner.h"
#include "tests/support/build_paths.h"

namespace bridge::test {

struct ChildResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline ChildResult run_command(const std::vector<std::string>& argv,
                               const std::map<std::string, std::string>& extra_env = {},
                               const std::string& stdin_text = "") {
  // The production runner (system/command_runner.h), so the tests exercise the one
  // process runner bridge-launch itself uses.
  bridge::CommandSpec spec;
  spec.argv = argv;
  spec.stdin_text = stdin_text;
  spec.extra_env = extra_env;
  spec.extra_env["NO_COLOR"] = "1";
  spec.timeout = std::chrono::minutes(15);  // ctest's per-test timeout stops a hang first
  bridge::CommandResult r = bridge::SpawnCommandRunner().run(spec);
  ChildResult result;
  result.out = std::move(r.out);
  result.err = std::move(r.err);
  result.exit_code = r.started ? r.exit_code : -1;
  return result;
}

// A fresh empty directory under the system temp dir, removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "bridge-test-XXXXXX").string();
    if (mkdtemp(tmpl.data())) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // Writes `content` (bytes as given) to `name` inside the directory; returns the full path.
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = path_ + "/" + name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

 private:
  std::string path_;
};

// The first diagnostic with `code` (and `path` when given), or nullptr.
inline const Diagnostic* find_diag(const Diagnostics& diags, const std::string& code,
                                   const std::string& path = "") {
  for (const auto& d : diags.items())
    if (d.code == code && (path.empty() || d.path == path)) return &d;
  return nullptr;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace bridge::test
