// The job registry (atomic, lock-protected, damage-tolerant) and the experiment maths of
// `compare` (iteration parsing, steady-state window statistics, knob differences).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "jobs/job_record.h"
#include "jobs/registry.h"
#include "model/compare.h"
#include "plan/plan_output.h"
#include "tests/support/build_paths.h"
#include "tests/support/fake_services.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("bl-registry-" + std::to_string(getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A registry on the test's fake clock, waits and random bits.
  JobRegistry fake_registry(std::chrono::milliseconds lock_timeout = std::chrono::seconds(30)) {
    return JobRegistry(dir_.string(), seams_.registry_seams(), lock_timeout);
  }
  // A registry on the real clock, for processes that really contend for its lock.
  JobRegistry real_registry() {
    return JobRegistry(dir_.string(),
                       {real_clock_, real_sleeper_, real_random_, seams_.log.logger});
  }

  static JobRecord record(const std::string& id, const std::string& when) {
    JobRecord r;
    r.id = id;
    r.name = "demo";
    r.executor = "slurm";
    r.scheduler_id = "4242";
    r.submitted_at = when;
    r.state = JobState::kRunning;
    r.knobs = {{"model.tensor_model_parallel_size", "4"}};
    return r;
  }
  // The record a launch writes as its pending entry: no scheduler id yet.
  static JobRecord submitting(const std::string& id) {
    JobRecord r = record(id, "2026-01-01T00:00:00.000Z");
    r.scheduler_id = "";
    r.state = JobState::kPending;
    r.state_detail = "submitting";
    return r;
  }
  fs::path dir_;
  testing::TestServices seams_;
  SystemClock real_clock_;
  ThreadSleeper real_sleeper_;
  SystemRandom real_random_;
};

// The state root (host_env.h): BRIDGE_LAUNCH_STATE_DIR, else an absolute XDG_STATE_HOME,
// else ~/.local/state; the registry is its jobs/ subdirectory.
TEST(StateRoot, FollowsTheOverrideThenXdgThenHome) {
  MapEnvironment env(std::map<std::string, std::string>{{"HOME", "/home/u"}});
  EXPECT_EQ(state_root(env), "/home/u/.local/state/bridge-launch");
  env.set("XDG_STATE_HOME", "relative/state");  // invalid by the XDG rules: ignored
  EXPECT_EQ(state_root(env), "/home/u/.local/state/bridge-launch");
  env.set("XDG_STATE_HOME", "/xdg");
  EXPECT_EQ(state_root(env), "/xdg/bridge-launch");
  env.set("BRIDGE_LAUNCH_STATE_DIR", "");
  EXPECT_EQ(state_root(env), "/xdg/bridge-launch");
  env.set("BRIDGE_LAUNCH_STATE_DIR", "/scratch/bl");
  EXPECT_EQ(state_root(env), "/scratch/bl");
  EXPECT_EQ(JobRegistry::default_dir(env), "/scratch/bl");
}

// Ids are unique by construction: many launches of one recipe in the same second (an ablate
// grid) each get their own id, reserved with O_EXCL under the registry lock, even though the
// random part of a candidate id has only 16 bits.
TEST_F(RegistryTest, ReservedIdsAreUniqueWithinOneSecond) {
  JobRegistry reg = fake_registry();
  // The clock stands still and every random value comes twice: each id after the first
  // collides once with the one before it.
  for (uint32_t i = 0; i < 800; ++i) seams_.random.next_values.push_back(i / 2);
  std::set<std::string> ids;
  Diagnostics diags;
  for (int i = 0; i < 400; ++i) {
    std::optional<std::string> id = reg.reserve_id("grid", "{}\n", diags);
    ASSERT_TRUE(id) << i;
    EXPECT_TRUE(ids.insert(*id).second) << "id issued twice: " << *id;
  }
  EXPECT_FALSE(diags.has_errors());
  // Reservations are dot files: `list` does not show them as jobs.
  EXPECT_TRUE(reg.list(diags).empty());
  reg.release_id(*ids.begin());
  EXPECT_FALSE(fs::exists(dir_ / "jobs" / ("." + *ids.begin() + ".reservation")));
}

