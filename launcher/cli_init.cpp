// init: writes the starter recipe of launcher/starter_recipe.h to stdout or to a new file.
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

#include "base/shell_quote.h"
#include "executors/executor.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/services.h"
#include "launcher/starter_recipe.h"

namespace bridge {

namespace {

std::string init_command_line(const InitOptions& o) {
  std::string line =
      "bridge-launch init --shape " + shell_word(o.shape) + " -g " + shell_word(o.gpu);
  if (o.num_gpus) line += fmt::format(" -ng {}", o.num_gpus);
  if (o.gpus_per_node) line += fmt::format(" -gn {}", o.gpus_per_node);
  line += " --executor " + shell_word(o.executor);
  return line;
}

// The text must pass `validate` unchanged: plan it and render it for its executor, exactly
// as `validate` would. A failure here is a bug in the starter recipe, not the user's.
bool starter_validates(const std::string& text, const std::string& name, const Context& c,
                       Diagnostics& diags) {
  PlanRequest request;
  request.recipe_path = name;
  Plan plan = build_plan_from_text(text, request, c.services.env, c.services.plugins, diags);
  if (plan.complete && !diags.has_errors())
    if (std::unique_ptr<Executor> executor = c.services.executor(plan.executor))
      executor->render(plan, dry_run_identity(plan), diags);
  return plan.complete && !diags.has_errors();
}

// Creates `path` with `text`; without `force` an existing file is left alone (O_EXCL, so
// a file that appears meanwhile is not overwritten either).
int write_new_file(const std::string& path, const std::string& text, bool force, const Context& c) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL);
  int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    int e = errno;
    if (e == EEXIST) {
      report_error(c.err, fmt::format("{} exists; not overwritten", path),
                   {"  help: choose another -o FILE, or add --force to replace it"});
      return kExitUsage;
    }
    report_error(c.err, fmt::format("cannot create {}: {}", path, std::strerror(e)));
    return kExitRuntime;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      report_error(c.err, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
      ::close(fd);
      return kExitRuntime;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    report_error(c.err, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
    return kExitRuntime;
  }
  return kExitOk;
}

}  // namespace

int cmd_init(const InitOptions& o, const Context& c) {
  StarterChoices choices;
  choices.shape = o.shape;
  choices.gpu = o.gpu;
  for (char& ch : choices.gpu) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  choices.num_gpus = o.num_gpus;
  choices.gpus_per_node = o.gpus_per_node;
  choices.executor = o.executor;
  choices.command_line = init_command_line(o);
  StarterRecipe recipe = starter_recipe(choices);
  if (!recipe.problem.empty()) {
    report_error(c.err, recipe.problem, {"  help: " + recipe.help});
    return kExitUsage;
  }
  Diagnostics diags;
  if (!starter_validates(recipe.text, o.output.empty() ? "<init>" : o.output, c, diags)) {
    print_diagnostics(diags, c.err, c.color, false);
    c.err << "bridge-launch: internal error: the starter recipe does not validate; nothing "
             "was written (please report this)\n";
    return kExitRuntime;
  }
  if (o.output.empty()) {
    c.out << recipe.text;
    return kExitOk;
  }
  int rc = write_new_file(o.output, recipe.text, o.force, c);
  if (rc == kExitOk)
    c.err << fmt::format("wrote {}; next: bridge-launch validate {}\n", o.output,
                         shell_word(o.output));
  return rc;
}

}  // namespace bridge
