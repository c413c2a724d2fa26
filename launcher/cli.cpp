#include "launcher/cli.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "base/yaml_tree.h"
#include "launcher/cli_commands.h"
#include "launcher/cli_support.h"
#include "launcher/completion.h"
#include "launcher/services.h"
#include "launcher/version.h"
#include "model/executor_kind.h"

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

// The names of the plan options that take a value, as CLI11 spells them: add_plan_options
// defines its options with these strings and takes_value reads them, so that the early
// argument scans (which run before CLI11 has an App to ask) skip exactly the values the parser
// will take. CliTest.TakesValueKnowsEveryValuedPlanOption checks the list against the App.
namespace plan_option {
constexpr const char* kExecutor = "-e,--executor";
constexpr const char* kNumGpus = "--num-gpus";
constexpr const char* kGpusPerNode = "--gpus-per-node";
constexpr const char* kGpu = "-g,--gpu";
constexpr const char* kEnv = "-E,--env";
constexpr const char* kFormat = "--format";
constexpr const char* kTemplate = "--template";
constexpr const char* kRuntimeCheck = "--runtime-check";
constexpr const char* kValued[] = {kExecutor, kNumGpus, kGpusPerNode, kGpu,
                                   kEnv,      kFormat,  kTemplate,    kRuntimeCheck};
}  // namespace plan_option

void add_plan_options(CLI::App* app, Options& o, bool launch) {
  app->add_option(plan_option::kExecutor, o.executor,
                  fmt::format("{} (default: the recipe's executor.default, else local)",
                              fmt::join(executor_names(), ", ")));
  // Kept as text (the planner reports a bad number with its position), shown as numbers.
  app->add_option(plan_option::kNumGpus, o.num_gpus, "total GPUs (overrides cluster.num_gpus)")
      ->type_name("N");
  app->add_option(plan_option::kGpusPerNode, o.gpus_per_node,
                  "GPUs per node (overrides cluster.gpus_per_node; at most what a node of "
                  "the GPU type holds, docs/recipe.md)")
      ->type_name("N");
  app->add_option(plan_option::kGpu, o.gpu,
                  "GPU type (h100, h200, b200, gb200, ...; sets the default -gn)");
  app->add_option(plan_option::kEnv, o.env,
                  "extra launch env KEY=VALUE (repeatable; wins over plugins)")
      ->allow_extra_args(false);
  app->add_flag("--strict", o.strict, "warnings that mean 'your request was dropped' are errors");
  app->add_option(plan_option::kFormat, o.format, "output format")
      ->check(CLI::IsMember({"text", "json"}));
  app->add_option(plan_option::kTemplate, o.template_path,
                  "use this sbatch template file (slurm only)");
  app->add_option(plan_option::kRuntimeCheck, o.runtime_check_python,
                  "also run the plan through the Megatron-Bridge installed in this Python "
                  "(sets runtime.check.python)")
      ->type_name("PYTHON")
      ->each([&o](const std::string&) { o.runtime_check_given = true; });
  if (launch) {
    app->add_flag("--dry-run", o.dry_run, "print what would be submitted; change nothing");
    app->add_flag("--wait", o.wait, "follow the job until it ends");
  }
  app->add_option("recipe", o.recipe, "recipe YAML file")->required();
  app->add_option("overrides", o.overrides, "dotted KEY=VALUE overrides of the recipe");
}

// The logger is the one Services holds (stderr in main), never spdlog's process-wide default.
void setup_logging(const Options& o, spdlog::logger& log) {
  log.set_pattern("bridge-launch: %l: %v");
  log.set_level(o.quiet         ? spdlog::level::err
                : o.verbose > 1 ? spdlog::level::trace
                : o.verbose     ? spdlog::level::debug
                                : spdlog::level::info);
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

}  // namespace

// Top-level options that take a value in the next argument (after translate_short_options):
// one of the names of plan_option::kValued.
bool takes_value(std::string_view arg) {
  for (std::string_view names : plan_option::kValued) {
    while (!names.empty()) {
      size_t comma = names.find(',');
      if (names.substr(0, comma) == arg) return true;
      names = comma == std::string_view::npos ? std::string_view() : names.substr(comma + 1);
    }
  }
  return false;
}

