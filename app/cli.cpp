#include "app/cli.h"

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "app/cli_commands.h"
#include "app/cli_support.h"
#include "app/completion.h"
#include "app/services.h"
#include "app/version.h"
#include "launcher/yaml_tree.h"

namespace bridge {

namespace {

// Shows -ng/-gn in help the way users type them, although CLI11 parses the long forms.
class HelpFormatter : public CLI::Formatter {
 public:
  std::string make_option_name(const CLI::Option* opt, bool is_positional) const override {
    std::string name = CLI::Formatter::make_option_name(opt, is_positional);
    if (name == "--num-gpus") return "-ng, --num-gpus";
    if (name == "--gpus-per-node") return "-gn, --gpus-per-node";
    return name;
  }
};

void add_plan_options(CLI::App* app, Options& o, bool launch) {
  app->add_option("-e,--executor", o.executor,
                  fmt::format("{} (default: the recipe's executor.default, else local)",
                              fmt::join(executor_names(), ", ")));
  // Kept as text (the planner reports a bad number with its position), shown as numbers.
  app->add_option("--num-gpus", o.num_gpus, "total GPUs (overrides cluster.num_gpus)")
      ->type_name("N");
  app->add_option("--gpus-per-node", o.gpus_per_node,
                  "GPUs per node (overrides cluster.gpus_per_node)")
      ->type_name("N");
  app->add_option("-g,--gpu", o.gpu,
                  "GPU type (h100, h200, b200, gb200, ...; sets the default -gn)");
  app->add_option("-E,--env", o.env, "extra launch env KEY=VALUE (repeatable; wins over plugins)")
      ->allow_extra_args(false);
  app->add_flag("--strict", o.strict, "warnings that mean 'your request was dropped' are errors");
  app->add_option("--format", o.format, "output format")->check(CLI::IsMember({"text", "json"}));
  app->add_option("--template", o.template_path, "use this sbatch template file (slurm only)");
  if (launch) {
    app->add_flag("--dry-run", o.dry_run, "print what would be submitted; change nothing");
    app->add_flag("--wait", o.wait, "follow the job until it ends");
  }
  app->add_option("recipe", o.recipe, "recipe YAML file")->required();
  app->add_option("overrides", o.overrides, "dotted KEY=VALUE overrides of the recipe");
}

void setup_logging(const Options& o, std::ostream& err) {
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(err, true);
  auto logger = std::make_shared<spdlog::logger>("bridge-launch", sink);
  logger->set_pattern("bridge-launch: %l: %v");
  logger->set_level(o.quiet         ? spdlog::level::err
                    : o.verbose > 1 ? spdlog::level::trace
                    : o.verbose     ? spdlog::level::debug
                                    : spdlog::level::info);
  spdlog::set_default_logger(logger);
}

bool want_color(const std::ostream& err, const HostEnvironment& env) {
  return &err == &std::cerr && isatty(STDERR_FILENO) && !env.get("NO_COLOR").has_value();
}

}  // namespace

std::vector<std::string> translate_short_options(const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  for (const auto& a : args) {
    if (a == "--") {  // everything after belongs to positionals
      out.insert(out.end(), args.begin() + static_cast<long>(&a - args.data()), args.end());
      return out;
    }
    std::string r = a;
    for (auto [from, to] : {std::pair{"-ng", "--num-gpus"}, std::pair{"-gn", "--gpus-per-node"}}) {
      std::string f(from);
      if (a == f)
        r = to;
      else if (a.rfind(f + "=", 0) == 0)
        r = std::string(to) + a.substr(f.size());
    }
    out.push_back(r);
  }
  return out;
}

// Defining the recipe options costs more CPU than loading a recipe (CLI11 builds every option
// eagerly), so a subcommand gets them only when its name is on the command line; otherwise it
// cannot be parsed anyway. Keeps `--dry-run` near the process floor (docs/performance.md).
namespace {
// A whole number of at least `min`. CLI11's PositiveNumber/NonNegativeNumber print their
// range up to DBL_MAX (a 300-digit number) and call 0 "not in range 0 to ...".
CLI::Validator at_least(long long min, const char* name) {
  return CLI::Validator(
      [min](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        long long n = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE || n < min)
          return fmt::format("must be a whole number >= {}, got `{}`", min, text);
        return {};
      },
      name);
}

bool mentioned(const std::vector<std::string>& args, std::string_view name) {
  return std::find(args.begin(), args.end(), name) != args.end();
}

// Top-level options that take a value in the next argument (after translate_short_options).
bool takes_value(std::string_view arg) {
  static constexpr std::string_view kValued[] = {
      "-e",    "--executor", "--num-gpus", "--gpus-per-node", "-g",
      "--gpu", "-E",         "--env",      "--format",        "--template"};
  return std::find(std::begin(kValued), std::end(kValued), arg) != std::end(kValued);
}

// Index of the subcommand name among the options that precede it, or npos when the first
// word that is not an option (or an option's value) is no subcommand.
size_t subcommand_index(const std::vector<std::string>& args,
                        const std::vector<std::string>& subcommands) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return std::string::npos;
    if (a.size() > 1 && a[0] == '-') {
      if (takes_value(a)) ++i;
      continue;
    }
    bool is_sub = std::find(subcommands.begin(), subcommands.end(), a) != subcommands.end();
    return is_sub ? i : std::string::npos;
  }
  return std::string::npos;
}
}  // namespace

