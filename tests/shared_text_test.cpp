// SharedText (base/shared_text.h): copies share the text, and it stands in for the
// std::string it replaced in SourceLoc.
#include "base/shared_text.h"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "base/diagnostics.h"

namespace bridge {
namespace {

TEST(SharedText, CopiesShareOneTextAndCompareByText) {
  const std::string path = "examples/recipes/a-path-longer-than-the-inline-buffer.yaml";
  SharedText a = path;
  SharedText b = a;
  SharedText c = b;
  EXPECT_EQ(a.str(), path);
  EXPECT_EQ(b.str().data(), a.str().data());  // the same bytes, not a copy of them
  EXPECT_EQ(c.str().data(), a.str().data());
  SharedText separate = std::string(path);
  EXPECT_NE(separate.str().data(), a.str().data());
  EXPECT_EQ(separate, a);  // equal by text
  EXPECT_EQ(a, path.c_str());
  EXPECT_NE(a, "other.yaml");
  EXPECT_LT(SharedText("a.yaml"), SharedText("b.yaml"));
  EXPECT_EQ(a.size(), path.size());
}

TEST(SharedText, EmptyAndConversions) {
  SharedText none;
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.str(), "");
  EXPECT_EQ(none, SharedText(std::string()));
  SharedText from_view = std::string_view("r.yaml");
  std::string copied = from_view;
  EXPECT_EQ(copied, "r.yaml");
  std::ostringstream out;
  out << from_view;
  EXPECT_EQ(out.str(), "r.yaml");
  std::map<SharedText, int> ordered{{"b", 2}, {"a", 1}};
  EXPECT_EQ(ordered.begin()->first, "a");
}

// A SourceLoc copied into many values keeps one file name; a copy outlives the original.
TEST(SharedText, SourceLocCopiesKeepTheirFileAfterTheOriginalIsGone) {
  std::vector<SourceLoc> copies;
  {
    SourceLoc original{std::string("recipes/") + std::string(60, 'x') + ".yaml", 3, 7, {}};
    for (int i = 0; i < 100; ++i) copies.push_back(original);
  }
  for (const SourceLoc& l : copies) {
    EXPECT_EQ(l.file.str().data(), copies[0].file.str().data());
    EXPECT_EQ(l.describe(), "recipes/" + std::string(60, 'x') + ".yaml:3:7");
  }
}

// Copies made and dropped on several threads at once (`why` classifies logs on every core):
// each copy reads the whole text, and the original keeps it after all of them are gone.
TEST(SharedText, CopiesOnManyThreads) {
  SharedText shared = std::string(100, 'p');
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&shared] {
      for (int i = 0; i < 10000; ++i) {
        SharedText copy = shared;
        if (copy.size() != 100) std::abort();
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(shared.str(), std::string(100, 'p'));
}

}  // namespace
}  // namespace bridge
