// The runtime.code snapshot's walker (plan/code_tree.h) and copy (executors/job_dir.h) under
// hostile trees, issue 47 items 4, 6, 11 and 12: links out of the tree, files that are no
// real files, big files in fixed memory, a signal during the copy, secret-looking files, a
// read-only copy and one size for --dry-run and status.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include "executors/executor.h"
#include "executors/job_dir.h"
#include "plan/code_plan.h"
#include "plan/code_tree.h"
#include "system/cancel_token.h"
#include "system/command_runner.h"
#include "tests/integration/process_util.h"
#include "tests/support/build_paths.h"
#include "tests/support/code_testing.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The shared fixtures, under the names these tests use.
void write(const fs::path& p, const std::string& text) { test::write_tree_file(p, text); }
using test::snapshot_of;

CommandResult git(const std::string& dir, std::vector<std::string> args) {
  CommandSpec spec;
  spec.argv = {"git", "-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  return SpawnCommandRunner().run(spec);
}

void commit_all(const std::string& dir) {
  git(dir, {"init", "-q"});
  git(dir, {"add", "-A"});
  git(dir, {"commit", "-q", "-m", "one"});
}

bool has_code(const Diagnostics& diags, const std::string& code) {
  for (const auto& d : diags.items())
    if (d.code == code) return true;
  return false;
}

// Every regular file's bytes under `dir`, links not followed.
std::string all_bytes_under(const std::string& dir) {
  std::string out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && !it->is_symlink()) out += test::read_file(it->path().string());
  return out;
}

// ---------------------------------------------------------------------------------------
// Item 4: the snapshot never leaves its tree.

// A tracked `conf/` replaced by `conf -> ../outside`: git still lists conf/creds.yaml, and
// the old snapshot opened only the last component without following links, so it shipped
// outside/creds.yaml as a regular file.
TEST(CodeSnapshotTest, ADirectoryReplacedByALinkOutsideIsRefusedNotFollowed) {
  test::TempDir root;
  std::string tree = root.path() + "/tree";
  write(fs::path(tree) / "train.py", "print(1)\n");
  write(fs::path(tree) / "conf/creds.yaml", "inside\n");
  commit_all(tree);
  fs::remove_all(fs::path(tree) / "conf");
  write(fs::path(root.path()) / "outside/creds.yaml", "OUTSIDE-SECRET\n");
  fs::create_directory_symlink("../outside", fs::path(tree) / "conf");

  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree);
  EXPECT_FALSE(inspect_code(code, runner, CodeDepth::kHash, diags));
  ASSERT_TRUE(has_code(diags, "code-path-through-link"));
  EXPECT_THAT(diags.items()[0].message, HasSubstr("conf/creds.yaml"));
  EXPECT_THAT(diags.items()[0].help, HasSubstr("git add conf"));

  // The copy refuses it too (the tree may change between the listing and the copy).
  std::vector<CodeFile> files{{"conf/creds.yaml", 15, false, false}, {"train.py", 9}};
  StatusOr<CopiedCode> copied = copy_code_snapshot(tree, files, root.path() + "/code", "job-1");
  EXPECT_FALSE(copied.ok());
  EXPECT_THAT(copied.why(), HasSubstr("conf/creds.yaml"));
  EXPECT_FALSE(fs::exists(root.path() + "/code/job-1")) << "the partial copy is removed";
  EXPECT_THAT(all_bytes_under(root.path() + "/code"), Not(HasSubstr("OUTSIDE-SECRET")));
}

