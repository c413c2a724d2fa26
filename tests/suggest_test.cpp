#include <gtest/gtest.h>

#include "launcher/suggest.h"

namespace bridge {
namespace {

TEST(SuggestTest, Placeholder) { EXPECT_EQ(edit_distance("a", "a"), 0u); }

}  // namespace
}  // namespace bridge