// The launcher renders its job with a candidate id before anything exists on disk, then
// reserves that id; when another launch took it meanwhile, it gets another one (and renders
// again).
TEST_F(RegistryTest, APreferredIdIsReservedWhenFreeAndAnotherWhenTaken) {
  JobRegistry reg = fake_registry();
  seams_.random.next_values = {7, 7, 7, 9};
  const std::string candidate = reg.candidate_id("grid");
  EXPECT_FALSE(fs::exists(dir_ / "jobs")) << "a candidate id creates nothing";
  Diagnostics diags;
  std::optional<std::string> first = reg.reserve_id("grid", "", diags, candidate);
  ASSERT_TRUE(first);
  EXPECT_EQ(*first, candidate);
  EXPECT_TRUE(fs::exists(dir_ / "jobs" / ("." + candidate + ".reservation")));
  // The same candidate again (two launches drew it): the second gets a fresh id.
  std::optional<std::string> second = reg.reserve_id("grid", "", diags, candidate);
  ASSERT_TRUE(second);
  EXPECT_NE(*second, candidate);
  EXPECT_FALSE(diags.has_errors());
}

// A launcher killed between reserving its id and writing the pending entry leaves its
// reservation (6 of 30 kills during submission did). Nothing was submitted for it (the
// scheduler gets a job only after the pending entry replaced the reservation), so `list`
// (and with it status, logs, why) removes reservations older than an hour; a fresh one,
// whose launcher may be writing its entry right now, stays.
TEST_F(RegistryTest, StaleReservationsAreRemovedAndFreshOnesKept) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> stale = reg.reserve_id("killed", "", diags);
  std::optional<std::string> fresh = reg.reserve_id("running", "", diags);
  ASSERT_TRUE(stale && fresh);
  fs::path stale_file = dir_ / "jobs" / ("." + *stale + ".reservation");
  fs::path fresh_file = dir_ / "jobs" / ("." + *fresh + ".reservation");
  // Ages count from the registry's clock (a fake one here), not from the real time.
  auto now = std::chrono::file_clock::from_sys(seams_.clock.now());
  fs::last_write_time(stale_file, now - kStaleReservationAge - std::chrono::minutes(1));
  fs::last_write_time(fresh_file, now - kStaleReservationAge / 2);
  // Other dot files are not reservations and stay, whatever their age.
  std::ofstream(dir_ / "jobs" / ".notes") << "mine\n";
  fs::last_write_time(dir_ / "jobs" / ".notes", now - std::chrono::hours(100));
  EXPECT_TRUE(reg.list(diags).empty());
  EXPECT_FALSE(fs::exists(stale_file)) << "a stale reservation was left";
  EXPECT_TRUE(fs::exists(fresh_file)) << "a fresh reservation was removed";
  EXPECT_TRUE(fs::exists(dir_ / "jobs" / ".notes"));
  EXPECT_FALSE(diags.has_errors());
}