// A tree git does not list is listed by the same walker (it was a recursive_directory_iterator
// of its own): a directory link is an entry, never entered; `.git` is skipped; a FIFO is listed
// and then not shipped (only regular files and links are). The snapshot holds no byte from
// outside the tree.
TEST(CodeSnapshotTest, ATreeWithoutGitIsListedByTheWalkerWithoutEnteringLinks) {
  test::TempDir root;
  std::string tree = root.path() + "/tree";
  write(fs::path(tree) / "train.py", "print(1)\n");
  write(fs::path(tree) / "pkg/deep/mod.py", "x = 2\n");
  write(fs::path(tree) / ".git/config", "[core]\n");
  write(fs::path(root.path()) / "outside/creds.yaml", "OUTSIDE-SECRET\n");
  fs::create_directory_symlink("../outside", fs::path(tree) / "conf");
  ASSERT_EQ(mkfifo((tree + "/pipe").c_str(), 0600), 0);

  StatusOr<CodeTree> opened = CodeTree::open(tree);
  ASSERT_TRUE(opened.ok()) << opened.why();
  StatusOr<std::vector<std::string>> listed = opened->list_files();
  ASSERT_TRUE(listed.ok()) << listed.why();
  EXPECT_EQ(*listed, (std::vector<std::string>{"conf", "pipe", "pkg/deep/mod.py", "train.py"}));

  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree);
  code.include = {"**"};
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags));
  std::vector<std::string> shipped;
  for (const auto& f : code.inspection->files) shipped.push_back(f.path + (f.symlink ? "@" : ""));
  EXPECT_EQ(shipped, (std::vector<std::string>{"conf@", "pkg/deep/mod.py", "train.py"}));
  StatusOr<CopiedCode> copied =
      copy_code_snapshot(tree, code.inspection->files, root.path() + "/code", "job-1");
  ASSERT_TRUE(copied.ok()) << copied.why();
  EXPECT_THAT(all_bytes_under(root.path() + "/code"), Not(HasSubstr("OUTSIDE-SECRET")));
  remove_code_snapshot(copied->dir);
}

// `p -> /proc`: the old walker followed it, took sizes from lstat (0) and read to EOF, so
// max_size_mb was bypassed. Now the path is refused, and a file that reads past its size
// (procfs reports 0) is an error, whatever the limit.
TEST(CodeSnapshotTest, ProcThroughALinkOrAsTheTreeIsNeverReadPastItsSize) {
  test::TempDir root;
  fs::create_directory_symlink("/proc", fs::path(root.path()) / "p");
  StatusOr<CodeTree> tree = CodeTree::open(root.path());
  ASSERT_TRUE(tree.ok()) << tree.why();
  StatusOr<CodeEntry> through = tree->look("p/self/status");
  ASSERT_TRUE(through.ok()) << through.why();
  EXPECT_EQ(through->kind, CodeEntryKind::kThroughLink);
  EXPECT_EQ(through->link, "p");

  // The tree's root may be a link (the user's own path); below it nothing is followed.
  std::vector<CodeFile> files{{"status", 0}};
  StatusOr<CopiedCode> copied = copy_code_snapshot(
      "/proc/self", files, root.path() + "/code", "job-1", CodeCopyOptions{std::uint64_t{1} << 20});
  ASSERT_FALSE(copied.ok());
  EXPECT_THAT(copied.why(), HasSubstr("more bytes than its size"));
  EXPECT_FALSE(fs::exists(root.path() + "/code/job-1"));
}

// A link inside the tree is shipped as a link (its target text), never followed, wherever
// it points; only regular files are read.
TEST(CodeSnapshotTest, ALinkIsShippedAsALinkAndItsTargetIsNeverRead) {
  test::TempDir root;
  std::string tree = root.path() + "/tree";
  write(fs::path(tree) / "a.py", "a\n");
  write(fs::path(root.path()) / "outside.txt", "OUTSIDE-SECRET\n");
  fs::create_symlink("../outside.txt", fs::path(tree) / "peek.txt");
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree);
  code.include = {"**"};
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags));
  StatusOr<CopiedCode> copied =
      copy_code_snapshot(tree, code.inspection->files, root.path() + "/code", "job-1");
  ASSERT_TRUE(copied.ok()) << copied.why();
  EXPECT_TRUE(fs::is_symlink(copied->dir + "/peek.txt"));
  EXPECT_EQ(fs::read_symlink(copied->dir + "/peek.txt").string(), "../outside.txt");
  EXPECT_THAT(all_bytes_under(copied->dir), Not(HasSubstr("OUTSIDE-SECRET")));
  remove_code_snapshot(copied->dir);
}

// ---------------------------------------------------------------------------------------
// Item 6: each file is read and hashed in fixed memory.

