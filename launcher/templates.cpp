#include "launcher/templates.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace bridge {

std::optional<std::string> template_text(const std::string& name, const std::string& override_path,
                                         Diagnostics& diags) {
  if (!override_path.empty()) {
    std::ifstream in(override_path, std::ios::binary);
    if (!in) {
      diags.error(
          "template-unreadable", "", {},
          fmt::format("cannot read template `{}`: {}", override_path, std::strerror(errno)));
      return std::nullopt;
    }
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  const auto& all = embedded_templates();
  auto it = all.find(name);
  if (it == all.end()) {
    diags.error("template-missing", "", {}, fmt::format("no embedded template `{}`", name));
    return std::nullopt;
  }
  return it->second;
}

}  // namespace bridge
