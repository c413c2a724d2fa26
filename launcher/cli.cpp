#include "launcher/cli.h"

#include <fmt/format.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "executors/executor.h"
#include "launcher/host_env.h"
#include "launcher/plan.h"
#include "launcher/plan_output.h"
#include "plugins/plugin.h"

namespace bridge {

namespace {

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;

struct Options {
  std::string executor;
  std::string num_gpus;
  std::string gpus_per_node;
  std::string gpu;
  std::vector<std::string> env;
  bool strict = false;
  bool dry_run = false;
  bool wait = false;
  std::string format = "text";
  std::string template_path;
  int verbose = 0;
  bool quiet = false;
  std::string recipe;
  std::vector<std::string> overrides;
};

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
  app->add_option("-e,--executor", o.executor, "local, slurm or kubernetes (default: the "
                                               "recipe's executor.default, else local)");
  app->add_option("--num-gpus", o.num_gpus, "total GPUs (overrides cluster.num_gpus)");
  app->add_option("--gpus-per-node", o.gpus_per_node,
                  "GPUs per node (overrides cluster.gpus_per_node)");
  app->add_option("-g,--gpu", o.gpu, "GPU type: h100, h200, b200, gb200, ...");
  app->add_option("-E,--env", o.env, "extra launch env KEY=VALUE (repeatable; wins over plugins)")
      ->allow_extra_args(false);
  app->add_flag("--strict", o.strict, "warnings that mean 'your request was dropped' are errors");
  app->add_option("--format", o.format, "output format")
      ->check(CLI::IsMember({"text", "json"}));
  app->add_option("--template", o.template_path, "use this sbatch/manifest template file");
  if (launch) {
    app->add_flag("--dry-run", o.dry_run, "print what would be submitted; change nothing");
    app->add_flag("--wait", o.wait, "follow the job until it ends");
  }
  app->add_option("recipe", o.recipe, "recipe YAML file")->required();
  app->add_option("overrides", o.overrides, "dotted KEY=VALUE overrides of the recipe");
}

PlanRequest make_request(const Options& o) {
  PlanRequest r;
  r.recipe_path = o.recipe;
  r.overrides = o.overrides;
  if (!o.num_gpus.empty()) r.overrides.push_back("cluster.num_gpus=" + o.num_gpus);
  if (!o.gpus_per_node.empty()) r.overrides.push_back("cluster.gpus_per_node=" + o.gpus_per_node);
  if (!o.gpu.empty()) r.overrides.push_back("cluster.gpu=" + o.gpu);
  r.cli_env = o.env;
  r.executor = o.executor;
  r.strict = o.strict;
  return r;
}

void print_diagnostics(const Diagnostics& diags, std::ostream& err, bool color,
                       bool before_submit = true) {
  for (const auto& d : diags.items()) err << format_diagnostic(d, color);
  size_t errors = diags.count(Severity::kError), warnings = diags.count(Severity::kWarning);
  if (errors && before_submit)
    err << fmt::format("{} error{}, {} warning{}; nothing was submitted\n", errors,
                       errors == 1 ? "" : "s", warnings, warnings == 1 ? "" : "s");
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

struct Context {
  std::ostream& out;
  std::ostream& err;
  bool color;
};

int cmd_validate(const Options& o, const Context& c) {
  ProcessEnvironment env;
  Diagnostics diags(o.strict);
  Plan plan = build_plan(make_request(o), env, diags);
  bool ok = plan.complete && !diags.has_errors();
  if (o.format == "json") {
    nlohmann::ordered_json j{{"ok", ok}, {"diagnostics", diagnostics_to_json(diags)}};
    c.out << j.dump(2) << "\n";
  } else {
    print_diagnostics(diags, c.err, c.color);
    if (ok)
      c.out << fmt::format("{}: ok ({} warning{})\n", o.recipe, diags.count(Severity::kWarning),
                           diags.count(Severity::kWarning) == 1 ? "" : "s");
  }
  return ok ? kExitOk : kExitUsage;
}

int cmd_plan(const Options& o, const Context& c) {
  ProcessEnvironment env;
  Diagnostics diags(o.strict);
  Plan plan = build_plan(make_request(o), env, diags);
  bool ok = plan.complete && !diags.has_errors();
  if (o.format == "json") {
    c.out << plan_to_json(plan, diags).dump(2) << "\n";
  } else {
    print_diagnostics(diags, c.err, c.color);
    if (ok) c.out << plan_to_text(plan, c.color && isatty(STDOUT_FILENO));
  }
  return ok ? kExitOk : kExitUsage;
}

int cmd_launch(const Options& o, const Context& c) {
  ProcessEnvironment env;
  Diagnostics diags(o.strict);
  Plan plan = build_plan(make_request(o), env, diags);
  auto fail = [&]() {
    if (o.format == "json")
      c.out << plan_to_json(plan, diags).dump(2) << "\n";
    else
      print_diagnostics(diags, c.err, c.color);
    return kExitUsage;
  };
  if (!plan.complete || diags.has_errors()) return fail();
  std::unique_ptr<Executor> executor = make_executor(plan.executor);
  if (!executor) {
    diags.error("executor-unavailable", "", {},
                fmt::format("the {} executor is not available in this build", plan.executor));
    return fail();
  }
  RenderedJob job = executor->render(plan, diags);
  if (diags.has_errors()) return fail();
  print_diagnostics(diags, c.err, c.color);  // warnings stay visible (E7)
  if (o.dry_run) {
    c.out << job.dry_run_text;
    return kExitOk;
  }
  SubmitOptions so;
  so.wait = o.wait || plan.executor == "local";
  so.verbosity = o.quiet ? -1 : o.verbose;
  Diagnostics submit_diags;
  int rc = executor->submit(plan, job, so, c.out, submit_diags);
  print_diagnostics(submit_diags, c.err, c.color, false);
  return rc;
}

int cmd_plugins(const Context& c) {
  std::vector<std::vector<std::string>> rows{{"plugin", "description"}};
  for (const auto& p : plugin_registry()) rows.push_back({p.name, p.description});
  c.out << format_table(rows, false);
  return kExitOk;
}

bool want_color(const std::ostream& err) {
  return &err == &std::cerr && isatty(STDERR_FILENO) && std::getenv("NO_COLOR") == nullptr;
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

int run_cli(const std::vector<std::string>& raw_args, std::ostream& out, std::ostream& err) {
  Options launch, validate, plan;
  int verbose = 0;
  bool quiet = false;
  CLI::App app{"bridge-launch: validate, plan and launch GPU training jobs with "
               "communication/computation overlap",
               "bridge-launch"};
  app.formatter(std::make_shared<HelpFormatter>());
  app.set_version_flag("--version", fmt::format("bridge-launch {} (commit {})", BRIDGE_VERSION,
                                                BRIDGE_GIT_COMMIT));
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

  CLI::App* validate_cmd = app.add_subcommand("validate", "load and validate a recipe only");
  add_plan_options(validate_cmd, validate, false);
  validate_cmd->footer("Example: bridge-launch validate recipe.yaml model.tensor_model_parallel_size=4");
  CLI::App* plan_cmd = app.add_subcommand(
      "plan", "print the resolved plan: topology, overlap config, env, runtime args");
  add_plan_options(plan_cmd, plan, false);
  plan_cmd->footer("Example: bridge-launch plan --format json -ng 16 -gn 8 recipe.yaml");
  CLI::App* plugins_cmd = app.add_subcommand("plugins", "list the launch plugins");
  plugins_cmd->footer("Example: bridge-launch plugins");
  for (CLI::App* sub : {validate_cmd, plan_cmd, plugins_cmd}) sub->fallthrough();

  std::vector<std::string> args = translate_short_options(raw_args);
  std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 wants it reversed
  Context ctx{out, err, want_color(err)};
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
    err << "bridge-launch: error: " << e.what() << "\n"
        << "run `bridge-launch --help` for usage\n";
    return kExitUsage;
  }
  for (Options* o : {&launch, &validate, &plan}) {
    o->verbose = verbose;
    o->quiet = quiet;
  }
  setup_logging(launch, err);
  if (validate_cmd->parsed()) return cmd_validate(validate, ctx);
  if (plan_cmd->parsed()) return cmd_plan(plan, ctx);
  if (plugins_cmd->parsed()) return cmd_plugins(ctx);
  if (launch.recipe.empty()) {
    err << "bridge-launch: error: no recipe given\n"
        << "usage: bridge-launch [OPTIONS] RECIPE.yaml [KEY=VALUE ...]; see --help\n";
    return kExitUsage;
  }
  return cmd_launch(launch, ctx);
}

}  // namespace bridge
