// The bad-input corpus (tests/data/bad/): every case runs the real bridge-launch binary and
// must be rejected cleanly: the expected exit code (2 for every case today), the expected
// message fragment, nothing on stdout unless the fragment is expected there, no crash, no
// raw C++ exception text, no sanitizer report, and nothing written (no registry entry, no
// job directory).
//
// Case format (one pair of files per case, NN-name):
//   NN-name.yaml    the recipe (any bytes). Optional for `cmd:` cases that need none.
//                   `@@REPEAT <count> <text>@@` is replaced by <text> repeated <count> times
//                   before the run, so that megabyte values and deep nesting stay small in
//                   the repository; the expanded file is written to a temporary directory.
//   NN-name.expect  line 1: the expected exit code
//                   line 2: a fragment expected on stderr; `stdout:` + fragment looks on
//                           stdout instead (for --format json)
//                   line 3 (optional): extra arguments, split on blanks (no quoting):
//                           the test runs `bridge-launch validate <recipe> <args...>`;
//                           if the line starts with `cmd:`, the rest is the whole argument
//                           list and `{recipe}` stands for the recipe's path.
//                           `@@REPEAT <count> <text>@@` works here too (expanded before
//                           the split, so <text> must not hold blanks).
// See tests/data/bad/README.md.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "model/executor_kind.h"
#include "tests/support/build_paths.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

namespace fs = std::filesystem;
using test::ChildResult;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kCorpusDir = fs::path(BRIDGE_TEST_DATA) / "bad";

struct CorpusCase {
  std::string name;  // "07-wrong-type-section"
  fs::path yaml;     // empty when the case has no recipe
  int exit_code = 2;
  std::string fragment;
  bool fragment_on_stdout = false;
  std::vector<std::string> args;
  bool whole_command = false;
};

// gtest prints the case by name when a parameterized test fails.
void PrintTo(const CorpusCase& c, std::ostream* os) { *os << c.name; }

std::vector<std::string> split_blanks(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// Applies the `@@REPEAT <count> <text>@@` expansion; returns whether anything changed.
bool expand_repeats(std::string& text) {
  bool changed = false;
  for (size_t at; (at = text.find("@@REPEAT ")) != std::string::npos;) {
    size_t end = text.find("@@", at + 9);
    if (end == std::string::npos) break;
    std::string spec = text.substr(at + 9, end - at - 9);
    size_t blank = spec.find(' ');
    size_t count = std::stoul(spec.substr(0, blank));
    std::string unit = blank == std::string::npos ? "" : spec.substr(blank + 1);
    std::string repeated;
    repeated.reserve(unit.size() * count);
    for (size_t i = 0; i < count; ++i) repeated += unit;
    text.replace(at, end + 2 - at, repeated);
    changed = true;
  }
  return changed;
}

std::vector<CorpusCase> load_corpus() {
  std::vector<CorpusCase> cases;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCorpusDir, ec)) {
    if (e.path().extension() != ".expect") continue;
    CorpusCase c;
    c.name = e.path().stem().string();
    std::ifstream in(e.path());
    std::string code, fragment, args;
    std::getline(in, code);
    std::getline(in, fragment);
    std::getline(in, args);
    c.exit_code = std::atoi(code.c_str());
    if (fragment.rfind("stdout:", 0) == 0) {
      c.fragment_on_stdout = true;
      fragment = fragment.substr(7);
    }
    c.fragment = fragment;
    if (args.rfind("cmd:", 0) == 0) {
      c.whole_command = true;
      args = args.substr(4);
    }
    expand_repeats(args);
    c.args = split_blanks(args);
    fs::path yaml = e.path();
    yaml.replace_extension(".yaml");
    if (fs::exists(yaml)) c.yaml = yaml;
    cases.push_back(std::move(c));
  }
  std::sort(cases.begin(), cases.end(),
            [](const CorpusCase& a, const CorpusCase& b) { return a.name < b.name; });
  return cases;
}

bool dir_is_empty_or_absent(const fs::path& p) {
  std::error_code ec;
  return !fs::exists(p, ec) || fs::is_empty(p, ec);
}

class BadInputCorpusTest : public ::testing::TestWithParam<CorpusCase> {};