// A lock held by another process (a stuck launch, `flock` by hand) does not block a launch
// silently and forever: the write gives up after the timeout, naming the lock.
TEST_F(RegistryTest, AHeldLockIsAClearErrorAfterTheTimeout) {
  fs::create_directories(dir_);
  int held = open((dir_ / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  JobRegistry reg = fake_registry(std::chrono::milliseconds(200));
  Diagnostics diags;
  EXPECT_FALSE(reg.reserve_id("locked", "{}\n", diags).has_value());
  ASSERT_TRUE(diags.has_errors());
  EXPECT_THAT(diags.items()[0].message, HasSubstr("is held by another process (waited 200 ms)"));
  close(held);
  Diagnostics after;
  EXPECT_TRUE(reg.reserve_id("locked", "{}\n", after).has_value());
}

// The submission's entry: durable and listed (PENDING, no scheduler id) before the scheduler
// can take the job; the commit writes only the fields that changed, into the reserved space
// (the file does not grow), and `list` reads the committed record; a later put turns the
// entry back into plain JSON.
TEST_F(RegistryTest, APendingEntryIsListedAndTheCommitAddsTheSchedulersAnswer) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> id = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(id);
  JobRecord r = submitting(*id);
  std::optional<PendingEntry> pending = reg.create_pending(r, diags);
  ASSERT_TRUE(pending) << (diags.items().empty() ? "" : diags.items()[0].message);
  fs::path entry = dir_ / "jobs" / (*id + ".json");
  EXPECT_FALSE(fs::exists(dir_ / "jobs" / ("." + *id + ".reservation")));
  std::vector<JobRecord> listed = reg.list(diags);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].scheduler_id, "");
  EXPECT_EQ(listed[0].state_detail, "submitting");
  auto size = fs::file_size(entry);

  r.scheduler_id = "4242";
  r.job_dir = "/shared/jobs/demo/" + *id;
  r.state_detail = "submitted";
  ASSERT_TRUE(reg.commit_pending(*pending, r, diags));
  EXPECT_EQ(fs::file_size(entry), size) << "the commit must fit the reserved space";
  std::string text = test::read_file(entry);
  EXPECT_THAT(text, HasSubstr("\n{\"scheduler_id\":\"4242\",\"job_dir\":"));
  EXPECT_THAT(text, Not(HasSubstr("\"knobs\":{\"model.tensor_model_parallel_size\":\"4\"}}\n{")))
      << "only the changed fields are committed";
  listed = reg.list(diags);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].scheduler_id, "4242");
  EXPECT_EQ(listed[0].job_dir, r.job_dir);
  EXPECT_EQ(listed[0].state_detail, "submitted");
  EXPECT_EQ(listed[0].knobs, r.knobs);
  EXPECT_FALSE(diags.has_errors());

  r.state = JobState::kRunning;
  ASSERT_TRUE(reg.put(r, diags));
  EXPECT_TRUE(nlohmann::json::accept(test::read_file(entry)));
  EXPECT_EQ(reg.list(diags).at(0).state, JobState::kRunning);
}

// The launch writes the pending entry without the knobs and the plan (they are computed while
// the scheduler command works): flush_pending adds them as a line of their own, once, and
// the commit that follows writes only the scheduler's answer.
TEST_F(RegistryTest, TheFlushAddsTheKnobsAndThePlanOnceAndTheCommitOnlyTheAnswer) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> id = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(id);
  JobRecord r = submitting(*id);
  r.knobs.clear();
  std::optional<PendingEntry> pending = reg.create_pending(r, diags);
  ASSERT_TRUE(pending);
  EXPECT_FALSE(pending->flushed);
  ASSERT_EQ(reg.list(diags).size(), 1u) << "listed before it is flushed";
  EXPECT_TRUE(reg.list(diags).at(0).plan_json.is_null());

  r.knobs = {{"model.tensor_model_parallel_size", "4"}};
  r.plan_json = {{"executor", "slurm"}, {"ranks", 16}};
  ASSERT_TRUE(reg.flush_pending(*pending, r, diags));
  EXPECT_TRUE(pending->flushed);
  fs::path entry = dir_ / "jobs" / (*id + ".json");
  auto size = fs::file_size(entry);
  ASSERT_TRUE(reg.flush_pending(*pending, r, diags));
  EXPECT_EQ(fs::file_size(entry), size) << "a second flush adds nothing";
  std::vector<JobRecord> listed = reg.list(diags);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].knobs, r.knobs);
  EXPECT_EQ(listed[0].plan_json, r.plan_json);

  r.scheduler_id = "4242";
  r.state_detail = "submitted";
  ASSERT_TRUE(reg.commit_pending(*pending, r, diags));
  std::string text = test::read_file(entry);
  size_t plans = 0;
  for (size_t at = text.find("\"plan\":"); at != std::string::npos;
       at = text.find("\"plan\":", at + 1))
    ++plans;
  EXPECT_EQ(plans, 2u) << "the first line's null and the added line; the commit repeats none";
  EXPECT_THAT(text, HasSubstr("{\"scheduler_id\":\"4242\",\"state_detail\":\"submitted\"}"));
  listed = reg.list(diags);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].scheduler_id, "4242");
  EXPECT_EQ(listed[0].plan_json, r.plan_json);
  EXPECT_EQ(listed[0].knobs, r.knobs);
  EXPECT_FALSE(diags.has_errors());
}