// The subcommands' names (run_cli adds them). Only the early start below reads this list: a
// name missing here costs that subcommand a started and stopped sbatch, nothing else.
constexpr std::string_view kSubcommandNames[] = {
    "validate", "plan",    "plugins", "list",   "status", "logs",       "why",
    "cancel",   "compare", "ablate",  "advise", "init",   "completion", "schema"};

std::string executor_of_a_plain_launch(const std::vector<std::string>& raw_args) {
  std::vector<std::string> args = translate_short_options(raw_args);
  std::string executor;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a == "--dry-run" || a == "--help" || a == "-h" || a == "--help-all" || a == "--version" ||
        std::find(std::begin(kSubcommandNames), std::end(kSubcommandNames), a) !=
            std::end(kSubcommandNames))
      return "";
    if ((a == "--executor" || a == "-e") && i + 1 < args.size())
      executor = args[++i];
    else if (a.rfind("--executor=", 0) == 0)
      executor = a.substr(std::string_view("--executor=").size());
    else if (a.size() > 1 && a[0] == '-' && takes_value(a))
      ++i;
  }
  return executor;
}

// `bridge-launch --dry-run ablate r.yaml` must never launch anything: options written before
// a subcommand apply to it exactly as if written after its name. CLI11 binds options to the
// command they follow, so they are moved behind the name; whatever the subcommand does not
// take then falls through to the top level, where run_cli refuses it (exit 2).
std::vector<std::string> move_options_behind_subcommand(
    const std::vector<std::string>& args, const std::vector<std::string>& subcommands) {
  size_t at = subcommand_index(args, subcommands);
  if (at == std::string::npos || at == 0) return args;
  std::vector<std::string> out;
  out.reserve(args.size());
  out.push_back(args[at]);
  out.insert(out.end(), args.begin(), args.begin() + static_cast<long>(at));
  out.insert(out.end(), args.begin() + static_cast<long>(at) + 1, args.end());
  return out;
}

namespace {
// A top-level option or argument that reached the top level although a subcommand ran: the
// subcommand has no such option. Silently ignoring it could turn `--dry-run` into a launch.
std::optional<std::string> unused_top_level_argument(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0) continue;
    const std::string name = opt->get_name();
    if (name == "--verbose" || name == "--quiet") continue;
    return opt->get_positional() ? fmt::format("argument `{}`", opt->results().front())
                                 : fmt::format("option `{}`", name == "--num-gpus"        ? "-ng"
                                                              : name == "--gpus-per-node" ? "-gn"
                                                                                          : name);
  }
  return std::nullopt;
}
}  // namespace