TEST_P(BadInputCorpusTest, IsRejectedCleanly) {
  const CorpusCase& c = GetParam();
  test::TempDir tmp;
  ASSERT_FALSE(tmp.path().empty());
  fs::path home = fs::path(tmp.path()) / "home";
  fs::path state = fs::path(tmp.path()) / "state";
  fs::create_directories(home);

  std::string recipe;
  if (!c.yaml.empty()) {
    recipe = c.yaml.string();
    std::string text = test::read_file(recipe);
    if (expand_repeats(text)) recipe = tmp.write(c.yaml.filename().string(), text);
  }
  std::vector<std::string> argv{BRIDGE_LAUNCH_BIN};
  if (!c.whole_command) {
    argv.push_back("validate");
    ASSERT_FALSE(recipe.empty()) << c.name << ": a validate case needs a .yaml file";
    argv.push_back(recipe);
  }
  for (std::string a : c.args) {
    if (size_t at = a.find("{recipe}"); at != std::string::npos) a.replace(at, 8, recipe);
    argv.push_back(a);
  }
  // A clean environment for everything bridge-launch could write to.
  ChildResult r = test::run_command(argv, {{"HOME", home.string()},
                                           {"BRIDGE_LAUNCH_STATE_DIR", state.string()},
                                           {"XDG_STATE_HOME", ""},
                                           {"ASAN_OPTIONS", "detect_leaks=1"}});
  std::string shown = "\n--- stdout (" + std::to_string(r.out.size()) + " bytes) ---\n" +
                      r.out.substr(0, 4000) + "\n--- stderr (" + std::to_string(r.err.size()) +
                      " bytes) ---\n" + r.err.substr(0, 4000);

  EXPECT_EQ(r.exit_code, c.exit_code) << shown;
  EXPECT_THAT(c.fragment_on_stdout ? r.out : r.err, HasSubstr(c.fragment)) << shown;
  if (!c.fragment_on_stdout) {
    EXPECT_EQ(r.out, "") << "stdout is for results only" << shown;
  }
  // No crash and no raw exception or sanitizer text, whatever the input.
  std::string all = r.out + r.err;
  for (const char* bad : {"terminate called", "what()", "internal error", "exception", "Exception",
                          "AddressSanitizer", "LeakSanitizer", "UndefinedBehaviorSanitizer",
                          "runtime error:", "Segmentation fault", "core dumped", "Aborted"})
    EXPECT_THAT(all, Not(HasSubstr(bad))) << shown;
  // Messages quote bad values shortened, never whole megabytes.
  EXPECT_LT(r.err.size(), 64u * 1024u) << "stderr is unreasonably long";
  // Nothing recorded and nothing created.
  EXPECT_FALSE(fs::exists(state)) << "a rejected input left a registry at " << state;
  EXPECT_TRUE(dir_is_empty_or_absent(home)) << "a rejected input wrote under HOME";
}

std::string case_name(const ::testing::TestParamInfo<CorpusCase>& info) {
  std::string n = info.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

INSTANTIATE_TEST_SUITE_P(Corpus, BadInputCorpusTest, ::testing::ValuesIn(load_corpus()), case_name);

// The corpus itself: big enough, well-formed, and every recipe has its expectations.
TEST(BadInputCorpusShapeTest, HasAtLeastFortyWellFormedCases) {
  auto cases = load_corpus();
  EXPECT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    EXPECT_FALSE(c.fragment.empty()) << c.name << ": no message fragment";
    EXPECT_EQ(c.exit_code, 2) << c.name << ": bad input must exit 2";
    EXPECT_TRUE(!c.yaml.empty() || c.whole_command) << c.name << ": no recipe";
  }
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kCorpusDir, ec)) {
    if (e.path().extension() != ".yaml") continue;
    fs::path expect = e.path();
    expect.replace_extension(".expect");
    EXPECT_TRUE(fs::exists(expect)) << e.path() << " has no .expect file";
  }
}