TEST(CodeSnapshotTest, StreamingGivesTheHashOfTheWholeFile) {
  test::TempDir dir;
  std::string big(3 * kCodeChunkBytes + 123, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 91);
  write(fs::path(dir.path()) / "big.bin", big);
  StatusOr<CodeTree> tree = CodeTree::open(dir.path());
  ASSERT_TRUE(tree.ok());
  CodeFile file{"big.bin", big.size()};
  Sha256 streamed, whole;
  CodeByteBudget budget{std::uint64_t{1} << 30};
  size_t chunks = 0;
  Status ok = tree->stream(
      file, streamed,
      [&](std::string_view chunk) {
        EXPECT_LE(chunk.size(), kCodeChunkBytes);
        ++chunks;
        return Status();
      },
      nullptr, budget);
  ASSERT_TRUE(ok.ok()) << ok.why();
  hash_code_file(whole, file, big);
  EXPECT_EQ(streamed.hex(), whole.hex());
  EXPECT_EQ(chunks, 4u);
  EXPECT_EQ(budget.read, big.size());

  CodeByteBudget small{1000};  // the limit counts the bytes of the open file, not a listing
  EXPECT_FALSE(tree->stream(file, streamed, {}, nullptr, small).ok());
  EXPECT_EQ(small.wanted, big.size());
}

// The reproducer: a 600 MB file cost 1.05 GB for --dry-run. A 64 MiB sparse file (no disk
// space) must cost far less than its size; the old code held it once or twice over. The
// bound is over the same dry-run of a 1-byte file, so that a build whose baseline is larger
// (the sanitizers' shadow memory) measures the same thing.
TEST(CodeSnapshotTest, DryRunHashesABigFileInFixedMemory) {
  test::TempDir dir, home;
  // Peak RSS (KiB) of a dry-run that ships a tree holding one file of `bytes`.
  auto peak_rss = [&](const std::string& name, off_t bytes, const std::string& shown) {
    std::string tree = dir.path() + "/" + name;
    fs::create_directories(tree);
    std::string file = tree + "/weights.bin";
    std::ofstream(file).close();
    EXPECT_EQ(truncate(file.c_str(), bytes), 0);
    std::string recipe = dir.write(name + ".yaml",
                                   "name: big\ncluster: {gpu: h100, num_gpus: 2, gpus_per_node: "
                                   "2}\nruntime:\n  launcher: direct\n  command: [bridge-probe]\n"
                                   "  code: {path: " +
                                       tree + ", include: ['**'], max_size_mb: 100}\n");
    pid_t pid = test::start_background({BRIDGE_LAUNCH_BIN, "--dry-run", recipe},
                                       {{"HOME", home.path()}}, dir.path() + "/" + name + ".txt");
    int status = 0;
    rusage usage{};
    EXPECT_EQ(wait4(pid, &status, 0, &usage), pid);
    std::string said = test::read_file(dir.path() + "/" + name + ".txt");
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << said;
    EXPECT_THAT(said, HasSubstr(shown));
    return static_cast<long>(usage.ru_maxrss);
  };
  const long small = peak_rss("small", 1, "would copy 1 files");
  const long big = peak_rss("big", off_t{64} << 20, "would copy 1 files, 64.0 MiB");
  EXPECT_LT(big, small + 16 * 1024)
      << "peak RSS in KiB: " << big << " for 64 MiB, " << small << " for 1 byte";
}

// ---------------------------------------------------------------------------------------
// Item 11: a cancelled copy (the signal handler's token) leaves nothing behind.

TEST(CodeSnapshotTest, ACancelledCopyRemovesWhatItWrote) {
  test::TempDir dir;
  std::string tree = dir.path() + "/tree";
  std::vector<CodeFile> files;
  for (int i = 0; i < 4; ++i) {
    std::string name = "f" + std::to_string(i) + ".bin";
    write(fs::path(tree) / "sub" / name, std::string(1000, 'x'));
    files.push_back({"sub/" + name, 1000});
  }
  CancelToken token;
  token.cancel();
  StatusOr<CopiedCode> copied = copy_code_snapshot(tree, files, dir.path() + "/code", "job-1",
                                                   CodeCopyOptions{1 << 20, &token});
  ASSERT_FALSE(copied.ok());
  EXPECT_THAT(copied.why(), HasSubstr("interrupted"));
  EXPECT_FALSE(fs::exists(dir.path() + "/code/job-1"));
}