std::vector<std::string> plan_option_names_taking_a_value() {
  CLI::App app;
  Options o;
  add_plan_options(&app, o, true);
  std::vector<std::string> names;
  for (const CLI::Option* option : app.get_options()) {
    if (option->get_positional() || option->get_items_expected_min() == 0) continue;
    for (const std::string& n : option->get_snames()) names.push_back("-" + n);
    for (const std::string& n : option->get_lnames()) names.push_back("--" + n);
  }
  return names;
}

namespace {

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

// Every option of every command lands here while run_cli parses; a command's handler reads
// its own part.
struct ParsedOptions {
  Options launch, validate, plan, advise;
  AblateOptions ablate;
  InitOptions init;
  JobOptions list, status, logs, why, cancel, compare;
  ResumeOptions resume;
  std::string plugins_format = "text";
  std::string shell;
  std::string schema_format = "json";
  int verbose = 0;
  bool quiet = false;
};

void add_format_option(CLI::App* app, std::string& format) {
  app->add_option("--format", format, "output format")->check(CLI::IsMember({"text", "json"}));
}

void add_job_option(CLI::App* app, JobOptions& o) {
  app->add_option("job", o.jobs, "job id or unique prefix")->required()->expected(1);
}

void add_logs_options(CLI::App* app, ParsedOptions& p) {
  JobOptions& o = p.logs;
  add_job_option(app, o);
  app->add_flag("-f,--follow", o.follow, "follow until the job ends");
  auto* rank_opt =
      app->add_option("--rank", o.rank, "only this rank")->check(at_least(0, "NONNEGATIVE"));
  app->add_option("--node", o.node, "only the ranks of this node (0 = first)")
      ->check(at_least(0, "NONNEGATIVE"))
      ->excludes(rank_opt);
  app->add_option("--tail", o.tail, "only the last N lines of each log (then follow)")
      ->check(at_least(0, "NONNEGATIVE"));
  app->add_option("--grep", o.grep,
                  "only lines matching this regular expression (ECMAScript syntax)");
}

void add_compare_options(CLI::App* app, ParsedOptions& p) {
  app->add_option("jobs", p.compare.jobs, "job ids/prefixes or log files")->required();
  app->add_option("--window", p.compare.window, "steady-state iterations FIRST:LAST (default 3:8)");
  add_format_option(app, p.compare.format);
}

void add_ablate_options(CLI::App* app, ParsedOptions& p) {
  add_plan_options(app, p.ablate.launch, true);
  app->add_option("--vary", p.ablate.vary, "KEY=V1,V2 (repeatable)")
      ->required()
      ->allow_extra_args(false);
  app->add_flag("--grid", p.ablate.grid, "every combination instead of one knob at a time");
  app->add_option("--window", p.ablate.window, "steady-state iterations for the compare");
}

void add_init_options(CLI::App* app, ParsedOptions& p) {
  InitOptions& o = p.init;
  app->add_option("--shape", o.shape, "dense or moe (default dense)")
      ->check(CLI::IsMember({"dense", "moe"}));
  app->add_option("-g,--gpu", o.gpu, "GPU type (default h100)")->type_name("TYPE");
  app->add_option("--num-gpus", o.num_gpus, "total GPUs (default: one node)")
      ->check(at_least(1, "POSITIVE"))
      ->type_name("N");
  app->add_option("--gpus-per-node", o.gpus_per_node, "GPUs per node (default: GPU's)")
      ->check(at_least(1, "POSITIVE"))
      ->type_name("N");
  app->add_option("-e,--executor", o.executor, "executor (default slurm)")
      ->check(CLI::IsMember(executor_names()));
  app->add_option("-o,--output", o.output, "write to FILE instead of stdout")->type_name("FILE");
  app->add_flag("--force", o.force, "with -o, replace an existing FILE");
}

// One subcommand: its name and one-line summary (both in `--help`), the example its own help
// ends with, what registers its options and what runs it. run_cli adds them in this order,
// which is the order `--help` lists them in.
struct Command {
  std::string_view name;
  const char* summary;
  const char* footer;
  void (*add_options)(CLI::App*, ParsedOptions&);
  int (*run)(ParsedOptions&, const Context&);
};

std::vector<CompletionCommand> completion_commands();

const Command kCommands[] = {
    {"validate", "load and validate a recipe only",
     "Example: bridge-launch validate recipe.yaml model.tensor_model_parallel_size=4",
     [](CLI::App* app, ParsedOptions& p) { add_plan_options(app, p.validate, false); },
     [](ParsedOptions& p, const Context& c) { return cmd_validate(p.validate, c); }},
    {"plan", "print the resolved plan: topology, overlap config, env, runtime args",
     "Example: bridge-launch plan --format json -ng 16 -gn 8 recipe.yaml",
     [](CLI::App* app, ParsedOptions& p) { add_plan_options(app, p.plan, false); },
     [](ParsedOptions& p, const Context& c) { return cmd_plan(p.plan, c); }},
    {"plugins", "list the launch plugins", "Example: bridge-launch plugins --format json",
     [](CLI::App* app, ParsedOptions& p) { add_format_option(app, p.plugins_format); },
     [](ParsedOptions& p, const Context& c) { return cmd_plugins(p.plugins_format, c); }},
    {"list", "recent jobs from the local registry", "Example: bridge-launch list --format json",
     [](CLI::App* app, ParsedOptions& p) { add_format_option(app, p.list.format); },
     [](ParsedOptions& p, const Context& c) { return cmd_list(p.list, c); }},
    {"status", "state of one job, or of all recent jobs", "Example: bridge-launch status demo-2026",
     [](CLI::App* app, ParsedOptions& p) {
       app->add_option("job", p.status.jobs, "job id or unique prefix (default: all)");
       add_format_option(app, p.status.format);
     },
     [](ParsedOptions& p, const Context& c) { return cmd_status(p.status, c); }},
    {"logs", "show or follow a job's logs",
     "Examples: bridge-launch logs demo-2026 --rank 0 -f\n"
     "          bridge-launch logs demo-2026 --node 1 --grep 'NCCL|CUDA' --tail 50",
     add_logs_options, [](ParsedOptions& p, const Context& c) { return cmd_logs(p.logs, c); }},
    {"why", "which rank of a failed job failed first, and why",
     "Example: bridge-launch why demo-2026",
     [](CLI::App* app, ParsedOptions& p) {
       add_job_option(app, p.why);
       add_format_option(app, p.why.format);
     },
     [](ParsedOptions& p, const Context& c) { return cmd_why(p.why, c); }},
    {"cancel", "cancel a job", "Example: bridge-launch cancel demo-2026",
     [](CLI::App* app, ParsedOptions& p) { add_job_option(app, p.cancel); },
     [](ParsedOptions& p, const Context& c) { return cmd_cancel(p.cancel, c); }},
    {"resume", "launch a finished job's recipe again; it loads the newest checkpoint",
     "Example: bridge-launch resume pretrain-2026 --wait",
     [](CLI::App* app, ParsedOptions& p) {
       app->add_option("job", p.resume.job, "job id or unique prefix")->required();
       app->add_option(plan_option::kEnv, p.resume.launch.env,
                       "launch env KEY=VALUE again (-E values are not recorded)")
           ->allow_extra_args(false);
       app->add_flag("--dry-run", p.resume.launch.dry_run,
                     "print what would be submitted; change nothing");
       app->add_flag("--wait", p.resume.launch.wait, "follow the job until it ends");
       add_format_option(app, p.resume.launch.format);
     },
     [](ParsedOptions& p, const Context& c) { return cmd_resume(p.resume, c); }},
    {"compare", "side-by-side steady-state step time of finished jobs",
     "Example: bridge-launch compare JOB_A JOB_B --window 3:8", add_compare_options,
     [](ParsedOptions& p, const Context& c) { return cmd_compare(p.compare, c); }},
    {"ablate", "submit a baseline and one job per changed value, one knob at a time",
     "Example: bridge-launch ablate examples/recipes/demo.yaml "
     "--vary comm_overlap.overlap_grad_reduce=false,true",
     add_ablate_options,
     [](ParsedOptions& p, const Context& c) { return cmd_ablate(p.ablate, c); }},
    {"advise", "which overlap knobs apply to this plan and are off, and how to measure each",
     "Example: bridge-launch advise examples/recipes/qwen3-30b-a3b-ep-overlap.yaml "
     "comm_overlap.overlap_moe_expert_parallel_comm=false",
     [](CLI::App* app, ParsedOptions& p) { add_plan_options(app, p.advise, false); },
     [](ParsedOptions& p, const Context& c) { return cmd_advise(p.advise, c); }},
    {"init", "write a commented starter recipe",
     "Example: bridge-launch init --shape moe -g h100 -ng 16 -o my-moe.yaml", add_init_options,
     [](ParsedOptions& p, const Context& c) { return cmd_init(p.init, c); }},
    {"completion", "print a shell completion script (bash, zsh or fish)",
     "Examples: source <(bridge-launch completion bash)\n"
     "          bridge-launch completion fish > ~/.config/fish/completions/bridge-launch.fish",
     [](CLI::App* app, ParsedOptions& p) {
       app->add_option("shell", p.shell, "bash, zsh or fish")
           ->required()
           ->check(CLI::IsMember({"bash", "zsh", "fish"}));
     },
     [](ParsedOptions& p, const Context& c) {
       c.out << *completion_script(p.shell, completion_commands(), c.services.plugins);
       return kExitOk;
     }},
    {"schema", "print the recipe's JSON Schema (for editors and validators)",
     "Example: bridge-launch schema > bridge-launch.schema.json\n"
     "  then start a recipe with: # yaml-language-server: $schema=./bridge-launch.schema.json",
     [](CLI::App* app, ParsedOptions& p) {
       app->add_option("--format", p.schema_format, "output format (json only)")
           ->check(CLI::IsMember({"json"}));
     },
     [](ParsedOptions&, const Context& c) { return cmd_schema(c); }},
};

// The rows `completion` completes: the same table, in the same order.
std::vector<CompletionCommand> completion_commands() {
  std::vector<CompletionCommand> out;
  for (const Command& cmd : kCommands) out.push_back({cmd.name, cmd.summary});
  return out;
}

bool is_command_name(std::string_view word) {
  return std::any_of(std::begin(kCommands), std::end(kCommands),
                     [&](const Command& cmd) { return cmd.name == word; });
}

}  // namespace