// Decisions about inputs that look odd but are valid: CRLF line endings and a UTF-8 byte
// order mark are accepted (editors on Windows write them); the recipe means the same.
TEST(BadInputCorpusShapeTest, CrlfAndByteOrderMarkAreAccepted) {
  test::TempDir tmp;
  std::string body =
      "name: crlf-ok\ncluster: {num_gpus: 2, gpus_per_node: 2}\nmodel:\n"
      "  tensor_model_parallel_size: 2\n";
  std::string crlf;
  for (char ch : body) crlf += ch == '\n' ? std::string("\r\n") : std::string(1, ch);
  for (const auto& [name, text] :
       std::map<std::string, std::string>{{"crlf.yaml", crlf},
                                          {"bom.yaml", "\xEF\xBB\xBF" + body},
                                          {"bom-crlf.yaml", "\xEF\xBB\xBF" + crlf}}) {
    ChildResult r =
        test::run_command({BRIDGE_LAUNCH_BIN, "plan", "--format", "json", tmp.write(name, text)},
                          {{"HOME", tmp.path()}});
    EXPECT_EQ(r.exit_code, 0) << name << "\n" << r.err;
    EXPECT_THAT(r.out, HasSubstr("\"tp\": 2")) << name;
    EXPECT_THAT(r.out, Not(HasSubstr("\\r"))) << name << ": a CR leaked into a value";
  }
}

// A `${VAR}` in env whose value on the submitting host is not UTF-8: the bytes are a legal
// env value (they reach the ranks as they are); JSON output shows them as U+FFFD instead of
// failing with an internal error.
TEST(BadInputCorpusShapeTest, NonUtf8HostVariableInEnvDoesNotBreakJsonOutput) {
  test::TempDir tmp;
  std::string recipe = tmp.write("env.yaml", "name: e\nenv:\n  A: \"${BRIDGE_CORPUS_BYTES}/x\"\n");
  ChildResult r = test::run_command({BRIDGE_LAUNCH_BIN, "plan", "--format", "json", recipe},
                                    {{"HOME", tmp.path()}, {"BRIDGE_CORPUS_BYTES", "\xff\xfe"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"ok\": true"));
  EXPECT_THAT(r.out, HasSubstr("\ufffd\ufffd/x"));
  EXPECT_THAT(r.err, Not(HasSubstr("internal error")));
}

// `--dry-run -ng 100000 -gn 100000` once rendered 100000 rank blocks (found by
// fuzz_plan_render: out of memory at 10^6 ranks), and a launch would fork that many
// processes. The local executor now refuses more ranks than any machine has.
TEST(BadInputCorpusShapeTest, AbsurdLocalRankCountIsRefused) {
  test::TempDir tmp;
  std::string recipe = tmp.write("many.yaml", "name: many\n");
  ChildResult r =
      test::run_command({BRIDGE_LAUNCH_BIN, "--dry-run", "-ng", "100000", "-gn", "100000", recipe},
                        {{"HOME", tmp.path()}, {"BRIDGE_LAUNCH_STATE_DIR", tmp.path() + "/state"}});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("local-too-many-ranks"));
  EXPECT_THAT(r.err, HasSubstr("at most 256"));
  EXPECT_LT(r.out.size(), 64u * 1024u);
}

// Megabyte values that are valid must not crash any renderer (--dry-run changes nothing).
TEST(BadInputCorpusShapeTest, HugeValidValuesRenderForEveryExecutor) {
  test::TempDir tmp;
  std::string big(1 << 20, 'x');
  std::string recipe = tmp.write("huge.yaml", "name: huge\ndescription: " + big +
                                                  "\ncluster: {num_gpus: 2, gpus_per_node: 2}\n"
                                                  "runtime:\n  command: [/bin/true]\n  args: [" +
                                                  big +
                                                  "]\n"
                                                  "env:\n  HUGE: " +
                                                  big + "\n");
  for (const std::string& executor : executor_names()) {
    ChildResult r = test::run_command(
        {BRIDGE_LAUNCH_BIN, "--dry-run", "--executor", executor, recipe},
        {{"HOME", tmp.path()}, {"BRIDGE_LAUNCH_STATE_DIR", tmp.path() + "/state"}});
    EXPECT_THAT(r.exit_code, ::testing::AnyOf(0, 2)) << executor << "\n" << r.err.substr(0, 2000);
    EXPECT_THAT(r.err, Not(HasSubstr("internal error"))) << executor;
    EXPECT_FALSE(fs::exists(tmp.path() + "/state")) << executor;
  }
}

}  // namespace
}  // namespace bridge
