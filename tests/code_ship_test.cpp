// runtime.code (plan/code_plan.h): a local source tree shipped into the job. The tree's
// inspection (git through the CommandRunner seam, sizes, the snapshot hash), the glob
// patterns, SHA-256, the renders (Slurm mount / PYTHONPATH, the Kubernetes volume) and,
// through the real binary, the bad-input contract, --dry-run writing nothing and the
// registry's record of the code a local job ran.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "base/sha256.h"
#include "executors/job_dir.h"
#include "executors/k8s_render.h"
#include "executors/slurm_script.h"
#include "model/executor_kind.h"
#include "plan/code_plan.h"
#include "plan/plan.h"
#include "plugins/plugin.h"
#include "system/command_runner.h"
#include "tests/support/build_paths.h"
#include "tests/support/code_testing.h"
#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The shared fixtures, under the names these tests use.
void write(const fs::path& p, const std::string& text) { test::write_tree_file(p, text); }
using test::snapshot_of;

// A git work tree with one commit: two tracked files, a marker under src/.
struct GitTree {
  test::TempDir dir;
  std::string commit;

  GitTree() {
    write(fs::path(dir.path()) / "README.md", "tree\n");
    write(fs::path(dir.path()) / "src/pkg/marker.txt", "hello\n");
    git({"init", "-q"});
    git({"add", "-A"});
    git({"-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"});
    commit = git({"rev-parse", "HEAD"}).out.substr(0, 40);
  }
  CommandResult git(std::vector<std::string> args) const {
    CommandSpec spec;
    spec.argv = {"git", "-C", dir.path()};
    spec.argv.insert(spec.argv.end(), args.begin(), args.end());
    return SpawnCommandRunner().run(spec);
  }
};

