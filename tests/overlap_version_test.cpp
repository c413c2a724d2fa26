// PEP 440 version parsing and ordering (model/overlap_version.cpp), the one comparison
// behind every torch / Transformer Engine minimum the overlap rules check. The strings are
// the ones real containers report: NGC builds are pre-releases with local labels.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/overlap.h"

namespace bridge {
namespace {

int cmp(const std::string& a, const std::string& b) {
  auto x = parse_version(a);
  auto y = parse_version(b);
  if (!x || !y) {
    ADD_FAILURE() << "did not parse: " << (x ? b : a);
    return 99;
  }
  return compare_versions(*x, *y);
}

struct Ordered {
  const char* older;
  const char* newer;
};

// Each row: `older` < `newer`, and the reverse comparison agrees.
TEST(OverlapVersion, PreReleasesAreOlderThanTheirRelease) {
  const std::vector<Ordered> rows{
      {"2.6.0a0+ecf3bae40a.nv25.01", "2.6.0"},  // NGC 25.01 torch
      {"2.7.0.dev0+f05f12c", "2.7.0"},
      {"2.12.0rc1", "2.12.0"},
      {"2.12.0a0", "2.12.0"},
      {"2.12.0.dev0", "2.12.0"},
      {"2.12.0b2", "2.12.0"},
      {"2.5.1", "2.6.0a0+ecf3bae40a.nv25.01"},  // still newer than the previous release
      {"2.9.0", "2.12.0"},                      // numeric, not lexical
      {"2.6.1", "2.7.0"},
      {"2.99.99", "3"},
      {"2.12.0", "2.12.0.post1"},
      {"2.12.0rc1", "2.12.0rc2"},
      {"2.12.0a0.dev1", "2.12.0a0"},  // a dev release of an alpha precedes the alpha
      {"2.12.0", "2.12.0.post1.dev0"},
      {"2.12.0.post1.dev0", "2.12.0.post1"},
      {"9.0", "1!1.0"},  // epochs come first
  };
  for (const auto& r : rows) {
    EXPECT_LT(cmp(r.older, r.newer), 0) << r.older << " < " << r.newer;
    EXPECT_GT(cmp(r.newer, r.older), 0) << r.newer << " > " << r.older;
  }
}

TEST(OverlapVersion, PhasesOrderDevAlphaBetaRcReleasePost) {
  const std::vector<std::string> chain{"2.12.0.dev0",  "2.12.0a0",   "2.12.0a1", "2.12.0b0",
                                       "2.12.0rc0",    "2.12.0rc1",  "2.12.0",   "2.12.0.post0",
                                       "2.12.0.post1", "2.12.1.dev0"};
  for (size_t i = 0; i < chain.size(); ++i)
    for (size_t j = 0; j < chain.size(); ++j) {
      int expected = i < j ? -1 : i > j ? 1 : 0;
      EXPECT_EQ(cmp(chain[i], chain[j]), expected) << chain[i] << " vs " << chain[j];
    }
}

struct Same {
  const char* a;
  const char* b;
};

TEST(OverlapVersion, LocalLabelsAndSpellingsCompareEqual) {
  const std::vector<Same> rows{
      {"2.6.0+cu124", "2.6.0"},  // a local build is its public version for a minimum
      {"2.9.0a0+ecf3bae40a.nv25.01", "2.9.0a0"},
      {"2.12.0+5e4e0b2", "2.12.0+other"},
      {"2.6", "2.6.0"},  // missing trailing components are 0
      {"2", "2.0.0.0"},
      {"v2.7", "2.7"},
      {"V2.7.0", "2.7"},
      {"2.12.0-RC1", "2.12.0rc1"},
      {"2.12.0.rc.1", "2.12.0rc1"},
      {"2.12.0c1", "2.12.0rc1"},
      {"2.12.0pre1", "2.12.0rc1"},
      {"2.12.0preview1", "2.12.0rc1"},
      {"2.12.0alpha1", "2.12.0a1"},
      {"2.12.0beta", "2.12.0b0"},  // implicit number
      {"1.0-1", "1.0.post1"},      // implicit post-release
      {"1.0.rev2", "1.0.post2"},
      {"1.0r2", "1.0.post2"},
      {"1.0.dev", "1.0.dev0"},
      {"0!2.6.0", "2.6.0"},
      {" 2.6.0 ", "2.6.0"},
  };
  for (const auto& r : rows) EXPECT_EQ(cmp(r.a, r.b), 0) << r.a << " == " << r.b;
}

TEST(OverlapVersion, ParsesTheParts) {
  auto v = parse_version("2.6.0a0+ecf3bae40a.nv25.01");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->epoch, 0);
  EXPECT_EQ(v->release, (std::vector<int64_t>{2, 6, 0}));
  ASSERT_TRUE(v->pre.has_value());
  EXPECT_EQ(v->pre->phase, PreRelease::kAlpha);
  EXPECT_EQ(v->pre->number, 0);
  EXPECT_FALSE(v->post.has_value());
  EXPECT_FALSE(v->dev.has_value());
  EXPECT_EQ(v->local, "ecf3bae40a.nv25.01");
  EXPECT_TRUE(v->is_prerelease());

  auto d = parse_version("2.10.0.dev20250101+cu128");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->release, (std::vector<int64_t>{2, 10, 0}));
  EXPECT_FALSE(d->pre.has_value());
  EXPECT_EQ(d->dev, 20250101);
  EXPECT_EQ(d->local, "cu128");
  EXPECT_TRUE(d->is_prerelease());

  auto p = parse_version("1!3.1.post2");
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->epoch, 1);
  EXPECT_EQ(p->release, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(p->post, 2);
  EXPECT_FALSE(p->is_prerelease());  // a post-release is a release
}

TEST(OverlapVersion, RejectsWhatIsNotPep440) {
  for (const char* bad :
       {"", "latest", "nightly", "2.9.0-custom", "2.6.0+", "2.6.0+a..b", "2.6.0+a_", "1.0a1b2",
        "2..6", "2.6.", ".2.6", "2.6.0 beta", "1234567890123456789.0", "x2.6"})
    EXPECT_FALSE(parse_version(bad).has_value()) << '"' << bad << '"';
  EXPECT_TRUE(parse_version("2.6.0a").has_value());  // the pre-release number may be omitted
}

}  // namespace
}  // namespace bridge