int run_cli(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err,
            const Services& services) {
  // A launch that names its executor starts its submission before anything else (Slurm:
  // sbatch starts and waits for its script), so that the scheduler command's start-up
  // overlaps building the parser, parsing and planning (docs/performance.md). Anything the
  // parse then finds (another command, an error) drops it before it got any input.
  EarlySubmission early;
  early.executor = executor_of_a_plain_launch(raw_args);
  if (!early.executor.empty()) early.prepared = services.executor(early.executor);
  if (early.prepared) early.prepared->prepare_to_submit();
  Options launch, validate, plan;
  int verbose = 0;
  bool quiet = false;
  CLI::App app{
      "bridge-launch: validate, plan and launch GPU training jobs with "
      "communication/computation overlap",
      "bridge-launch"};
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_version_flag("--version", version_line());
  app.footer(
      "Examples:\n"
      "  bridge-launch examples/recipes/demo.yaml\n"
      "  bridge-launch --executor slurm -ng 16 -gn 8 recipe.yaml "
      "comm_overlap.delay_wgrad_compute=false\n"
      "  bridge-launch plan --format json recipe.yaml\n"
      "Exit codes: 0 ok, 1 runtime failure, 2 usage error or invalid recipe, 130 interrupted\n");
  app.add_flag("-v,--verbose", verbose, "more logging (repeatable)");
  app.add_flag("-q,--quiet", quiet, "less logging");
  app.require_subcommand(0, 1);
  add_plan_options(&app, launch, true);
  app.get_option("recipe")->required(false);
  // A subcommand gets its options only when its name is on the command line: building every
  // option of every subcommand cost a quarter of a dry-run (docs/performance.md). Only the
  // named subcommand can run, and `--help` lists the others by name.

  CLI::App* validate_cmd = app.add_subcommand("validate", "load and validate a recipe only");
  if (mentioned(raw_args, "validate")) add_plan_options(validate_cmd, validate, false);
  validate_cmd->footer(
      "Example: bridge-launch validate recipe.yaml model.tensor_model_parallel_size=4");
  CLI::App* plan_cmd = app.add_subcommand(
      "plan", "print the resolved plan: topology, overlap config, env, runtime args");
  if (mentioned(raw_args, "plan")) add_plan_options(plan_cmd, plan, false);
  plan_cmd->footer("Example: bridge-launch plan --format json -ng 16 -gn 8 recipe.yaml");
  CLI::App* plugins_cmd = app.add_subcommand("plugins", "list the launch plugins");
  std::string plugins_format = "text";
  if (mentioned(raw_args, "plugins")) {
    plugins_cmd->add_option("--format", plugins_format, "output format")
        ->check(CLI::IsMember({"text", "json"}));
  }
  plugins_cmd->footer("Example: bridge-launch plugins --format json");

  JobOptions list_o, status_o, logs_o, why_o, cancel_o, compare_o;
  CLI::App* list_cmd = app.add_subcommand("list", "recent jobs from the local registry");
  if (mentioned(raw_args, "list")) {
    list_cmd->add_option("--format", list_o.format, "output format")
        ->check(CLI::IsMember({"text", "json"}));
  }
  list_cmd->footer("Example: bridge-launch list --format json");
  CLI::App* status_cmd = app.add_subcommand("status", "state of one job, or of all recent jobs");
  if (mentioned(raw_args, "status")) {
    status_cmd->add_option("job", status_o.jobs, "job id or unique prefix (default: all)");
    status_cmd->add_option("--format", status_o.format, "output format")
        ->check(CLI::IsMember({"text", "json"}));
  }
  status_cmd->footer("Example: bridge-launch status demo-2026");
  CLI::App* logs_cmd = app.add_subcommand("logs", "show or follow a job's logs");
  if (mentioned(raw_args, "logs")) {
    logs_cmd->add_option("job", logs_o.jobs, "job id or unique prefix")->required()->expected(1);
    logs_cmd->add_flag("-f,--follow", logs_o.follow, "follow until the job ends");
    auto* rank_opt = logs_cmd->add_option("--rank", logs_o.rank, "only this rank")
                         ->check(at_least(0, "NONNEGATIVE"));
    logs_cmd->add_option("--node", logs_o.node, "only the ranks of this node (0 = first)")
        ->check(at_least(0, "NONNEGATIVE"))
        ->excludes(rank_opt);
    logs_cmd->add_option("--tail", logs_o.tail, "only the last N lines of each log (then follow)")
        ->check(at_least(0, "NONNEGATIVE"));
    logs_cmd->add_option("--grep", logs_o.grep,
                         "only lines matching this regular expression (ECMAScript syntax)");
  }
  logs_cmd->footer(
      "Examples: bridge-launch logs demo-2026 --rank 0 -f\n"
      "          bridge-launch logs demo-2026 --node 1 --grep 'NCCL|CUDA' --tail 50");
  CLI::App* why_cmd = app.add_subcommand("why", "which rank of a failed job failed first, and why");
  if (mentioned(raw_args, "why")) {
    why_cmd->add_option("job", why_o.jobs, "job id or unique prefix")->required()->expected(1);
    why_cmd->add_option("--format", why_o.format, "output format")
        ->check(CLI::IsMember({"text", "json"}));
  }
  why_cmd->footer("Example: bridge-launch why demo-2026");
  CLI::App* cancel_cmd = app.add_subcommand("cancel", "cancel a job");
  if (mentioned(raw_args, "cancel")) {
    cancel_cmd->add_option("job", cancel_o.jobs, "job id or unique prefix")
        ->required()
        ->expected(1);
  }
  cancel_cmd->footer("Example: bridge-launch cancel demo-2026");
  CLI::App* compare_cmd =
      app.add_subcommand("compare", "side-by-side steady-state step time of finished jobs");
  if (mentioned(raw_args, "compare")) {
    compare_cmd->add_option("jobs", compare_o.jobs, "job ids/prefixes or log files")->required();
    compare_cmd->add_option("--window", compare_o.window,
                            "steady-state iterations FIRST:LAST (default 3:8)");
    compare_cmd->add_option("--format", compare_o.format, "output format")
        ->check(CLI::IsMember({"text", "json"}));
  }
  compare_cmd->footer("Example: bridge-launch compare JOB_A JOB_B --window 3:8");
  AblateOptions ablate_o;
  CLI::App* ablate_cmd = app.add_subcommand(
      "ablate", "submit a baseline and one job per changed value, one knob at a time");
  if (mentioned(raw_args, "ablate")) add_plan_options(ablate_cmd, ablate_o.launch, true);
  if (mentioned(raw_args, "ablate")) {
    ablate_cmd->add_option("--vary", ablate_o.vary, "KEY=V1,V2 (repeatable)")
        ->required()
        ->allow_extra_args(false);
    ablate_cmd->add_flag("--grid", ablate_o.grid,
                         "every combination instead of one knob at a time");
    ablate_cmd->add_option("--window", ablate_o.window, "steady-state iterations for the compare");
  }
  ablate_cmd->footer(
      "Example: bridge-launch ablate examples/recipes/demo.yaml "
      "--vary comm_overlap.overlap_grad_reduce=false,true");
  Options advise_o;
  CLI::App* advise_cmd = app.add_subcommand(
      "advise", "which overlap knobs apply to this plan and are off, and how to measure each");
  if (mentioned(raw_args, "advise")) add_plan_options(advise_cmd, advise_o, false);
  advise_cmd->footer(
      "Example: bridge-launch advise examples/recipes/qwen3-30b-a3b-ep-overlap.yaml "
      "comm_overlap.overlap_moe_expert_parallel_comm=false");
  InitOptions init_o;
  CLI::App* init_cmd = app.add_subcommand("init", "write a commented starter recipe");
  if (mentioned(raw_args, "init")) {
    init_cmd->add_option("--shape", init_o.shape, "dense or moe (default dense)")
        ->check(CLI::IsMember({"dense", "moe"}));
    init_cmd->add_option("-g,--gpu", init_o.gpu, "GPU type (default h100)")->type_name("TYPE");
    init_cmd->add_option("--num-gpus", init_o.num_gpus, "total GPUs (default: one node)")
        ->check(at_least(1, "POSITIVE"))
        ->type_name("N");
    init_cmd->add_option("--gpus-per-node", init_o.gpus_per_node, "GPUs per node (default: GPU's)")
        ->check(at_least(1, "POSITIVE"))
        ->type_name("N");
    init_cmd->add_option("-e,--executor", init_o.executor, "executor (default slurm)")
        ->check(CLI::IsMember(executor_names()));
    init_cmd->add_option("-o,--output", init_o.output, "write to FILE instead of stdout")
        ->type_name("FILE");
    init_cmd->add_flag("--force", init_o.force, "with -o, replace an existing FILE");
  }
  init_cmd->footer("Example: bridge-launch init --shape moe -g h100 -ng 16 -o my-moe.yaml");
  std::string shell;
  CLI::App* completion_cmd =
      app.add_subcommand("completion", "print a shell completion script (bash, zsh or fish)");
  if (mentioned(raw_args, "completion")) {
    completion_cmd->add_option("shell", shell, "bash, zsh or fish")
        ->required()
        ->check(CLI::IsMember({"bash", "zsh", "fish"}));
  }
  completion_cmd->footer(
      "Examples: source <(bridge-launch completion bash)\n"
      "          bridge-launch completion fish > ~/.config/fish/completions/bridge-launch.fish");
  std::string schema_format = "json";
  CLI::App* schema_cmd =
      app.add_subcommand("schema", "print the recipe's JSON Schema (for editors and validators)");
  if (mentioned(raw_args, "schema")) {
    schema_cmd->add_option("--format", schema_format, "output format (json only)")
        ->check(CLI::IsMember({"json"}));
  }
  schema_cmd->footer(
      "Example: bridge-launch schema > bridge-launch.schema.json\n"
      "  then start a recipe with: # yaml-language-server: $schema=./bridge-launch.schema.json");
  for (CLI::App* sub :
       {validate_cmd, plan_cmd, plugins_cmd, list_cmd, status_cmd, logs_cmd, why_cmd, cancel_cmd,
        compare_cmd, ablate_cmd, advise_cmd, init_cmd, completion_cmd, schema_cmd})
    sub->fallthrough();

  // Arguments end up in messages, JSON output and registry records, which are UTF-8 text
  // (nlohmann::json throws on anything else): refuse other bytes up front.
  for (size_t i = 0; i < raw_args.size(); ++i) {
    if (first_invalid_utf8(raw_args[i]) == std::string_view::npos) continue;
    report_error(
        err,
        fmt::format("argument {} is not UTF-8 text: `{}`", i + 1, printable_text(raw_args[i], 200)),
        {"run `bridge-launch --help` for usage"});
    return kExitUsage;
  }
  std::vector<std::string> subcommand_names;
  const CLI::App& all_commands = app;
  for (const CLI::App* sub : all_commands.get_subcommands(nullptr))
    subcommand_names.push_back(sub->get_name());
  std::vector<std::string> args =
      move_options_behind_subcommand(translate_short_options(raw_args), subcommand_names);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants it reversed
  Context ctx{out, err, want_color(err, services.env), services};
  try {
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << app.help();
    return kExitOk;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return kExitOk;
  } catch (const CLI::CallForVersion& e) {
    out << e.what() << "\n";
    return kExitOk;
  } catch (const CLI::ParseError& e) {
    report_error(err, e.what(), {"run `bridge-launch --help` for usage"});
    return kExitUsage;
  }
  for (Options* o : {&launch, &validate, &plan}) {
    o->verbose = verbose;
    o->quiet = quiet;
  }
  setup_logging(launch, err);
  for (const CLI::App* sub : app.get_subcommands()) {
    if (auto unused = unused_top_level_argument(app)) {
      report_error(err, fmt::format("{} does not apply to `{}`", *unused, sub->get_name()),
                   {fmt::format("run `bridge-launch {} --help` for its options", sub->get_name())});
      return kExitUsage;
    }
  }
  if (validate_cmd->parsed()) return cmd_validate(validate, ctx);
  if (plan_cmd->parsed()) return cmd_plan(plan, ctx);
  if (plugins_cmd->parsed()) return cmd_plugins(plugins_format, ctx);
  if (completion_cmd->parsed()) {
    out << *completion_script(shell);
    return kExitOk;
  }
  if (schema_cmd->parsed()) return cmd_schema(ctx);
  if (list_cmd->parsed()) return cmd_list(list_o, ctx);
  if (status_cmd->parsed()) return cmd_status(status_o, ctx);
  if (logs_cmd->parsed()) return cmd_logs(logs_o, ctx);
  if (why_cmd->parsed()) return cmd_why(why_o, ctx);
  if (cancel_cmd->parsed()) return cmd_cancel(cancel_o, ctx);
  if (compare_cmd->parsed()) return cmd_compare(compare_o, ctx);
  if (ablate_cmd->parsed()) {
    ablate_o.launch.verbose = verbose;
    ablate_o.launch.quiet = quiet;
    return cmd_ablate(ablate_o, ctx);
  }
  if (advise_cmd->parsed()) {
    advise_o.verbose = verbose;
    advise_o.quiet = quiet;
    return cmd_advise(advise_o, ctx);
  }
  if (init_cmd->parsed()) return cmd_init(init_o, ctx);
  if (launch.recipe.empty()) {
    report_error(err, "no recipe given",
                 {"usage: bridge-launch [OPTIONS] RECIPE.yaml [KEY=VALUE ...]; see --help"});
    return kExitUsage;
  }
  return cmd_launch(launch, ctx, std::move(early));
}

}  // namespace bridge