// The reproducer: SIGINT/SIGTERM/SIGHUP while the real launcher copies a large tree killed
// it by the default action, leaving code/<id> and jobs/.<id>.reservation. Now it stops with
// exit 130 and a message, having removed both, and runs nothing.
class CodeSnapshotSignalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    bool registered = false;
    for (const auto& e : executor_registry()) registered |= std::string(e.name) == "slurm";
    if (!registered) GTEST_SKIP() << "the slurm executor is not registered in this build";
    fs::create_directories(bin());
    std::string sbatch = dir_.write("bin/sbatch",
                                    "#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\n"
                                    "cat >/dev/null\necho 4646\n");
    chmod(sbatch.c_str(), 0755);
    // Sparse files: the copy reads and hashes 512 MiB (seconds), the disk gets little.
    fs::create_directories(tree());
    for (int i = 0; i < 8; ++i) {
      std::string f = tree() + "/shard" + std::to_string(i) + ".bin";
      std::ofstream(f).close();
      ASSERT_EQ(truncate(f.c_str(), 64 << 20), 0);
    }
    recipe_ = dir_.write("recipe.yaml",
                         "name: copied\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
                         "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n"
                         "  code: {path: " +
                             tree() +
                             ", include: ['**'], max_size_mb: 1024}\n"
                             "executor:\n  default: slurm\n  slurm: {account: acct, partition: "
                             "batch, job_dir: " +
                             dir_.path() + "/slurm-jobs}\n");
  }
  std::string bin() const { return dir_.path() + "/bin"; }
  std::string tree() const { return dir_.path() + "/tree"; }
  std::string code_dir() const { return dir_.path() + "/slurm-jobs/copied/code"; }
  std::map<std::string, std::string> env() const {
    const char* path = std::getenv("PATH");
    return {{"PATH", bin() + ":" + (path ? path : "/usr/bin:/bin")},
            {"BRIDGE_LAUNCH_STATE_DIR", dir_.path() + "/state"},
            {"HOME", dir_.path()},
            {"NO_COLOR", "1"}};
  }
  bool copy_started() const {
    std::error_code ec;
    return fs::exists(code_dir(), ec) && !fs::is_empty(code_dir(), ec);
  }
  // The entries of `dir`, the registry's lock file aside.
  static int entries_in(const std::string& dir) {
    int n = 0;
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec))
      n += it->path().filename() != "lock";
    return n;
  }
  test::TempDir dir_;
  std::string recipe_;
};

TEST_F(CodeSnapshotSignalTest, ASignalDuringTheCopyRemovesTheCopyAndTheReservation) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    fs::path out = dir_.path() + "/launch-" + std::to_string(sig) + ".txt";
    pid_t launcher = test::start_background({BRIDGE_LAUNCH_BIN, recipe_}, env(), out);
    for (int i = 0; i < 6000 && !copy_started(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(copy_started()) << test::read_file(out);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    kill(launcher, sig);
    int code = test::wait_exit(launcher, 60);
    std::string said = test::read_file(out);
    EXPECT_EQ(code, 130) << said;
    EXPECT_THAT(said, HasSubstr("interrupted while copying the snapshot"));
    EXPECT_EQ(entries_in(code_dir()), 0) << "the partial snapshot is removed";
    EXPECT_EQ(entries_in(dir_.path() + "/state/jobs"), 0) << "the reservation is released";
    EXPECT_FALSE(fs::exists(bin() + "/ran")) << "nothing was submitted";
  }
}