std::vector<std::string> paths_of(const CodeInspection& found) {
  std::vector<std::string> out;
  for (const auto& f : found.files) out.push_back(f.path);
  return out;
}

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(Sha256().hex(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  Sha256 abc;
  abc.update("a");
  abc.update("bc");  // any split gives the same digest
  EXPECT_EQ(abc.hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 long_input;
  long_input.update("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq");
  EXPECT_EQ(long_input.hex(), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  for (int i = 0; i < 1000; ++i) million.update(std::string(1000, 'a'));
  EXPECT_EQ(million.hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(CodePatternTest, GlobsMatchWithinAndAcrossDirectories) {
  EXPECT_TRUE(code_path_matches("*.py", "a/b/c.py"));  // no '/': the file name anywhere
  EXPECT_FALSE(code_path_matches("*.py", "a/b/c.pyc"));
  EXPECT_TRUE(code_path_matches("src/**", "src/a/b.txt"));
  EXPECT_FALSE(code_path_matches("src/**", "lib/src/a"));
  EXPECT_TRUE(code_path_matches("**/*.py", "top.py"));  // `**/` also matches no directory
  EXPECT_TRUE(code_path_matches("**/*.py", "a/b/top.py"));
  EXPECT_FALSE(code_path_matches("src/*.py", "src/a/b.py"));  // `*` stays in a component
  EXPECT_TRUE(code_path_matches("src/?.py", "src/a.py"));
  EXPECT_TRUE(code_path_matches("/scripts/run.sh", "scripts/run.sh"));
}

// The matcher never backtracks (issue 47 item 9: `*a*a*a*a*a*a*a*a*ab` against a 60-character
// name took 30 s in `validate`, one more `*a` never ended); these answers come at once.
TEST(CodePatternTest, ManyStarsAreAnsweredWithoutBacktracking) {
  const std::string sixty(60, 'a');
  EXPECT_FALSE(code_path_matches("*a*a*a*a*a*a*a*a*ab", sixty));
  EXPECT_TRUE(code_path_matches("*a*a*a*a*a*a*a*a*ab", sixty + "b"));
  EXPECT_FALSE(code_path_matches("*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*ab", std::string(4000, 'a')));
  EXPECT_FALSE(code_path_matches("**/*a*a*a*a*a*a*a*a*ab", "d/" + sixty + "/" + sixty));
  EXPECT_TRUE(code_path_matches("**/*a*a*a*a*a*a*a*a*ab", "d/" + sixty + "/" + sixty + "b"));
  EXPECT_FALSE(code_path_matches("**a**a**a**a**a**a**a**a**ab", sixty + "/" + sixty));
  EXPECT_TRUE(code_path_matches("**a**a**a**a**a**a**a**a**ab", sixty + "/" + sixty + "b"));
  // Fewer `a`s in the name than the pattern needs.
  EXPECT_FALSE(code_path_matches("*a*a*a*ab", "aab"));
  EXPECT_TRUE(code_path_matches("*a*a*a*ab", "xaxaxaab"));
}

TEST(CodePatternTest, StarsAndDirectoriesOnTrickyPaths) {
  EXPECT_TRUE(code_path_matches("a/**/b", "a/b"));  // `**/` matches no directory
  EXPECT_TRUE(code_path_matches("a/**/b", "a/x/y/b"));
  EXPECT_FALSE(code_path_matches("a/**/b", "a/xb"));
  EXPECT_FALSE(code_path_matches("a/**/b", "ab"));
  EXPECT_TRUE(code_path_matches("src/**", "src/"));
  EXPECT_FALSE(code_path_matches("src/**", "src"));
  EXPECT_TRUE(code_path_matches("src/**.py", "src/a/b.py"));  // `**` crosses components
  EXPECT_FALSE(code_path_matches("src/**.py", "src/a/b.pyc"));
  EXPECT_FALSE(code_path_matches("a*b", "a/b"));  // `*` and `?` never match '/'
  EXPECT_FALSE(code_path_matches("a?b", "a/b"));
  EXPECT_TRUE(code_path_matches("a?b", "a.b"));
  EXPECT_TRUE(code_path_matches("*", ""));
  EXPECT_FALSE(code_path_matches("?", ""));
  EXPECT_TRUE(code_path_matches("", ""));
  EXPECT_FALSE(code_path_matches("", "x"));
  EXPECT_TRUE(code_path_matches("a*", "a"));
  EXPECT_TRUE(code_path_matches("*.tar.gz", "dist/x.tar.gz"));
  EXPECT_FALSE(code_path_matches("*.tar.gz", "dist/x.tar.gzz"));
  EXPECT_TRUE(code_path_matches("**/test_*.py", "tests/unit/test_x.py"));
  EXPECT_FALSE(code_path_matches("**/test_*.py", "tests/unit/test_x.py/y"));
  EXPECT_TRUE(code_path_matches("conf/*/*.yaml", "conf/a/b.yaml"));
  EXPECT_FALSE(code_path_matches("conf/*/*.yaml", "conf/b.yaml"));
}

TEST(CodeInspectTest, DirtyGitTreeShipsTrackedFilesAsOnDiskAndNotUntrackedOnes) {
  GitTree tree;
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree.dir.path());
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags)) << diags.items().size();
  EXPECT_TRUE(code.inspection->git);
  EXPECT_EQ(code.inspection->commit, tree.commit);
  EXPECT_FALSE(code.inspection->dirty);
  std::string clean_hash = code.inspection->hash;
  EXPECT_EQ(clean_hash.size(), 64u);

  write(fs::path(tree.dir.path()) / "src/pkg/marker.txt", "patched\n");  // uncommitted
  write(fs::path(tree.dir.path()) / "scratch.txt", "not tracked\n");
  CodePlan again = snapshot_of(tree.dir.path());
  ASSERT_TRUE(inspect_code(again, runner, CodeDepth::kHash, diags));
  EXPECT_TRUE(again.inspection->dirty);
  EXPECT_EQ(again.inspection->commit, tree.commit);
  EXPECT_THAT(paths_of(*again.inspection),
              ::testing::ElementsAre("README.md", "src/pkg/marker.txt"));
  EXPECT_EQ(again.inspection->bytes, 5u + 8u);
  EXPECT_NE(again.inspection->hash, clean_hash);  // the uncommitted change is in the snapshot
}

TEST(CodeInspectTest, GitRunsThroughTheCommandRunnerSeam) {
  GitTree tree;
  SpawnCommandRunner real;
  testing::ScriptedRunner runner([&](const CommandSpec& spec) { return real.run(spec); });
  Diagnostics diags;
  CodePlan code = snapshot_of(tree.dir.path());
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kList, diags));
  EXPECT_GE(runner.count("git"), 3);
  for (const auto& call : runner.calls) {
    EXPECT_EQ(call.argv.at(0), "git");
    EXPECT_EQ(call.extra_env.at("GIT_OPTIONAL_LOCKS"), "0");  // never rewrites the index
  }
  EXPECT_TRUE(code.inspection->hash.empty());  // kList reads no contents
}