// A commit cut short by a crash (a torn line, garbage) leaves the pending record readable;
// a commit larger than the reserved space is appended instead.
TEST_F(RegistryTest, ADamagedCommitLeavesThePendingRecordAndALongOneIsAppended) {
  JobRecord r = record("demo-1", "2026-01-01T00:00:00.000Z");
  r.scheduler_id = "";
  std::string line = job_record_to_json(r).dump() + "\n";
  for (std::string tail : {std::string("{\"scheduler_id\":\"42"), std::string("\x01\xff garbage"),
                           std::string(100, ' ') + "\n[1]\n"}) {
    std::optional<JobRecord> read = read_job_entry(line + tail + std::string(50, ' ') + "\n");
    ASSERT_TRUE(read) << tail;
    EXPECT_EQ(read->scheduler_id, "");
    EXPECT_EQ(read->id, "demo-1");
  }
  EXPECT_EQ(read_job_entry(line + "{\"scheduler_id\":\"42\"}\n   \n")->scheduler_id, "42");
  EXPECT_FALSE(read_job_entry("{\"id\": 1}\n{\"scheduler_id\":\"42\"}\n").has_value());

  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> id = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(id);
  r.id = *id;
  std::optional<PendingEntry> pending = reg.create_pending(r, diags);
  ASSERT_TRUE(pending);
  r.scheduler_id = "77";
  r.job_dir = "/" + std::string(9000, 'd');
  ASSERT_TRUE(reg.commit_pending(*pending, r, diags));
  std::vector<JobRecord> listed = reg.list(diags);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].scheduler_id, "77");
  EXPECT_EQ(listed[0].job_dir, r.job_dir);
  // A job the scheduler did not take: its pending entry goes away.
  reg.drop_pending(*pending);
  EXPECT_TRUE(reg.list(diags).empty());
}

// A pending entry never overwrites an entry, and an unwritable registry is refused before
// anything is submitted.
TEST_F(RegistryTest, APendingEntryNeverOverwritesAnEntry) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> id = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(id);
  ASSERT_TRUE(reg.put(record(*id, "2026-01-01T00:00:00.000Z"), diags));
  Diagnostics refused;
  EXPECT_FALSE(reg.create_pending(record(*id, "2026-01-01T00:00:01.000Z"), refused));
  ASSERT_TRUE(refused.has_errors());
  EXPECT_THAT(refused.items()[0].message, HasSubstr("nothing was submitted"));
  EXPECT_EQ(reg.list(diags).at(0).submitted_at, "2026-01-01T00:00:00.000Z");
}

TEST_F(RegistryTest, CreatingAnEntryNeverOverwritesAnExistingOne) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  std::optional<std::string> id = reg.reserve_id("demo", "{}\n", diags);
  ASSERT_TRUE(id);
  JobRecord first = record(*id, "2026-01-01T00:00:00.000Z");
  ASSERT_TRUE(reg.put(first, diags, /*create=*/true)) << diags.items().size();
  EXPECT_FALSE(fs::exists(dir_ / "jobs" / ("." + *id + ".reservation")));
  JobRecord second = record(*id, "2026-01-01T00:00:01.000Z");
  second.scheduler_id = "9999";
  Diagnostics refused;
  EXPECT_FALSE(reg.put(second, refused, /*create=*/true));
  ASSERT_TRUE(refused.has_errors());
  EXPECT_THAT(refused.items()[0].message, HasSubstr("never overwritten"));
  EXPECT_EQ(reg.list(diags).at(0).scheduler_id, "4242");
  // An update of the job's own entry is still possible.
  first.state = JobState::kSucceeded;
  EXPECT_TRUE(reg.put(first, diags));
}

TEST_F(RegistryTest, PutListAndFindByIdPrefixOrSchedulerId) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  ASSERT_TRUE(reg.put(record("demo-20261129-100000-aaaa", "2026-11-29T10:00:00.000Z"), diags));
  JobRecord b = record("other-20261129-100001-bbbb", "2026-11-29T10:00:01.000Z");
  b.scheduler_id = "777";
  ASSERT_TRUE(reg.put(b, diags));
  auto all = reg.list(diags);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, "demo-20261129-100000-aaaa");  // oldest first
  EXPECT_EQ(all[0].knobs.at("model.tensor_model_parallel_size"), "4");
  EXPECT_EQ(reg.find("demo-2026", diags)->id, "demo-20261129-100000-aaaa");
  EXPECT_EQ(reg.find("777", diags)->id, "other-20261129-100001-bbbb");
  EXPECT_FALSE(diags.has_errors());
  EXPECT_FALSE(reg.find("nope", diags));
  EXPECT_TRUE(diags.has_code("unknown-job"));
}

