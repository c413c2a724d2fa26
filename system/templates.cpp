#include "system/templates.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace bridge {

namespace {

// Far above any real sbatch template (the built-in one is a few KiB); a bound keeps a
// mistaken --template (a log, /dev/zero) from hanging or exhausting memory.
constexpr off_t kMaxTemplateBytes = 1 << 20;

const char* const kTemplateHelp =
    "pass a regular text file (start from templates/sbatch.mustache), or drop --template / "
    "executor.slurm.template to use the built-in one";

// Reads a regular file of at most kMaxTemplateBytes; anything else is a diagnostic.
std::optional<std::string> read_template_file(const std::string& path, Diagnostics& diags) {
  auto fail = [&](const std::string& why) {
    diags.error("template-unreadable", "executor.slurm.template", {},
                fmt::format("cannot use template `{}`: {}", path, why), kTemplateHelp);
    return std::nullopt;
  };
  // O_NONBLOCK: opening a FIFO must not wait for a writer before we can refuse it.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return fail(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return fail(S_ISDIR(st.st_mode) ? "it is a directory" : "it is not a regular file");
  }
  if (st.st_size > kMaxTemplateBytes) {
    close(fd);
    return fail(fmt::format("it has {} bytes; templates are limited to {} bytes", st.st_size,
                            kMaxTemplateBytes));
  }
  std::string text(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = read(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // a file that shrank while we read it: use what is there
    done += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(done);
  return text;
}

}  // namespace

std::optional<std::string_view> template_view(const std::string& name,
                                              const std::string& override_path,
                                              std::string& file_text, Diagnostics& diags) {
  if (!override_path.empty()) {
    std::optional<std::string> text = read_template_file(override_path, diags);
    if (!text) return std::nullopt;
    file_text = std::move(*text);
    return file_text;
  }
  std::optional<std::string_view> text = embedded_template(name);
  if (!text)
    diags.error("template-missing", "", {}, fmt::format("no embedded template `{}`", name));
  return text;
}

std::optional<std::string> template_text(const std::string& name, const std::string& override_path,
                                         Diagnostics& diags) {
  std::string file_text;
  std::optional<std::string_view> text = template_view(name, override_path, file_text, diags);
  if (!text) return std::nullopt;
  return std::string(*text);
}

}  // namespace bridge
