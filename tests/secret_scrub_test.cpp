// The one scrubber of secret values (base/secret_scrub.h) and Diagnostics carrying the
// values known for the run.
#include "base/secret_scrub.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/diagnostics.h"

namespace bridge {
namespace {

TEST(SecretScrubTest, EverySpellingOfALongValueAndShortValuesOnlyWhereTheyStandAlone) {
  const std::string secret = "p\"w\x1b\xff-long";
  std::string text =
      "raw p\"w\x1b\xff-long json p\\\"w\\u001b\xff-long printable p\"w\\x1b\\xff-long";
  std::string scrubbed = scrub_secrets(text, {secret});
  EXPECT_EQ(scrubbed, "raw <secret> json <secret> printable <secret>");
  // A secret `v` (or `yes`) must not turn every message into noise.
  EXPECT_EQ(scrub_secrets("`env.X` needs a `value`: v, yes", {"v", "yes"}),
            "`env.X` needs a `value`: <secret>, <secret>");
  EXPECT_EQ(scrub_secrets("abc", {""}), "abc");
}

TEST(SecretScrubTest, DiagnosticsScrubItemsBeforeAndAfterASecretIsKnown) {
  Diagnostics diags;
  SourceLoc loc;
  loc.override_arg = "env.N={value: SEKRIT-1, secret: true, x: 1}";
  diags.error("unknown-key", "env.N.x", loc, "bad value SEKRIT-1", "drop SEKRIT-1");
  diags.add_secret("SEKRIT-1");
  diags.warning("w", "", {}, "later SEKRIT-1");
  for (const Diagnostic& d : diags.items()) {
    EXPECT_EQ(d.message.find("SEKRIT"), std::string::npos) << d.message;
    EXPECT_EQ(d.help.find("SEKRIT"), std::string::npos) << d.help;
    EXPECT_EQ(d.loc.override_arg.find("SEKRIT"), std::string::npos) << d.loc.override_arg;
  }
  Diagnostics merged;
  merged.add_as_warnings(diags);
  merged.warning("w", "", {}, "merged SEKRIT-1");
  EXPECT_EQ(merged.items().back().message, "merged <secret>");
}

// A secret that holds another (a URL with an API key in it) is hidden whole, also when the
// shorter one was known first (found by review: the URL's user and host stayed visible).
TEST(SecretScrubTest, ASecretHoldingAnotherIsHiddenWhole) {
  const std::string key = "sk-abcdef123456";
  const std::string url = "https://u:sk-abcdef123456@host/p";
  EXPECT_EQ(scrub_secrets("at " + url, {key, url}), "at <secret>");
  Diagnostics diags;
  diags.add_secret(key);
  diags.error("some-code", "env.URL", {}, "bad value " + url);
  diags.add_secret(url);
  EXPECT_EQ(diags.items().front().message, "bad value <secret>");
}

}  // namespace
}  // namespace bridge