TEST(CodeInspectTest, MissingPathIsADiagnosticAtTheRecipeKey) {
  test::TempDir dir;
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(dir.path() + "/nowhere");
  EXPECT_FALSE(inspect_code(code, runner, CodeDepth::kList, diags));
  ASSERT_EQ(diags.items().size(), 1u);
  const Diagnostic& d = diags.items()[0];
  EXPECT_EQ(d.code, "code-path-missing");
  EXPECT_EQ(d.path, "runtime.code.path");
  EXPECT_EQ(d.loc.line, 7);
  EXPECT_EQ(d.loc.column, 11);
  EXPECT_FALSE(d.help.empty());
}

TEST(CodeInspectTest, HugeTreeIsRefusedWithItsMeasuredSize) {
  test::TempDir dir;
  write(fs::path(dir.path()) / "weights.bin", std::string(3 << 20, 'x'));
  write(fs::path(dir.path()) / "a.py", "print(1)\n");
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(dir.path());
  code.include = {"**"};
  code.max_bytes = std::uint64_t{1} << 20;
  code.max_loc = SourceLoc{"recipe.yaml", 9, 18, {}};
  EXPECT_FALSE(inspect_code(code, runner, CodeDepth::kList, diags));
  ASSERT_EQ(diags.items().size(), 1u);
  const Diagnostic& d = diags.items()[0];
  EXPECT_EQ(d.code, "code-too-large");
  EXPECT_THAT(d.message, HasSubstr("3.0 MiB in 2 files"));
  EXPECT_THAT(d.message, HasSubstr("limit of 1.0 MiB"));
  EXPECT_EQ(d.loc.line, 9);
}

TEST(CodeInspectTest, OutsideGitTheIncludePatternsChooseTheFiles) {
  test::TempDir dir;
  write(fs::path(dir.path()) / "pkg/a.py", "a\n");
  write(fs::path(dir.path()) / "pkg/data.bin", "b\n");
  write(fs::path(dir.path()) / "run.sh", "c\n");
  SpawnCommandRunner runner;
  Diagnostics none;
  CodePlan without = snapshot_of(dir.path());
  EXPECT_FALSE(inspect_code(without, runner, CodeDepth::kList, none));
  ASSERT_EQ(none.items().size(), 1u);
  EXPECT_EQ(none.items()[0].code, "code-not-git");

  Diagnostics diags;
  CodePlan code = snapshot_of(dir.path());
  code.include = {"*.py", "run.sh"};
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags));
  EXPECT_FALSE(code.inspection->git);
  EXPECT_THAT(paths_of(*code.inspection), ::testing::ElementsAre("pkg/a.py", "run.sh"));
}

TEST(CodeCopyTest, TheCopyHasTheFilesAndTheHashTheInspectionComputed) {
  GitTree tree;
  fs::permissions(fs::path(tree.dir.path()) / "README.md", fs::perms::owner_exec,
                  fs::perm_options::add);
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree.dir.path());
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags));
  test::TempDir jobs;
  StatusOr<CopiedCode> copied =
      copy_code_snapshot(code.source, code.inspection->files, jobs.path() + "/code", "job-1");
  ASSERT_TRUE(copied.ok()) << copied.why();
  EXPECT_EQ(copied->hash, code.inspection->hash);
  EXPECT_EQ(copied->files, 2u);
  EXPECT_EQ(test::read_file(copied->dir + "/src/pkg/marker.txt"), "hello\n");
  EXPECT_NE(fs::status(copied->dir + "/README.md").permissions() & fs::perms::owner_exec,
            fs::perms::none);
  // A second copy under the same id is refused: a submission's snapshot is new.
  EXPECT_FALSE(
      copy_code_snapshot(code.source, code.inspection->files, jobs.path() + "/code", "job-1").ok());
  remove_code_snapshot(copied->dir);  // read-only: TempDir alone cannot remove it as a user
}

// ---------------------------------------------------------------------------------------
// Renders: what the ranks are told.

Plan plan_with_code(const std::string& recipe_text, const std::string& executor) {
  MapEnvironment env({{"HOME", "/home/u"}, {"PWD", "/work"}});
  PlanRequest req;
  req.recipe_path = "recipe.yaml";
  req.executor = executor;
  Diagnostics diags;
  Plan plan = build_plan_from_text(recipe_text, req, env, {}, diags);
  EXPECT_FALSE(diags.has_errors());
  return plan;
}

