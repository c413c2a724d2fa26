#include "model/watchdog.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <regex>

#include "base/numbers.h"

namespace bridge {

int64_t WatchdogSettings::poll_seconds() const {
  int64_t shortest = std::min({startup_timeout, progress_timeout, teardown_grace});
  return std::clamp<int64_t>(shortest / 10, 1, 30);
}

WatchdogSettings resolve_watchdog(const WatchdogSpec& spec, const std::string& adapter) {
  WatchdogSettings w;
  const bool any_set = spec.enabled.is_set() || spec.startup_timeout.is_set() ||
                       spec.progress_timeout.is_set() || spec.teardown_grace.is_set();
  w.enabled = spec.enabled.get_or(adapter != "none");
  w.startup_timeout = spec.startup_timeout.get_or(kDefaultStartupTimeout);
  w.progress_timeout = spec.progress_timeout.get_or(kDefaultProgressTimeout);
  w.teardown_grace = spec.teardown_grace.get_or(kDefaultTeardownGrace);
  if (!spec.enabled.is_set() && adapter == "none")
    w.source = "off under adapter none (its command may print no iteration lines)";
  else
    w.source = any_set ? "runtime.watchdog" : "default";
  return w;
}

std::optional<IterationMark> iteration_of_line(std::string_view line) {
  static const std::regex kLine(kIterationLineEre, std::regex::extended);
  if (line.size() > 4096) return std::nullopt;  // std::regex recursion on very long lines
  std::match_results<std::string_view::const_iterator> m;
  if (!std::regex_search(line.begin(), line.end(), m, kLine)) return std::nullopt;
  // "iteration   20/  60 |": the two digit runs of the match.
  std::string_view text(&*m[0].first, static_cast<size_t>(m[0].length()));
  int numbers[2] = {0, 0};
  size_t found = 0;
  for (size_t i = 0; i < text.size() && found < 2;) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    auto n = parse_decimal<int>(std::string(text.substr(i, end - i)));
    if (!n) return std::nullopt;
    numbers[found++] = *n;
    i = end;
  }
  if (found != 2) return std::nullopt;
  return IterationMark{numbers[0], numbers[1]};
}

std::string watchdog_text(const WatchdogSettings& w) {
  if (!w.enabled) return "off";
  return fmt::format("startup {} s, progress {} s, teardown grace {} s", w.startup_timeout,
                     w.progress_timeout, w.teardown_grace);
}

}  // namespace bridge
