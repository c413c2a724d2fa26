#include "launcher/version.h"

#include <fmt/format.h>

namespace bridge {

std::string version_line() {
  return fmt::format("bridge-launch {} (commit {})", BRIDGE_VERSION, BRIDGE_GIT_COMMIT);
}

}  // namespace bridge