constexpr const char* kCodeBase = R"(name: code
cluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}
runtime:
  command: [bridge-probe]
)";
const std::string kCodeRecipe = std::string(kCodeBase) + "  code: {path: ~/Megatron-Bridge}\n";

TEST(CodeRenderTest, SlurmWithoutContainerPutsTheSnapshotFirstOnPythonPath) {
  Plan plan = plan_with_code(kCodeRecipe, "slurm");
  ASSERT_TRUE(plan.code);
  EXPECT_EQ(plan.code->source, "/home/u/Megatron-Bridge");
  SlurmRenderOptions options;
  options.submission_id = "code-1";
  Diagnostics diags;
  auto script = render_sbatch_script(plan, options, diags);
  ASSERT_TRUE(script);
  std::string dir = "/home/u/bridge-launch/jobs/code/code/code-1";
  EXPECT_THAT(script->text, HasSubstr("export BRIDGE_CODE_DIR='\\''" + dir + "'\\''"));
  EXPECT_THAT(script->text, HasSubstr("PYTHONPATH='\\''" + dir + "'\\''\"${PYTHONPATH:+"));
  EXPECT_THAT(script->text, Not(HasSubstr("--container-mounts")));
}

TEST(CodeRenderTest, SlurmInAContainerMountsTheSnapshotWhereTheSourcesLive) {
  Plan plan = plan_with_code(std::string(kCodeBase) +
                                 "  adapter: none\n  container_image: nvcr.io/nvidia/nemo:25.11\n"
                                 "  code: {path: /src/mb, container_path: /opt/Megatron-Bridge}\n",
                             "slurm");
  ASSERT_TRUE(plan.code);
  EXPECT_TRUE(plan.code->in_container);
  SlurmRenderOptions options;
  options.submission_id = "code-1";
  Diagnostics diags;
  auto script = render_sbatch_script(plan, options, diags);
  ASSERT_TRUE(script);
  EXPECT_THAT(script->text,
              HasSubstr("/home/u/bridge-launch/jobs/code/code/code-1:/opt/Megatron-Bridge:ro"));
  EXPECT_THAT(script->text, Not(HasSubstr("PYTHONPATH")));
}

// Issue 47 item 13: container_path is one field of a mount; "/opt/code:rw" rendered
// `...:/opt/code:rw:ro` (and ',' starts another mount). Refused at planning, so `validate`.
TEST(CodeRenderTest, AContainerPathHoldingMountSyntaxIsRefused) {
  for (const char* path : {"/opt/code:rw", "/opt/a,/etc:/etc", "/opt/co\tde"}) {
    MapEnvironment env({{"HOME", "/home/u"}, {"PWD", "/work"}});
    PlanRequest req;
    req.recipe_path = "recipe.yaml";
    req.executor = "slurm";
    Diagnostics diags;
    Plan plan = build_plan_from_text(
        std::string(kCodeBase) + "  container_image: nvcr.io/nvidia/nemo:25.11\n" +
            "  code: {path: /src/mb, container_path: " + nlohmann::json(path).dump() + "}\n",
        req, env, {}, diags);
    const Diagnostic* d = test::find_diag(diags, "bad-value", "runtime.code.container_path");
    ASSERT_NE(d, nullptr) << path;
    EXPECT_EQ(d->loc.line, 6) << path;
    EXPECT_FALSE(plan.code.has_value()) << path;
  }
}

// runtime.container_image on an executor that starts no container (local) is said by name,
// as the other executors' settings are: it was silently ignored (issue 47).
TEST(ContainerImageTest, TheLocalExecutorSaysItStartsNoContainer) {
  const std::string text =
      std::string(kCodeBase) + "  container_image: nvcr.io/nvidia/nemo:25.11\n";
  for (const std::string& executor : executor_names()) {
    MapEnvironment env({{"HOME", "/home/u"}, {"PWD", "/work"}});
    PlanRequest req;
    req.recipe_path = "recipe.yaml";
    req.executor = executor;
    Diagnostics diags;
    build_plan_from_text(text, req, env, {}, diags);
    const Diagnostic* d =
        test::find_diag(diags, "executor-setting-not-applied", "runtime.container_image");
    if (find_executor_kind(executor)->ranks_in_image) {
      EXPECT_EQ(d, nullptr) << executor;
      continue;
    }
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(d->severity, Severity::kWarning);
    EXPECT_EQ(d->loc.line, 5);
    EXPECT_THAT(d->message, HasSubstr("the " + executor +
                                      " executor runs the ranks in this machine's "
                                      "environment, not in a container"));
    Diagnostics strict(true);
    build_plan_from_text(text, req, env, {}, strict);
    EXPECT_TRUE(strict.has_errors()) << "--strict refuses a setting that is not applied";
  }
}