namespace {

// Whether one argument asks for help: `--help`, `-h`, or `h` among joined short flags (`-vh`).
// Read by the early submission and by the parser's command table alike.
bool asks_for_help(const std::string& a) {
  return a == "--help" ||
         (a.size() > 1 && a[0] == '-' && a[1] != '-' && a.find('h') != std::string::npos);
}

}  // namespace

std::string executor_of_a_plain_launch(const std::vector<std::string>& raw_args) {
  std::vector<std::string> args = translate_short_options(raw_args);
  std::string executor;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a == "--dry-run" || asks_for_help(a) || a == "--version" || is_command_name(a)) return "";
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

bool help_asked(const std::vector<std::string>& raw_args) {
  return std::any_of(raw_args.begin(), raw_args.end(), asks_for_help);
}

// The top-level parser: the launch's options, then the commands of kCommands in its order
// (nullptr for one that is not registered). A command is registered only when its name is on
// the command line or help is asked for, and gets its options only when its name is on the
// command line: building every command's parser cost a quarter of a dry-run
// (docs/performance.md). Only a named command can run, and `--help` lists the others by name.
std::vector<CLI::App*> add_commands(CLI::App& app, ParsedOptions& p,
                                    const std::vector<std::string>& raw_args) {
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_version_flag("--version", version_line());
  app.footer(
      "Examples:\n"
      "  bridge-launch examples/recipes/demo.yaml\n"
      "  bridge-launch --executor slurm -ng 16 -gn 8 recipe.yaml "
      "comm_overlap.delay_wgrad_compute=false\n"
      "  bridge-launch plan --format json recipe.yaml\n" +
      fmt::format("Exit codes: {} ok, {} runtime failure, {} usage error or invalid recipe, {} "
                  "interrupted\n",
                  kExitOk, kExitRuntime, kExitUsage, kExitInterrupted));
  app.add_flag("-v,--verbose", p.verbose, "more logging (repeatable)");
  app.add_flag("-q,--quiet", p.quiet, "less logging");
  app.require_subcommand(0, 1);
  add_plan_options(&app, p.launch, true);
  app.get_option("recipe")->required(false);
  std::vector<CLI::App*> subs;
  const bool every_command = help_asked(raw_args);
  for (const Command& cmd : kCommands) {
    if (!every_command && !mentioned(raw_args, cmd.name)) {
      subs.push_back(nullptr);
      continue;
    }
    CLI::App* sub = app.add_subcommand(std::string(cmd.name), cmd.summary);
    if (mentioned(raw_args, cmd.name)) cmd.add_options(sub, p);
    sub->footer(cmd.footer);
    sub->fallthrough();
    subs.push_back(sub);
  }
  return subs;
}

