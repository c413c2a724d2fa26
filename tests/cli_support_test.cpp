// report_error (launcher/cli_support.h): the one shape of a command's own error on stderr.
#include "launcher/cli_support.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace bridge {
namespace {

TEST(ReportErrorTest, WritesOnePrefixedLineThenEachFurtherLineAsGiven) {
  std::ostringstream err;
  report_error(err, "--window must be FIRST:LAST",
               {"  help: e.g. 3:8", "run `bridge-launch --help` for usage"});
  EXPECT_EQ(err.str(),
            "bridge-launch: error: --window must be FIRST:LAST\n"
            "  help: e.g. 3:8\n"
            "run `bridge-launch --help` for usage\n");
}

TEST(ReportErrorTest, AMessageAloneIsOneLine) {
  std::ostringstream err;
  report_error(err, "cannot write out.yaml: No space left on device");
  EXPECT_EQ(err.str(), "bridge-launch: error: cannot write out.yaml: No space left on device\n");
}

}  // namespace
}  // namespace bridge