// `status demo` means the latest job of the recipe named demo.
TEST_F(RegistryTest, ARecipeNameSelectsItsLatestJob) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  ASSERT_TRUE(reg.put(record("demo-20261129-100000-aaaa", "2026-11-29T10:00:00.000Z"), diags));
  ASSERT_TRUE(reg.put(record("demo-20261129-110000-cccc", "2026-11-29T11:00:00.000Z"), diags));
  ASSERT_TRUE(reg.put(record("demo-20261129-103000-bbbb", "2026-11-29T10:30:00.000Z"), diags));
  auto latest = reg.find("demo", diags);
  ASSERT_TRUE(latest) << diags.items().size();
  EXPECT_EQ(latest->id, "demo-20261129-110000-cccc");
  EXPECT_FALSE(diags.has_errors());
}

TEST_F(RegistryTest, AmbiguousPrefixIsAnErrorListingTheCandidates) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  reg.put(record("demo-1", "a"), diags);
  reg.put(record("demo-2", "b"), diags);
  EXPECT_FALSE(reg.find("demo-", diags));
  ASSERT_TRUE(diags.has_code("ambiguous-job"));
  EXPECT_THAT(diags.items().back().message, HasSubstr("demo-1"));
}

TEST_F(RegistryTest, CorruptAndForeignEntriesAreReportedAndSkipped) {
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  reg.put(record("good", "2026"), diags);
  std::ofstream(dir_ / "jobs" / "torn.json") << "{\"format\": \"bridge-launch-job/1\", \"id\": ";
  std::ofstream(dir_ / "jobs" / "foreign.json") << "{\"hello\": \"world\"}";
  std::ofstream(dir_ / "jobs" / "binary.json") << std::string("\0\xff\xfe", 3);
  Diagnostics list_diags;
  auto all = reg.list(list_diags);
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].id, "good");
  EXPECT_EQ(list_diags.count(Severity::kWarning), 3u);
  EXPECT_FALSE(list_diags.has_errors());
}

TEST_F(RegistryTest, ConcurrentWritersNeverCorruptAnEntry) {
  // 8 processes rewrite the same 4 entries 50 times each, with payloads of varying size.
  constexpr int kWriters = 8, kRounds = 50;
  std::vector<pid_t> kids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = fork();
    if (pid == 0) {
      JobRegistry reg = real_registry();
      for (int i = 0; i < kRounds; ++i) {
        JobRecord r = record("job-" + std::to_string(i % 4), "2026");
        r.state_detail = std::string(static_cast<size_t>(100 + (w * 997 + i * 131) % 20000),
                                     static_cast<char>('a' + w));
        Diagnostics d;
        if (!reg.put(r, d)) _exit(1);
      }
      _exit(0);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  auto all = reg.list(diags);
  EXPECT_EQ(all.size(), 4u);
  EXPECT_EQ(diags.count(Severity::kWarning), 0u) << "a torn entry was read";
  for (const auto& r : all) {
    ASSERT_FALSE(r.state_detail.empty());
    // Every entry is one writer's complete payload, never a mix.
    EXPECT_EQ(r.state_detail.find_first_not_of(r.state_detail[0]), std::string::npos);
  }
  for (const auto& e : fs::directory_iterator(dir_ / "jobs"))
    EXPECT_EQ(e.path().extension(), ".json") << "temporary file left behind: " << e.path();
}

TEST_F(RegistryTest, UnwritableRegistryIsAnErrorNotACrash) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "jobs") << "a file where the jobs directory should be";
  JobRegistry reg = fake_registry();
  Diagnostics diags;
  EXPECT_FALSE(reg.put(record("x", "2026"), diags));
  EXPECT_TRUE(diags.has_code("registry-write"));
}