// Arguments end up in messages, JSON output and registry records, which are UTF-8 text
// (nlohmann::json throws on anything else): other bytes are refused up front.
bool all_utf8(const std::vector<std::string>& raw_args, std::ostream& err) {
  for (size_t i = 0; i < raw_args.size(); ++i) {
    if (first_invalid_utf8(raw_args[i]) == std::string_view::npos) continue;
    report_error(
        err,
        fmt::format("argument {} is not UTF-8 text: `{}`", i + 1, printable_text(raw_args[i], 200)),
        {"run `bridge-launch --help` for usage"});
    return false;
  }
  return true;
}

// Whether `name` ("--runtime-check") is an option of `app` or of one of its subcommands that
// takes a value (a flag takes none).
bool takes_a_value(const CLI::App& app, const std::string& name) {
  const CLI::Option* option = app.get_option_no_throw(name);
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    if (!option) option = sub->get_option_no_throw(name);
  return option && option->get_items_expected_min() > 0;
}

// `--name=` with nothing after the '=': CLI11 then takes the next argument as the value
// (`--runtime-check= r.yaml` ate the recipe). An option that takes a value gets the empty
// value instead, which it refuses as it refuses `--runtime-check ""`; a flag is left alone.
std::vector<std::string> give_empty_values(const CLI::App& app,
                                           const std::vector<std::string>& args) {
  std::vector<std::string> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {  // everything after belongs to positionals
      out.insert(out.end(), args.begin() + static_cast<long>(i), args.end());
      break;
    }
    std::string name = a.substr(0, a.size() - 1);
    bool empty_value = a.size() > 3 && a.rfind("--", 0) == 0 && a.find('=') == a.size() - 1;
    if (empty_value && takes_a_value(app, name)) {
      out.push_back(std::move(name));
      out.emplace_back();
    } else {
      out.push_back(a);
    }
  }
  return out;
}