// A signal at any moment of a launch that copies a snapshot leaves either nothing (no
// registry entry or reservation, no snapshot, sbatch never ran) or a submitted and recorded
// job with its snapshot: never a half. The copy has its handler; from the end of the copy to
// the registry entry the signals are held back (a signal that arrived before the scheduler
// got anything stops the launch with exit 130). Swept over the whole launch at 60 points,
// so that some signals fall between the copy and the submission.
TEST_F(CodeSnapshotSignalTest, ASignalAtAnyMomentLeavesNothingOrARecordedJob) {
  std::string small = dir_.path() + "/small";
  fs::create_directories(small);
  for (int i = 0; i < 40; ++i) dir_.write("small/f" + std::to_string(i) + ".py", "x = 1\n");
  std::string sbatch = dir_.write("bin/sbatch",
                                  "#!/bin/sh\necho ran >>\"$(dirname \"$0\")/ran\"\n"
                                  "cat >/dev/null\necho 4646\n");
  chmod(sbatch.c_str(), 0755);
  auto sbatch_runs = [&] {
    std::string ran = test::read_file(bin() + "/ran");
    return static_cast<int>(std::count(ran.begin(), ran.end(), '\n'));
  };
  auto write_recipe = [&](int index) {
    std::string run = dir_.path() + "/run" + std::to_string(index);
    dir_.write("run" + std::to_string(index) + ".yaml",
               "name: copied\ncluster: {num_gpus: 4, gpus_per_node: 2}\n"
               "runtime:\n  command: [/bin/true]\n  pass_overrides: false\n  code: {path: " +
                   small +
                   ", include: ['**']}\nexecutor:\n  default: slurm\n  slurm: {account: a, "
                   "partition: b, job_dir: " +
                   run + "/jobs}\n");
    return run;
  };
  auto start = [&](const std::string& run) {
    std::map<std::string, std::string> environment = env();
    environment["BRIDGE_LAUNCH_STATE_DIR"] = run + "/state";
    return test::start_background({BRIDGE_LAUNCH_BIN, run + ".yaml"}, environment, run + ".txt");
  };
  // How long a launch takes to reach sbatch on this build (a sanitizer build is several times
  // slower): the signals are spread over one and a half times that.
  const std::string timed = write_recipe(1000);
  const int before_timed = sbatch_runs();
  const auto t0 = std::chrono::steady_clock::now();
  pid_t first = start(timed);
  while (sbatch_runs() == before_timed &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  const auto to_submit =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  ASSERT_EQ(test::wait_exit(first, 60), 0) << test::read_file(timed + ".txt");
  constexpr int kPoints = 60;
  int halves = 0, stopped = 0, submissions = 0;
  for (int i = 0; i < kPoints; ++i) {
    const auto delay = to_submit * 3 / 2 * i / kPoints;
    SCOPED_TRACE("SIGTERM after " + std::to_string(delay.count()) + " us");
    const std::string run = write_recipe(i);
    const int sbatch_before = sbatch_runs();
    pid_t launcher = start(run);
    std::this_thread::sleep_for(delay);
    kill(launcher, SIGTERM);
    int code = test::wait_exit(launcher, 60);
    std::string said = test::read_file(run + ".txt");
    const bool submitted = sbatch_runs() > sbatch_before;
    const int entries = entries_in(run + "/state/jobs");
    const int snapshots = entries_in(run + "/jobs/copied/code");
    if (submitted) {
      EXPECT_EQ(entries, 1) << said;
      EXPECT_EQ(snapshots, 1) << said;
      // 130: held back during the submission and taken then; 143: the default action after
      // the job was recorded (the record and its snapshot are what must be whole).
      EXPECT_TRUE(code == 0 || code == 130 || code == 143) << code << said;
    } else {
      EXPECT_EQ(entries, 0) << "exit " << code << ": " << said;
      EXPECT_EQ(snapshots, 0) << "exit " << code << ": " << said;
    }
    halves += (!submitted && (entries != 0 || snapshots != 0)) ? 1 : 0;
    (submitted ? submissions : stopped) += 1;
  }
  EXPECT_EQ(halves, 0);
  // The sweep spans the launch: early signals stop it, late ones find the job submitted.
  EXPECT_GT(stopped, 0);
  EXPECT_GT(submissions, 0);
}

// ---------------------------------------------------------------------------------------
// Item 12: secrets, a read-only copy, one size.

TEST(CodeSnapshotTest, SecretLookingFilesPickedByAGlobAreRefusedByName) {
  test::TempDir dir;
  write(fs::path(dir.path()) / "train.py", "a\n");
  write(fs::path(dir.path()) / ".env", "TOKEN=x\n");
  write(fs::path(dir.path()) / "keys/id_rsa", "-----BEGIN\n");
  write(fs::path(dir.path()) / ".env.example", "TOKEN=\n");  // a template, not a secret
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(dir.path());
  code.include = {"**"};
  EXPECT_FALSE(inspect_code(code, runner, CodeDepth::kList, diags));
  std::string said;
  for (const auto& d : diags.items()) said += d.code + ": " + d.message + " | " + d.help + "\n";
  EXPECT_THAT(said, HasSubstr("code-secret-file: .env looks like a secret"));
  EXPECT_THAT(said, HasSubstr("code-secret-file: keys/id_rsa looks like a secret"));
  EXPECT_THAT(said, HasSubstr("include: [..., \"keys/id_rsa\"]"));
  EXPECT_THAT(said, Not(HasSubstr(".env.example")));

  Diagnostics on_purpose;  // named without a wildcard: shipped
  CodePlan named = snapshot_of(dir.path());
  named.include = {"**", ".env", "keys/id_rsa"};
  EXPECT_TRUE(inspect_code(named, runner, CodeDepth::kList, on_purpose));
  EXPECT_FALSE(on_purpose.has_errors());
}

TEST(CodeSnapshotTest, ATrackedSecretLookingFileShipsWithAWarning) {
  test::TempDir dir;
  write(fs::path(dir.path()) / "train.py", "a\n");
  write(fs::path(dir.path()) / "certs/server.pem", "pem\n");
  commit_all(dir.path());
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(dir.path());
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kList, diags));
  ASSERT_EQ(diags.items().size(), 1u);
  EXPECT_EQ(diags.items()[0].code, "code-secret-file");
  EXPECT_EQ(diags.items()[0].severity, Severity::kWarning);
  EXPECT_THAT(diags.items()[0].message, HasSubstr("certs/server.pem"));
}