// Found by fuzz_registry_entry: a field of another type is a damaged entry (skipped with a
// warning by `list`), never an exception.
TEST(RegistryEntries, FieldsOfAnotherTypeAreADamagedEntryNotACrash) {
  EXPECT_FALSE(job_record_from_json(nlohmann::json::parse(R"({"format": 1})")).has_value());
  EXPECT_FALSE(
      job_record_from_json(nlohmann::json::parse(R"({"format": "bridge-launch-job/1", "id": 7})"))
          .has_value());
}

// Deterministic: two system-made ids in the same second collide once in 65,536 (reserve_id
// then tries another), which made this test flaky when it compared two of them.
TEST(RegistryIds, NewIdsAreSafeAndDistinct) {
  std::string a = new_job_id("my job/../x", 1764590400, 0x12ab);
  std::string b = new_job_id("my job/../x", 1764590400, 0x12ac);
  EXPECT_EQ(a, new_job_id("my job/../x", 1764590400, 0x12ab));
  EXPECT_THAT(a, ::testing::EndsWith("-12ab"));
  EXPECT_THAT(new_job_id("x", 1764590400, 7), ::testing::MatchesRegex("x-[0-9]{8}-[0-9]{6}-0007"));
  EXPECT_EQ(a.find('/'), std::string::npos);
  EXPECT_EQ(a.find(' '), std::string::npos);
  EXPECT_THAT(a, ::testing::StartsWith("my-job----x-"));
  EXPECT_NE(a, b);
  // An id never looks like an option on the command line.
  EXPECT_THAT(new_job_id("-rf", 1764590400, 0), ::testing::StartsWith("job-rf-"));
  EXPECT_THAT(new_job_id("--all", 1764590400, 0), ::testing::StartsWith("job--all-"));
}

// The registry takes the time and the random part of an id from its seams only: with a fake
// clock and random source, the ids it reserves are known in advance, and a candidate that is
// taken costs one more random draw, not another second.
TEST_F(RegistryTest, IdsComeFromTheRegistrysClockAndRandomSource) {
  JobRegistry reg = fake_registry();
  seams_.random.next_values = {0xbeef, 0x1beef, 0xbeef, 0x0042};
  Diagnostics diags;
  std::optional<std::string> first = reg.reserve_id("demo", "", diags);
  std::optional<std::string> second = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(first && second) << diags.items().size();
  EXPECT_EQ(*first, new_job_id("demo", testing::FakeClock::kDefaultTime, 0xbeef));
  // 0x1beef has the same low 16 bits, and 0xbeef again: both are taken.
  EXPECT_EQ(*second, new_job_id("demo", testing::FakeClock::kDefaultTime, 0x0042));
  EXPECT_THAT(seams_.random.drawn, ::testing::ElementsAre(0xbeef, 0x1beef, 0xbeef, 0x0042));
  seams_.clock.advance(std::chrono::hours(24));
  std::optional<std::string> next_day = reg.reserve_id("demo", "", diags);
  ASSERT_TRUE(next_day);
  EXPECT_EQ(*next_day, new_job_id("demo", testing::FakeClock::kDefaultTime + 86400, 0));
  EXPECT_TRUE(seams_.sleeper.waits.empty()) << "nobody held the lock";
}