// Parses `raw_args` into `app`'s options. nullopt to go on; else the exit code of what the
// parse already did (help, version, a usage error).
std::optional<int> parse(CLI::App& app, const std::vector<std::string>& raw_args, std::ostream& out,
                         std::ostream& err) {
  std::vector<std::string> names;
  for (const Command& cmd : kCommands) names.emplace_back(cmd.name);
  std::vector<std::string> args = give_empty_values(
      app, move_options_behind_subcommand(translate_short_options(raw_args), names));
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants it reversed
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
  return std::nullopt;
}

// -v and -q apply to every command that plans.
void share_logging_options(ParsedOptions& p) {
  for (Options* o :
       {&p.launch, &p.validate, &p.plan, &p.advise, &p.ablate.launch, &p.resume.launch}) {
    o->verbose = p.verbose;
    o->quiet = p.quiet;
  }
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
  ParsedOptions p;
  CLI::App app{
      "bridge-launch: validate, plan and launch GPU training jobs with "
      "communication/computation overlap",
      "bridge-launch"};
  std::vector<CLI::App*> subs = add_commands(app, p, raw_args);
  if (!all_utf8(raw_args, err)) return kExitUsage;
  Context ctx{out, err, want_color(err, services.env), services};
  if (std::optional<int> done = parse(app, raw_args, out, err)) return *done;
  share_logging_options(p);
  setup_logging(p.launch, services.log);
  for (size_t i = 0; i < subs.size(); ++i) {
    if (!subs[i] || !subs[i]->parsed()) continue;
    if (auto unused = unused_top_level_argument(app)) {
      report_error(
          err, fmt::format("{} does not apply to `{}`", *unused, kCommands[i].name),
          {fmt::format("run `bridge-launch {} --help` for its options", kCommands[i].name)});
      return kExitUsage;
    }
    return kCommands[i].run(p, ctx);
  }
  if (p.launch.recipe.empty()) {
    report_error(err, "no recipe given",
                 {"usage: bridge-launch [OPTIONS] RECIPE.yaml [KEY=VALUE ...]; see --help"});
    return kExitUsage;
  }
  return cmd_launch(p.launch, ctx, std::move(early));
}

}  // namespace bridge