TEST(CodeSnapshotTest, TheCopyIsReadOnlyAndDryRunAndStatusAgreeOnItsSize) {
  test::TempDir dir;
  std::string tree = dir.path() + "/tree";
  write(fs::path(tree) / "pkg/a.py", "print(1)\n");
  write(fs::path(tree) / "run.sh", "#!/bin/sh\n");
  fs::permissions(fs::path(tree) / "run.sh", fs::perms::owner_exec, fs::perm_options::add);
  fs::create_symlink("pkg/a.py", fs::path(tree) / "alias-with-a-long-name.py");
  commit_all(tree);
  SpawnCommandRunner runner;
  Diagnostics diags;
  CodePlan code = snapshot_of(tree);
  ASSERT_TRUE(inspect_code(code, runner, CodeDepth::kHash, diags));
  StatusOr<CopiedCode> copied =
      copy_code_snapshot(tree, code.inspection->files, dir.path() + "/code", "job-1");
  ASSERT_TRUE(copied.ok()) << copied.why();
  // --dry-run shows the inspection's size, status the copy's: a link holds no bytes.
  EXPECT_EQ(code.inspection->bytes, copied->bytes);
  EXPECT_EQ(copied->bytes, 9u + 10u);
  EXPECT_EQ(copied->hash, code.inspection->hash);
  const auto writable = fs::perms::owner_write | fs::perms::group_write | fs::perms::others_write;
  for (std::string p : {"", "/pkg", "/pkg/a.py", "/run.sh"}) {
    SCOPED_TRACE(p);
    EXPECT_EQ(fs::status(copied->dir + p).permissions() & writable, fs::perms::none);
  }
  EXPECT_NE(fs::status(copied->dir + "/run.sh").permissions() & fs::perms::owner_exec,
            fs::perms::none);
  remove_code_snapshot(copied->dir);  // read-only directories are made writable to remove
  EXPECT_FALSE(fs::exists(copied->dir));
}

}  // namespace
}  // namespace bridge