// A held lock is waited for on the registry's clock and sleeper: 20 ms between attempts until
// the timeout, said once after a second, and no real time passes.
TEST_F(RegistryTest, TheLockWaitRunsOnTheRegistrysClockAndSleeper) {
  fs::create_directories(dir_);
  int held = open((dir_ / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  ASSERT_GE(held, 0);
  ASSERT_EQ(flock(held, LOCK_EX), 0);
  JobRegistry reg = fake_registry(std::chrono::seconds(5));
  Diagnostics diags;
  EXPECT_FALSE(reg.put(record("x", "2026"), diags));
  close(held);
  ASSERT_TRUE(diags.has_code("registry-write"));
  EXPECT_THAT(diags.items()[0].message, HasSubstr("waited 5000 ms"));
  // Attempts at 0, 20, ..., 5000 ms: it gives up at the first one past the timeout.
  EXPECT_EQ(seams_.sleeper.waits.size(), 251u);
  for (auto wait : seams_.sleeper.waits) EXPECT_EQ(wait, std::chrono::milliseconds(20));
  EXPECT_THAT(seams_.log.text.str(), HasSubstr("waiting for the job registry lock"));
}

// Time stamps are the clock's time in UTC, to the millisecond.
TEST(RegistryStamps, SubmittedAtIsTheGivenTimeInUtc) {
  auto t = std::chrono::system_clock::from_time_t(testing::FakeClock::kDefaultTime) +
           std::chrono::milliseconds(42);
  EXPECT_EQ(utc_timestamp_iso8601(t), "2025-12-01T12:00:00.042Z");
}

std::vector<IterationSample> samples_of(const std::string& file) {
  std::ifstream in(std::string(BRIDGE_TEST_DATA) + "/megatron/" + file);
  return parse_iteration_lines(in);
}

TEST(CompareTest, ParsesRecordedMegatronLogs) {
  auto s = samples_of("overlap-off.log");
  ASSERT_EQ(s.size(), 8u);
  EXPECT_EQ(s[0].iteration, 1);
  EXPECT_EQ(s[0].total, 8);
  EXPECT_DOUBLE_EQ(s[0].step_ms, 900.0);
  EXPECT_DOUBLE_EQ(s[7].step_ms, 500.0);
}

TEST(CompareTest, SteadyStateWindowStatisticsAreExact) {
  WindowStats off = window_stats(samples_of("overlap-off.log"), 3, 8);
  EXPECT_EQ(off.samples, 6u);
  EXPECT_DOUBLE_EQ(off.mean, 500.0);  // 500 502 498 504 496 500
  EXPECT_DOUBLE_EQ(off.min, 496.0);
  EXPECT_DOUBLE_EQ(off.max, 504.0);
  EXPECT_NEAR(off.stddev, std::sqrt(40.0 / 5.0), 1e-12);
  WindowStats on = window_stats(samples_of("overlap-on.log"), 3, 8);
  EXPECT_DOUBLE_EQ(on.mean, 400.0);  // 400 410 390 405 395 400
  EXPECT_DOUBLE_EQ(on.mean / off.mean, 0.8);
  EXPECT_EQ(window_stats(samples_of("overlap-on.log"), 20, 30).samples, 0u);
}

TEST(CompareTest, KnobDifferencesAndWindows) {
  KnobValues a{{{"x", "1"}, {"y", "2"}}, {}}, b{{{"x", "1"}, {"y", "3"}}, {}};
  EXPECT_EQ(knob_differences(a, b), (std::vector<KnobDifference>{{"y", "2", "3"}}));
  b.inputs["z"] = "new";
  EXPECT_EQ(knob_differences(a, b),
            (std::vector<KnobDifference>{{"y", "2", "3"}, {"z", std::nullopt, "new"}}));
  EXPECT_EQ(describe_knob_value(knob_differences(a, b)[1]), "z=new");
  EXPECT_EQ(describe_knob_baseline(knob_differences(a, b)[1]), "z=unset");
  EXPECT_EQ(parse_window("3:8"), (std::pair<int, int>{3, 8}));
  EXPECT_FALSE(parse_window("8:3"));
  EXPECT_FALSE(parse_window("x"));
}

// A key one job sets to the value the other job's plan resolves it to anyway is no difference
// (compare listed it, and listed keys without their values; issue 47). The resolved values come
// from the recorded plan, spelled as recipe keys.
TEST(CompareTest, AKeySetToWhatTheOtherJobResolvesIsNoDifference) {
  nlohmann::ordered_json plan = {
      {"topology", {{"num_gpus", 16}, {"tp", 2}, {"vpp", nullptr}, {"gpu", "h100"}}},
      {"comm_overlap",
       {{"tp_comm_overlap", {{"value", true}, {"source", "rule"}}},
        {"bucket_size", {{"value", nullptr}, {"source", "default"}}}}},
      {"ddp", {{"overlap_grad_reduce", true}}},
      {"recipe_base", {{"values", {{"train.global_batch_size", "256"}}}}}};
  std::map<std::string, std::string> resolved = resolved_recipe_values(plan);
  EXPECT_EQ(resolved.at("model.tensor_model_parallel_size"), "2");
  EXPECT_EQ(resolved.at("cluster.gpu"), "h100");
  EXPECT_EQ(resolved.at("comm_overlap.tp_comm_overlap"), "true");
  EXPECT_EQ(resolved.at("ddp.overlap_grad_reduce"), "true");
  EXPECT_EQ(resolved.at("train.global_batch_size"), "256");
  EXPECT_EQ(resolved.count("comm_overlap.bucket_size"), 0u) << "null: not known, not a value";
  EXPECT_EQ(resolved.count("model.virtual_pipeline_model_parallel_size"), 0u);
  EXPECT_TRUE(resolved_recipe_values(nlohmann::ordered_json("not a plan")).empty());

  KnobValues baseline{{{"cluster.num_gpus", "16"}}, resolved};
  KnobValues same{{{"cluster.num_gpus", "16"},
                   {"comm_overlap.tp_comm_overlap", "True"},
                   {"train.global_batch_size", "256"}},
                  resolved};
  EXPECT_TRUE(knob_differences(baseline, same).empty());
  KnobValues changed{{{"cluster.num_gpus", "16"},
                      {"comm_overlap.tp_comm_overlap", "false"},
                      {"comm_overlap.bucket_size", "40000000"}},
                     resolved};
  EXPECT_EQ(knob_differences(baseline, changed),
            (std::vector<KnobDifference>{{"comm_overlap.bucket_size", std::nullopt, "40000000"},
                                         {"comm_overlap.tp_comm_overlap", "true", "false"}}));
}

TEST(CompareCliTest, ComparesLogFilesWithRatiosAndFlagsSmallWindows) {
  std::string dir = std::string(BRIDGE_TEST_DATA) + "/megatron/";
  auto r = test::run_command({BRIDGE_LAUNCH_BIN, "compare", dir + "overlap-off.log",
                              dir + "overlap-on.log", "--format", "json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_DOUBLE_EQ(j["jobs"][0]["mean_ms"].get<double>(), 500.0);
  EXPECT_DOUBLE_EQ(j["jobs"][1]["mean_ms"].get<double>(), 400.0);
  EXPECT_DOUBLE_EQ(j["jobs"][1]["ratio"].get<double>(), 0.8);
  EXPECT_TRUE(j["notes"].empty());
  auto small = test::run_command({BRIDGE_LAUNCH_BIN, "compare", dir + "overlap-off.log",
                                  dir + "overlap-on.log", "--window", "6:8"});
  EXPECT_EQ(small.exit_code, 0);
  EXPECT_THAT(small.out, HasSubstr("directional, not release quality"));
  EXPECT_THAT(small.out, HasSubstr("0.800"));
  EXPECT_EQ(
      test::run_command({BRIDGE_LAUNCH_BIN, "compare", dir + "overlap-off.log", "--window", "9:1"})
          .exit_code,
      2);
}

}  // namespace
}  // namespace bridge

namespace bridge {
namespace {

// A log without iteration lines (a job that failed before its first step) is marked, shows
// "-" instead of zeros, and leaves nothing to compare: exit 1.
TEST(CompareCliTest, AJobWithoutStepTimesIsMarkedAndNothingToCompareExits1) {
  std::string dir = std::string(BRIDGE_TEST_DATA) + "/megatron/";
  test::TempDir tmp;
  std::string empty = tmp.write("crashed.log", "Traceback (most recent call last):\nboom\n");
  auto r = test::run_command({BRIDGE_LAUNCH_BIN, "compare", dir + "overlap-off.log", empty});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("no iteration lines in its logs"));
  EXPECT_THAT(r.out, HasSubstr("nothing to compare: no other job has a step time"));
  auto j = nlohmann::json::parse(test::run_command({BRIDGE_LAUNCH_BIN, "compare", empty,
                                                    dir + "overlap-on.log", "--format", "json"})
                                     .out);
  EXPECT_TRUE(j["jobs"][0]["mean_ms"].is_null());
  EXPECT_TRUE(j["jobs"][1]["ratio"].is_null());
}

}  // namespace
}  // namespace bridge