TEST(CodeRenderTest, MegatronBridgeAdapterDefaultsToTheNemoContainerSourcePath) {
  Plan plan = plan_with_code(
      "name: mb\ncluster: {gpu: h100, num_gpus: 8, gpus_per_node: 8}\n"
      "model: {family: llama, recipe: llama3_8b}\n"
      "runtime:\n  adapter: megatron_bridge\n  command: [python, run_script.py]\n"
      "  container_image: nvcr.io/nvidia/nemo:25.11\n"
      "  code: {path: /src/Megatron-Bridge, mode: mount}\n",
      "slurm");
  ASSERT_TRUE(plan.code);
  EXPECT_EQ(plan.code->container_path, "/opt/Megatron-Bridge");
  EXPECT_EQ(plan.code->python_path, "src");
  EXPECT_EQ(code_host_dir(*plan.code, "any"), "/src/Megatron-Bridge");  // mounted as is
}

TEST(CodeRenderTest, KubernetesGetsTheTreeAsAHostPathVolume) {
  Plan plan = plan_with_code(std::string(kCodeBase) +
                                 "  container_image: nvcr.io/nvidia/nemo:25.11\n"
                                 "  code: {path: /src/tree, snapshot_dir: /shared/snapshots}\n",
                             "kubernetes");
  ASSERT_TRUE(plan.code);
  K8sRenderOptions options;
  options.job_id = "code-1";
  Diagnostics diags;
  auto m = render_k8s_manifests(plan, options, diags);
  ASSERT_TRUE(m);
  const auto& pod = m->docs.back()["spec"]["replicatedJobs"][0]["template"]["spec"]["template"];
  bool volume = false;
  for (const auto& v : pod["spec"]["volumes"])
    if (v["name"] == kK8sCodeVolume) {
      volume = true;
      EXPECT_EQ(v["hostPath"]["path"], "/shared/snapshots/code/code-1");
    }
  EXPECT_TRUE(volume);
  bool mounted = false;
  for (const auto& v : pod["spec"]["containers"][0]["volumeMounts"])
    if (v["name"] == kK8sCodeVolume) {
      mounted = true;
      EXPECT_EQ(v["mountPath"], "/opt/bridge-launch/code");
      EXPECT_EQ(v["readOnly"], true);
    }
  EXPECT_TRUE(mounted);
}

// ---------------------------------------------------------------------------------------
// The real binary.

class CodeCliTest : public ::testing::Test {
 protected:
  test::ChildResult run(const std::vector<std::string>& args) {
    std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    return test::run_command(argv, {{"HOME", home_.path()}});
  }
  std::string recipe(const std::string& code_section, const std::string& extra = "") {
    return scratch_.write("recipe.yaml",
                          "name: shipped\n"
                          "cluster: {gpu: h100, num_gpus: 2, gpus_per_node: 2}\n"
                          "runtime:\n"
                          "  launcher: direct\n"
                          "  command: [bridge-probe]\n"
                          "  args: [--compute-ms, '1', --expect-file, src/pkg/marker.txt=hello]\n"
                          "  code:\n" +
                              code_section + extra);
  }
  // Every file under `dir`, recursively.
  static int files_under(const std::string& dir) {
    int n = 0;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      n += it->is_regular_file();
    return n;
  }
  test::TempDir home_, scratch_;
};

TEST_F(CodeCliTest, MissingPathStopsTheLaunchWithExit2AndNothingSubmitted) {
  std::string r = recipe("    path: " + scratch_.path() + "/no-such-tree\n");
  test::ChildResult out = run({r});
  EXPECT_EQ(out.exit_code, 2) << out.err;
  EXPECT_THAT(out.err, HasSubstr("recipe.yaml:8:11"));
  EXPECT_THAT(out.err, HasSubstr("code-path-missing"));
  EXPECT_THAT(out.err, HasSubstr("help:"));
  EXPECT_THAT(out.err, HasSubstr("nothing was submitted"));
  EXPECT_EQ(files_under(home_.path()), 0);
  EXPECT_EQ(run({"validate", r}).exit_code, 2);
}

