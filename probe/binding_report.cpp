#include "probe/binding_report.h"

#include <fstream>
#include <sstream>

#include "probe/probe_error.h"

namespace bridge::probe {

namespace {

// The value of `field:` in a status text, trimmed; "?" when absent.
std::string status_field(std::string_view text, std::string_view field) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    at = end + 1;
    if (line.size() <= field.size() || line.substr(0, field.size()) != field ||
        line[field.size()] != ':')
      continue;
    std::string_view value = line.substr(field.size() + 1);
    size_t first = value.find_first_not_of(" \t");
    if (first == std::string_view::npos) return "?";
    size_t last = value.find_last_not_of(" \t\r");
    return std::string(value.substr(first, last - first + 1));
  }
  return "?";
}

}  // namespace

Binding binding_from_status(std::string_view status_text) {
  return Binding{status_field(status_text, "Cpus_allowed_list"),
                 status_field(status_text, "Mems_allowed_list")};
}

std::string binding_report_line(int rank) {
  std::ifstream in("/proc/self/status");
  std::ostringstream text;
  if (in) text << in.rdbuf();
  Binding b = binding_from_status(text.str());
  return str_printf("bridge-probe: rank %d binding: cpus %s mems %s (/proc/self/status)", rank,
                    b.cpus.c_str(), b.mems.c_str());
}

}  // namespace bridge::probe