TEST_F(CodeCliTest, HugeTreeIsRefusedBeforeAnythingIsWritten) {
  test::TempDir tree;
  write(fs::path(tree.path()) / "big.bin", std::string(2 << 20, 'x'));
  test::ChildResult out =
      run({recipe("    path: " + tree.path() + "\n    include: ['**']\n    max_size_mb: 1\n")});
  EXPECT_EQ(out.exit_code, 2) << out.err;
  EXPECT_THAT(out.err, HasSubstr("2.0 MiB in 1 files"));
  EXPECT_THAT(out.err, HasSubstr("code-too-large"));
  EXPECT_EQ(files_under(home_.path()), 0);
}

TEST_F(CodeCliTest, DryRunShowsWhatWouldBeCopiedAndWritesNothing) {
  GitTree tree;
  std::string r = recipe("    path: " + tree.dir.path() + "\n");
  test::ChildResult out = run({"--dry-run", r, "--executor", "slurm"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  EXPECT_THAT(out.out, HasSubstr("# runtime.code: snapshot of " + tree.dir.path()));
  EXPECT_THAT(out.out, HasSubstr("git commit " + tree.commit + ", clean"));
  EXPECT_THAT(out.out, HasSubstr("would copy 2 files, 11 B"));
  EXPECT_EQ(files_under(home_.path()), 0) << "a dry run leaves no file behind";
  EXPECT_FALSE(fs::exists(home_.path() + "/bridge-launch"));
  EXPECT_EQ(tree.git({"status", "--porcelain"}).out, "");  // nor in the tree
}

TEST_F(CodeCliTest, PlanShowsCommitDirtyStateAndHash) {
  GitTree tree;
  write(fs::path(tree.dir.path()) / "README.md", "changed\n");
  test::ChildResult out =
      run({"plan", recipe("    path: " + tree.dir.path() + "\n"), "--format", "json"});
  ASSERT_EQ(out.exit_code, 0) << out.err;
  auto j = nlohmann::json::parse(out.out);
  EXPECT_EQ(j["code"]["commit"], tree.commit);
  EXPECT_EQ(j["code"]["dirty"], true);
  EXPECT_EQ(j["code"]["files"], 2);
  EXPECT_THAT(j["code"]["hash"].get<std::string>(), ::testing::StartsWith("sha256:"));
  test::ChildResult text = run({"plan", recipe("    path: " + tree.dir.path() + "\n")});
  EXPECT_THAT(text.out, HasSubstr("git commit " + tree.commit.substr(0, 12) + ", dirty"));
}

// A local job gets the snapshot: every rank finds the marker through BRIDGE_CODE_DIR, and the
// registry records the commit, the dirty state and the hash of what was copied.
TEST_F(CodeCliTest, LocalJobRunsTheSnapshotAndTheRegistryRecordsIt) {
  GitTree tree;
  test::ChildResult out = run({recipe("    path: " + tree.dir.path() + "\n")});
  ASSERT_EQ(out.exit_code, 0) << out.err << out.out;
  EXPECT_THAT(out.out, HasSubstr("file check: rank 1: "));
  EXPECT_THAT(out.out, HasSubstr("src/pkg/marker.txt ok (5 bytes)"));
  test::ChildResult list = run({"list", "--format", "json"});
  auto jobs = nlohmann::json::parse(list.out);
  ASSERT_EQ(jobs.size(), 1u);
  std::string id = jobs[0]["id"];
  test::ChildResult status = run({"status", id, "--format", "json"});
  auto code = nlohmann::json::parse(status.out)[0]["code"];
  EXPECT_EQ(code["commit"], tree.commit);
  EXPECT_EQ(code["dirty"], false);
  EXPECT_EQ(code["files"], 2);
  EXPECT_THAT(code["hash"].get<std::string>(), ::testing::StartsWith("sha256:"));
  std::string dir = code["dir"];
  EXPECT_EQ(test::read_file(dir + "/src/pkg/marker.txt"), "hello\n");
  test::ChildResult text = run({"status", id});
  EXPECT_THAT(text.out, HasSubstr("code       snapshot of " + tree.dir.path() + ": git " +
                                  tree.commit.substr(0, 12) + " (clean), 2 files"));
  remove_code_snapshot(dir);  // read-only: TempDir alone cannot remove it as a user
}

}  // namespace
}  // namespace bridge
