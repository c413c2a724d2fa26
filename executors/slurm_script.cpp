#include "executors/slurm_script.h"

#include <fmt/format.h>

#include <algorithm>

#include "base/time_limit.h"
#include "executors/numa_bind.h"
#include "executors/rank_env.h"
#include "executors/slurm_retry.h"
#include "jobs/job_progress.h"
#include "system/templates.h"

namespace bridge {

namespace {

constexpr int kMasterPortBase = 20000;
constexpr int kMasterPortSpan = 10000;

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += sep;
    out += items[i];
  }
  return out;
}

bool has_control_chars(const std::string& s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
  });
}

// One line of free text (reasons, sources) for a comment: control characters become blanks.
std::string one_line(std::string s) {
  for (char& c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';
  return s;
}

// A value as sbatch's `#SBATCH` parser reads it: bare when harmless, else double-quoted with
// `\` and `"` escaped (sbatch honours both). Control characters cannot be carried.
std::string directive_value(const std::string& s) {
  bool bare = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("_@%+=:,./-[]").find(c) != std::string_view::npos;
  });
  if (bare) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The words sbatch reads from the options of one #SBATCH line: blanks separate them, quotes
// group (as sbatch's script parser does), so `--x --nodes=9` is two options and
// `--nodes 9` is --nodes with the value 9.
std::vector<std::string> sbatch_line_words(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote)
        quote = 0;
      else
        word += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// The short options a cluster such as `-lN9` sets after its first letter, each as `-X...`
// with the rest of the word (`-N9`). getopt reads a cluster letter by letter until one that
// takes a value; these are the sbatch and srun short options that take none.
std::vector<std::string> short_options_in_cluster(const std::string& word) {
  static constexpr std::string_view kNoValue = "hHklOQsuvVXZ";
  std::vector<std::string> out;
  if (word.size() < 3 || word[0] != '-' || word[1] == '-') return out;
  for (size_t i = 1; i + 1 < word.size() && kNoValue.find(word[i]) != std::string_view::npos; ++i)
    out.push_back("-" + word.substr(i + 1));
  return out;
}

// Where the job wants its values checked before use; collects every problem.
class Checker {
 public:
  Checker(const Plan& plan, Diagnostics& diags) : plan_(plan), diags_(diags) {}

  // `value` goes into an #SBATCH line or a comment: no control characters.
  void directive(const std::string& value, const std::string& path, const SourceLoc& loc) {
    if (!has_control_chars(value)) return;
    ok_ = false;
    diags_.error("slurm-bad-value", path, loc,
                 fmt::format("`{}` contains a line break or control character, which an "
                             "#SBATCH line cannot carry",
                             path),
                 "remove it from the value");
  }

  // sbatch --time: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
  // days-hours:minutes, days-hours:minutes:seconds, or UNLIMITED/INFINITE. sbatch refuses
  // anything else at submission; pre-flight (validate, plan) refuses it on the login node.
  void time_limit(const std::string& value, const SourceLoc& loc) {
    if (time_limit_seconds(value)) return;
    ok_ = false;
    diags_.error("slurm-bad-time", "executor.slurm.time", loc,
                 fmt::format("`{}` is not a Slurm time limit", one_line(value)),
                 "write MINUTES, HH:MM:SS or DAYS-HH:MM:SS (e.g. 04:00:00, 2-00:00:00)");
  }

  void mount(const std::string& value, const SourceLoc& loc) {
    if (value.find(',') == std::string::npos && !has_control_chars(value)) return;
    ok_ = false;
    diags_.error("slurm-bad-mount", "executor.slurm.container_mounts", loc,
                 fmt::format("container mount `{}` contains a comma or control character; pyxis "
                             "separates mounts with commas",
                             one_line(value)),
                 "write one `SRC:DST[:FLAGS]` entry per list item, without commas");
  }

  // checkpoint.dir inside the container: at or below the destination of a writable mount
  // (`SRC:DST[:FLAGS]`, FLAGS without `ro`), else the checkpoints stay in the container.
  void checkpoint_mounted(const CheckpointSpec& checkpoint,
                          const std::vector<std::string>& mounts) {
    if (!checkpoint.is_set()) return;
    const std::string& dir = *checkpoint.dir.value;
    for (const std::string& m : mounts) {
      size_t first = m.find(':');
      if (first == std::string::npos) continue;
      size_t second = m.find(':', first + 1);
      std::string dst =
          m.substr(first + 1, second == std::string::npos ? std::string::npos : second - first - 1);
      std::string flags = second == std::string::npos ? "" : m.substr(second + 1);
      bool read_only = flags == "ro" || flags.rfind("ro,", 0) == 0;
      if (!read_only && path_at_or_below(dir, dst)) return;
    }
    ok_ = false;
    diags_.error("checkpoint-dir-not-mounted", "checkpoint.dir", checkpoint.dir.loc,
                 fmt::format("checkpoint.dir `{}` is not under a writable container mount: the "
                             "ranks would save inside the container, and the next attempt "
                             "would resume from nothing",
                             dir),
                 fmt::format("mount it, e.g. `executor.slurm.container_mounts: [{}:{}]`, or put "
                             "it under the job dir (mounted at the same path)",
                             dir, dir));
  }

  void sbatch_arg(const std::string& arg, const SourceLoc& loc) {
    if (has_control_chars(arg)) {
      ok_ = false;
      diags_.error("slurm-bad-sbatch-arg", "executor.slurm.sbatch_args", loc,
                   "an sbatch_args entry contains a line break or control character",
                   "give each option as its own list item, e.g. [--constraint=h100]");
    } else if (arg.empty() || arg[0] != '-') {
      ok_ = false;
      diags_.error(
          "slurm-bad-sbatch-arg", "executor.slurm.sbatch_args", loc,
          fmt::format("sbatch_args entry `{}` is not an option (it must start with -)", arg),
          "write options as `--name=value`, e.g. --constraint=h100");
    } else if (std::string set = sbatch_line_option(arg, sbatch_option_sets_comment);
               !set.empty()) {
      // The comment names the registry entry: `status`, a lost sbatch answer and a killed
      // launcher find the job by it, so a second one would silently replace it.
      ok_ = false;
      diags_.error("slurm-sbatch-arg-contradicts-plan", "executor.slurm.sbatch_args", loc,
                   fmt::format("sbatch_args entry `{}` would replace the job's comment, "
                               "`bridge-launch:<id>`, by which bridge-launch finds the job "
                               "(sbatch reads every option of an #SBATCH line: `{}`)",
                               one_line(arg), one_line(set)),
                   "drop it; the job's registry id is its comment (`bridge-launch list` shows "
                   "it), and --job-name comes from the recipe's `name`");
    } else if (const char* owner = sbatch_line_owned_option(arg)) {
      // A second #SBATCH line would silently win over the plan's node/GPU layout; sbatch
      // reads every option of the line, so each word is checked (`--x --nodes=9`).
      ok_ = false;
      diags_.error("slurm-sbatch-arg-contradicts-plan", "executor.slurm.sbatch_args", loc,
                   fmt::format("sbatch_args entry `{}` sets what the plan decides ({})",
                               one_line(arg), owner),
                   "drop it; change -ng/-gn (cluster.num_gpus, cluster.gpus_per_node) instead");
    }
  }

  // An option for the ranks' srun: shell-quoted into the script, so any value is safe; what
  // srun would then do with it is the user's choice, except the options that carry the
  // plan's layout and the files bridge-launch reads back.
  void srun_arg(const std::string& arg, const SourceLoc& loc) {
    if (has_control_chars(arg)) {
      ok_ = false;
      diags_.error("slurm-bad-srun-arg", "executor.slurm.srun_args", loc,
                   "an srun_args entry contains a line break or control character",
                   "give each option as its own list item, e.g. [--cpu-bind=none]");
    } else if (arg.empty() || arg[0] != '-') {
      ok_ = false;
      diags_.error("slurm-bad-srun-arg", "executor.slurm.srun_args", loc,
                   fmt::format("srun_args entry `{}` is not an option (it must start with -)",
                               one_line(arg)),
                   "write options as `--name=value`, e.g. --cpus-per-task=16");
    } else if (const char* owner = srun_owned_option(arg)) {
      ok_ = false;
      diags_.error(
          "slurm-srun-arg-contradicts-plan", "executor.slurm.srun_args", loc,
          fmt::format("srun_args entry `{}` sets what the plan decides ({})", one_line(arg), owner),
          "drop it; change -ng/-gn or runtime.launcher instead");
    } else if (std::string second = second_option_in(arg); !second.empty()) {
      // srun gets the entry as one word: `--cpu-bind=none --nodes=9` is a --cpu-bind value
      // srun refuses, after the queue wait. Two options in one entry are never meant.
      ok_ = false;
      const char* second_owner = srun_owned_option(second);
      diags_.error(second_owner ? "slurm-srun-arg-contradicts-plan" : "slurm-bad-srun-arg",
                   "executor.slurm.srun_args", loc,
                   fmt::format("srun_args entry `{}` holds a second option, `{}`{}: srun gets "
                               "each entry as one word, so it would read `{}` as part of the "
                               "first option's value and refuse the job after its queue wait",
                               one_line(arg), one_line(second),
                               second_owner ? fmt::format(" (which sets what the plan decides: {})",
                                                          second_owner)
                                            : std::string(),
                               one_line(second)),
                   second_owner ? "drop it; change -ng/-gn or runtime.launcher instead"
                                : "give each option as its own list item, e.g. "
                                  "[--cpu-bind=none, --exclusive]");
    }
  }

  // The first blank-separated word after the first that starts with '-', or "".
  static std::string second_option_in(const std::string& arg) {
    size_t at = arg.find_first_of(" \t");
    while (at != std::string::npos) {
      size_t word = arg.find_first_not_of(" \t", at);
      if (word == std::string::npos) return "";
      size_t end = arg.find_first_of(" \t", word);
      if (arg[word] == '-') return arg.substr(word, end == std::string::npos ? end : end - word);
      at = end;
    }
    return "";
  }

  static const char* srun_owned_option(const std::string& arg) {
    if (const char* owner = plan_owned_option(arg)) return owner;
    static constexpr std::pair<std::string_view, const char*> kOwned[] = {
        {"--output", "the per-rank log files `logs` and `why` read"},
        {"-o", "the per-rank log files `logs` and `why` read"},
        {"--error", "the per-rank log files `logs` and `why` read"},
        {"-e", "the per-rank log files `logs` and `why` read"},
        {"--distribution", "the block layout of ranks on nodes"},
        {"-m", "the block layout of ranks on nodes"},
        {"--kill-on-bad-exit", "stopping all ranks when one fails"},
        {"-K", "stopping all ranks when one fails"}};
    for (const std::string& word : short_options_in_cluster(arg)) {
      for (auto [option, what] : kOwned)
        if (option.size() == 2 && word.rfind(option, 0) == 0) return what;
    }
    std::string_view name(arg);
    name = name.substr(0, name.find('='));
    for (auto [option, what] : kOwned)
      if (name == option || (option.size() == 2 && arg.rfind(option, 0) == 0)) return what;
    return nullptr;
  }

  // The first word of an #SBATCH line's options for which `sets` holds, or "".
  template <typename Pred>
  static std::string sbatch_line_option(const std::string& line, Pred sets) {
    for (const std::string& word : sbatch_line_words(line))
      if (!word.empty() && word[0] == '-' && sets(word)) return word;
    return "";
  }

  static const char* sbatch_line_owned_option(const std::string& line) {
    for (const std::string& word : sbatch_line_words(line))
      if (!word.empty() && word[0] == '-')
        if (const char* owner = plan_owned_option(word)) return owner;
    return nullptr;
  }

  // What the plan owns among the options one argument word sets: a long option
  // (`--nodes=9`), or a short one, also inside a cluster of short flags (`-lN9` is -l -N9).
  static const char* plan_owned_option(const std::string& arg) {
    for (const std::string& option : short_options_in_cluster(arg))
      if (const char* owner = plan_owned_single_option(option)) return owner;
    return plan_owned_single_option(arg);
  }

  static const char* plan_owned_single_option(const std::string& arg) {
    static constexpr std::pair<std::string_view, const char*> kOwned[] = {
        {"--nodes", "the node count"},
        {"-N", "the node count"},
        {"--ntasks", "the task count"},
        {"-n", "the task count"},
        {"--ntasks-per-node", "tasks per node"},
        {"--gpus-per-node", "GPUs per node"},
        {"--gpus", "the GPU count"},
        {"-G", "the GPU count"},
        {"--gres", "the GPU resources"}};
    std::string_view name(arg);
    name = name.substr(0, name.find('='));
    for (auto [option, what] : kOwned) {
      bool match = name == option || (option.size() == 2 && arg.rfind(option, 0) == 0);
      if (option == "--gres") match = match && arg.find("gpu") != std::string::npos;
      if (match) return what;
    }
    return nullptr;
  }

  // sbatch --segment: the job's nodes in blocks of `segment` nodes, each inside one NVLink
  // domain; Slurm needs the node count to be a multiple of it.
  void segment(int64_t segment, int64_t nodes, const SourceLoc& loc) {
    if (segment == 0 || nodes % segment == 0) return;
    ok_ = false;
    diags_.error("slurm-segment-does-not-divide", "executor.slurm.segment", loc,
                 fmt::format("the job's {} node(s) cannot be split into NVLink-domain segments of "
                             "{} node(s)",
                             nodes, segment),
                 fmt::format("use a segment that divides {} (at most the NVLink domain's nodes), "
                             "change -ng, or drop executor.slurm.segment for the default",
                             nodes));
  }

  bool ok() const { return ok_; }
  const Plan& plan() const { return plan_; }

 private:
  const Plan& plan_;
  Diagnostics& diags_;
  bool ok_ = true;
};

// One task per node (torchrun or a torchrun-compatible wrapper such as ft_launcher) or one
// task per GPU (srun; `direct` means the same on Slurm).
bool per_node_launcher(const Plan& plan) {
  return plan.job.runtime.launcher.get_or("srun") == "torchrun" ||
         !plan.executor_changes.launcher_wrapper.empty();
}

std::vector<std::string> runtime_command(const Plan& plan, const SlurmRenderOptions& options) {
  std::vector<std::string> cmd =
      rank_command(plan, slurm_submission_dir(plan, options.submission_id));
  if (!options.probe_dir.empty()) {
    // The prefix (nsys, ...) comes first; the runtime command follows it.
    size_t at = plan.executor_changes.command_prefix.size();
    if (at < cmd.size() && cmd[at] == "bridge-probe") cmd[at] = options.probe_dir + "/bridge-probe";
  }
  return cmd;
}

std::string words(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += shell_word(a);
  }
  return out;
}

// `export NAME="value"; ` for the values the user asked to have expanded on the rank.
std::string expanded_exports(const Plan& plan) {
  std::string out;
  for (const auto& v : plan.env.vars)
    if (v.expand && !v.secret) out += fmt::format("export {}=\"{}\"; ", v.name, v.value);
  return out;
}

std::string submission_id_or_dry_run(const Plan& plan, const std::string& submission_id);

// runtime.code (plan/code_plan.h): BRIDGE_CODE_DIR in every task, and without a container
// the tree first on PYTHONPATH (expanded in the task, so a PYTHONPATH the job already has
// stays behind it).
std::string code_exports(const Plan& plan, const std::string& job_id) {
  if (!plan.code) return "";
  const CodePlan& code = *plan.code;
  std::string out = "export BRIDGE_CODE_DIR=" + shell_quote(code_rank_dir(code, job_id));
  if (!code.in_container)
    out += " PYTHONPATH=" + shell_quote(code_python_path(code, job_id)) +
           "\"${PYTHONPATH:+:$PYTHONPATH}\"";
  return out + "; ";
}

// Each rank (srun) or worker (torchrun sets LOCAL_RANK and RANK) runs its command through
// the NUMA binding program when the plan binds (executors/numa_bind.h).
std::string task_command(const Plan& plan, const SlurmRenderOptions& options) {
  const Topology& t = *plan.topology;
  const std::string code =
      code_exports(plan, submission_id_or_dry_run(plan, options.submission_id));
  std::string cmd = words(runtime_command(plan, options));
  std::string bind = numa_bind_program(plan.binding);
  if (per_node_launcher(plan)) {
    std::vector<std::string> wrapper = plan.executor_changes.launcher_wrapper;
    if (wrapper.empty()) wrapper.push_back("torchrun");
    std::string worker =
        bind.empty() ? "\"$@\"" : "bash -c " + shell_quote(bind) + " bridge-worker \"$@\"";
    std::string inner = fmt::format(
        "{}exec {} --nnodes={} --nproc-per-node={} --node-rank=\"$SLURM_NODEID\" "
        "--master-addr=\"$MASTER_ADDR\" --master-port=\"$MASTER_PORT\" --no-python {}",
        code + expanded_exports(plan), words(wrapper), t.nodes, t.gpus_per_node, worker);
    return fmt::format("bash -c {} \\\n  bridge-node {}", shell_quote(inner), cmd);
  }
  std::string inner = fmt::format(
      "export RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS "
      "LOCAL_WORLD_SIZE={} NODE_RANK=$SLURM_NODEID; {}{}",
      t.gpus_per_node, code + expanded_exports(plan), bind.empty() ? "exec \"$@\"" : bind);
  return fmt::format("bash -c {} \\\n  bridge-rank {}", shell_quote(inner), cmd);
}

// executor.slurm.segment when set (0 = none), else the GPU table's default for trays whose
// NVLink domain spans nodes (the plan's, model/placement.h).
int64_t segment_nodes(const Plan& plan, Checker& check) {
  check.segment(plan.nvlink.segment, plan.topology->nodes, plan.nvlink.loc);
  return plan.nvlink.segment;
}

int64_t retries(const Plan& plan, Diagnostics& diags) {
  const auto& recipe_retries = plan.job.executor.slurm.retries;
  const auto& plugin_retries = plan.executor_changes.retries;
  if (recipe_retries.is_set() && plugin_retries && *plugin_retries != *recipe_retries.value)
    diags.info("slurm-retries", "executor.slurm.retries", recipe_retries.loc,
               fmt::format("executor.slurm.retries ({}) wins over {} ({})", *recipe_retries.value,
                           plan.executor_changes.retries_source, *plugin_retries));
  return effective_retries(plan);
}

std::vector<std::string> directives(const Plan& plan, const std::string& files_dir,
                                    const std::string& submission_id, bool per_node,
                                    int64_t n_retries, const std::vector<std::string>& secrets,
                                    Checker& check) {
  const JobSpec& r = plan.job;
  const SlurmExecutorSpec& s = r.executor.slurm;
  const Topology& t = *plan.topology;
  std::vector<std::string> d;
  d.push_back("--job-name=" + directive_value(slurm_job_name(*r.name.value)));
  // The registry id tags the job, to find one whose sbatch answer was lost. It is in the
  // script, not on sbatch's command line, so that sbatch can be started before the id exists.
  d.push_back("--comment=bridge-launch:" + submission_id);
  d.push_back(fmt::format("--nodes={}", t.nodes));
  d.push_back(fmt::format("--ntasks-per-node={}", per_node ? 1 : t.gpus_per_node));
  d.push_back(fmt::format("--gpus-per-node={}", t.gpus_per_node));
  if (int64_t segment = segment_nodes(plan, check); segment > 0)
    d.push_back(fmt::format("--segment={}", segment));
  auto opt = [&](const char* flag, const Field<std::string>& f, const char* key) {
    if (!f.is_set()) return;
    check.directive(*f.value, std::string("executor.slurm.") + key, f.loc);
    d.push_back(fmt::format("--{}={}", flag, directive_value(*f.value)));
  };
  if (s.time.is_set()) check.time_limit(*s.time.value, s.time.loc);
  opt("time", s.time, "time");
  opt("account", s.account, "account");
  opt("partition", s.partition, "partition");
  opt("qos", s.qos, "qos");
  if (s.exclusive.get_or(false)) d.push_back("--exclusive");
  opt("mem", s.mem, "mem");
  d.push_back("--output=" + directive_value(files_dir + "/slurm-%j.out"));
  d.push_back("--error=" + directive_value(files_dir + "/slurm-%j.err"));
  d.push_back("--open-mode=append");
  if (plan.executor_changes.preempt_signal_seconds)
    d.push_back(fmt::format("--signal=TERM@{}", *plan.executor_changes.preempt_signal_seconds));
  opt("dependency", s.dependency, "dependency");
  if (n_retries > 0) d.push_back("--requeue");
  if (!secrets.empty()) d.push_back("--export=ALL," + join(secrets, ","));
  for (const auto& a : s.sbatch_args.get_or({})) {
    check.sbatch_arg(a, s.sbatch_args.loc);
    d.push_back(a);
  }
  return d;
}

std::vector<std::string> container_options(const Plan& plan, Checker& check,
                                           const std::vector<std::string>& env_names,
                                           const std::string& job_id) {
  const JobSpec& r = plan.job;
  const SlurmExecutorSpec& s = r.executor.slurm;
  std::vector<std::string> o;
  o.push_back("--container-image=" + shell_word(*r.runtime.container_image.value));
  std::vector<std::string> mounts = s.container_mounts.get_or({});
  for (const auto& m : mounts) check.mount(m, s.container_mounts.loc);
  // The job dir is mounted at the same path, so ranks can write profiles and checkpoints there.
  std::string job_dir_mount = plan.job_dir + ":" + plan.job_dir;
  if (std::find(mounts.begin(), mounts.end(), job_dir_mount) == mounts.end()) {
    check.mount(job_dir_mount, r.executor.slurm.job_dir.loc);
    mounts.push_back(job_dir_mount);
  }
  // runtime.code: the tree where the runtime's sources live in the image; a snapshot is
  // read-only (the job runs exactly what was recorded), a mounted tree as it is.
  if (plan.code && plan.code->in_container) {
    std::string code_mount = code_host_dir(*plan.code, job_id) + ":" + plan.code->container_path;
    if (plan.code->mode == CodeMode::kSnapshot) code_mount += ":ro";
    check.mount(code_mount, plan.code->loc);
    mounts.push_back(code_mount);
  }
  check.checkpoint_mounted(r.checkpoint, mounts);
  o.push_back("--container-mounts=" + shell_word(join(mounts, ",")));
  std::string workdir = s.container_workdir.get_or(r.runtime.workdir.get_or(""));
  if (!workdir.empty()) o.push_back("--container-workdir=" + shell_word(workdir));
  o.push_back("--container-env=" + join(env_names, ","));
  return o;
}

}  // namespace

std::string slurm_job_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    out += keep ? c : '_';
  }
  return out.empty() ? "bridge-job" : out;
}

namespace {

// The registry id, or the dry-run id `<name>-dry-run` where there is none; sanitized like a
// job name (registry ids are already [A-Za-z0-9-]; the dry-run id holds the raw recipe name).
std::string submission_id_or_dry_run(const Plan& plan, const std::string& submission_id) {
  if (!submission_id.empty()) return slurm_job_name(submission_id);
  return slurm_job_name((plan.job.name.value ? *plan.job.name.value : "job") + "-dry-run");
}

}  // namespace

std::string slurm_submission_dir(const Plan& plan, const std::string& submission_id) {
  return plan.job_dir + "/" + submission_id_or_dry_run(plan, submission_id);
}

bool sbatch_option_sets_comment(std::string_view option) {
  // sbatch (getopt_long) takes an unambiguous prefix of a long option: "--com" is the
  // shortest that names --comment alone. The value follows `=` or a blank.
  std::string_view name = option.substr(0, option.find_first_of("= \t"));
  return name.size() >= 5 && std::string_view("--comment").substr(0, name.size()) == name;
}

bool script_sets_comment(std::string_view script, std::string_view comment) {
  // sbatch keeps the last of repeated directives, so every one that sets a comment counts.
  std::optional<bool> last_is_ours;
  for (size_t at = 0; at < script.size();) {
    size_t end = std::min(script.find('\n', at), script.size());
    std::string_view line = script.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    if (line[0] != '#') break;  // the first command: sbatch reads no directive after it
    if (line.substr(0, 8) != "#SBATCH ") continue;
    std::string_view option = line.substr(8);
    option.remove_prefix(std::min(option.find_first_not_of(" \t"), option.size()));
    if (sbatch_option_sets_comment(option))
      last_is_ours = option == "--comment=" + std::string(comment);
  }
  return last_is_ours.value_or(false);
}

int slurm_master_port(long long job_id) {
  return kMasterPortBase + static_cast<int>(job_id % kMasterPortSpan);
}

namespace {

// The sbatch script's content as typed values, before any quoting. sbatch_view builds it from
// the plan in named steps; template_data then writes it into the template's variables in one
// pass, the one place where values are quoted for the shell.
struct SbatchView {
  std::string job_name;
  int64_t nodes = 0;
  int64_t gpus_per_node = 0;
  int64_t ranks = 0;
  bool per_node = false;  // one launcher task per node (torchrun, a wrapper), else one per GPU
  std::string launcher;
  std::string job_dir;
  std::string submission_dir;
  std::vector<std::pair<std::string, std::string>> exports;  // exported by the batch shell
  std::vector<std::string> secrets;    // by name: values travel in sbatch's environment
  std::vector<std::string> env_names;  // every name a rank gets (--container-env)
  std::vector<std::string> directives;
  const std::vector<SetupStep>* setup_steps = nullptr;
  std::vector<std::string> srun_options;
  std::string layout;
  std::string task_command;
  int64_t retries = 0;
  SlurmRetry retry;     // what the script does after a failure (executors/slurm_retry.h)
  std::string code_id;  // the submission id runtime.code's snapshot is named by
  WatchdogSettings watchdog;
  std::vector<std::string> watchdog_logs;  // job-dir files that may hold iteration lines
  std::string checkpoint_dir;              // checkpoint.dir, "" without checkpoints
};

// Step 1: the job dir can be written into the script, and a relative one is worth a word.
void check_job_dir(const Plan& plan, Checker& check, Diagnostics& diags) {
  const auto& field = plan.job.executor.slurm.job_dir;
  check.directive(plan.job_dir, "executor.slurm.job_dir", field.loc);
  if (plan.job_dir.empty() || plan.job_dir[0] != '/')
    diags.warning("slurm-relative-job-dir", "executor.slurm.job_dir", field.loc,
                  fmt::format("job dir `{}` is relative: the job resolves it against the "
                              "directory sbatch runs in, and `logs` only finds it from there",
                              plan.job_dir),
                  "use an absolute path on a file system every node sees");
  // The value as written (`~` and ${VAR} unexpanded): a default or a home directory that
  // happens to expand under /tmp (a test's HOME) is the user's shared one.
  else if (plan.topology->nodes > 1 && field.is_set() && on_node_local_storage(*field.value))
    diags.warning("slurm-node-local-job-dir", "executor.slurm.job_dir", field.loc,
                  fmt::format("job dir `{}` is on node-local storage on most clusters: each of "
                              "the {} nodes writes its ranks' logs into its own copy, and "
                              "`logs`, `why` and `status` (which read it from here) see only "
                              "this machine's",
                              *field.value, plan.topology->nodes),
                  "set executor.slurm.job_dir to a shared file system (e.g. under /lustre "
                  "or your home directory)");
}

// Step 2: who starts the ranks, and how many tasks per node.
void choose_launcher(const Plan& plan, SbatchView& v, Diagnostics& diags) {
  const JobSpec& r = plan.job;
  v.per_node = per_node_launcher(plan);
  const auto& wrapper = plan.executor_changes.launcher_wrapper;
  if (!wrapper.empty() && r.runtime.launcher.get_or("srun") != "torchrun")
    diags.info("slurm-per-node-launcher", "runtime.launcher", r.runtime.launcher.loc,
               fmt::format("{} ({}) starts the ranks: one task per node instead of one per GPU",
                           wrapper.front(), plan.executor_changes.launcher_source));
  v.launcher = !v.per_node ? "srun" : wrapper.empty() ? "torchrun" : wrapper.front();
  const Topology& t = *plan.topology;
  v.layout = v.per_node ? fmt::format(
                              "one {} per node ({} node(s)), each starting {} "
                              "local rank(s); output per node in node<N>.log",
                              v.launcher, t.nodes, t.gpus_per_node)
                        : fmt::format(
                              "one task per GPU ({} in all), RANK and friends "
                              "mapped from SLURM_* inside each task; output per "
                              "rank in rank<N>.log",
                              t.num_gpus);
  if (plan.binding.mode == BindingMode::kNuma)
    v.layout += "; each rank bound to its GPU's NUMA node: " + plan.binding.rule;
  else if (plan.binding.mode == BindingMode::kCustom)
    v.layout += "; binding: " + plan.binding.rule;
}

// Step 3: the launch env. Plain values are exported by the batch shell, secrets only named
// (checked for presence at run time), values expanded on the rank are exported in each task
// (task_command); then bridge-launch's own check variables and the rendezvous names.
void collect_env(const Plan& plan, SbatchView& v) {
  for (const auto& e : plan.env.vars) {
    v.env_names.push_back(e.name);
    if (e.secret)
      v.secrets.push_back(e.name);
    else if (!e.expand)
      v.exports.emplace_back(e.name, e.value);
  }
  for (auto& [name, value] : bridge_check_vars(plan)) {
    v.env_names.push_back(name);
    v.exports.emplace_back(name, std::move(value));
  }
  for (const char* name : {"MASTER_ADDR", "MASTER_PORT", "BRIDGE_JOB_DIR"})
    v.env_names.emplace_back(name);
}

// Step 4: srun's options: the layout, where output goes, the container, then the recipe's
// srun_args last (later options win; none of them may touch the layout).
void srun_options(const Plan& plan, SbatchView& v, Checker& check, Diagnostics& diags) {
  const JobSpec& r = plan.job;
  const Topology& t = *plan.topology;
  std::vector<std::string>& o = v.srun_options;
  // The script computes BRIDGE_CPUS_PER_TASK from the allocation; a template of an older
  // release lacks it, and then a task gets srun's one CPU, as it did there.
  o = {"--kill-on-bad-exit=1", "--wait=60", fmt::format("--nodes={}", t.nodes),
       "--cpus-per-task=\"${BRIDGE_CPUS_PER_TASK:-1}\""};
  if (v.per_node) {
    o.insert(o.end(), {"--ntasks-per-node=1", "--cpu-bind=none", "--open-mode=append",
                       "--output=\"$BRIDGE_JOB_DIR/node%n.log\""});
  } else {
    // Block layout, whatever SLURM_DISTRIBUTION says: rank r on node r / gpus_per_node, so a
    // tensor-parallel group stays inside a node and `logs`/`why` know each rank's host.
    o.insert(o.end(), {fmt::format("--ntasks-per-node={}", t.gpus_per_node), "--distribution=block",
                       "--open-mode=append", "--output=\"$BRIDGE_JOB_DIR/rank%t.log\""});
  }
  if (r.runtime.container_image.is_set()) {
    for (auto& c : container_options(plan, check, v.env_names, v.code_id))
      o.push_back(std::move(c));
  } else {
    if (r.executor.slurm.container_mounts.is_set() || r.executor.slurm.container_workdir.is_set())
      diags.warning("slurm-container-options-unused", "executor.slurm.container_mounts",
                    r.executor.slurm.container_mounts.loc,
                    "container_mounts/container_workdir have no effect without "
                    "runtime.container_image",
                    "set runtime.container_image, or remove them");
    if (r.runtime.workdir.is_set()) o.push_back("--chdir=" + shell_word(*r.runtime.workdir.value));
  }
  const auto& extra = r.executor.slurm.srun_args;
  for (const auto& a : extra.get_or({})) {
    check.srun_arg(a, extra.loc);
    o.push_back(shell_word(a));
  }
}

std::optional<SbatchView> sbatch_view(const Plan& plan, const SlurmRenderOptions& options,
                                      Diagnostics& diags) {
  if (!plan.topology) {
    diags.error("slurm-incomplete-plan", "", {}, "the plan is incomplete; nothing to render");
    return std::nullopt;
  }
  const Topology& t = *plan.topology;
  Checker check(plan, diags);
  SbatchView v;
  check_job_dir(plan, check, diags);
  choose_launcher(plan, v, diags);
  v.job_name = slurm_job_name(*plan.job.name.value);
  v.nodes = t.nodes;
  v.gpus_per_node = t.gpus_per_node;
  v.ranks = t.num_gpus;
  v.job_dir = plan.job_dir;
  v.submission_dir = slurm_submission_dir(plan, options.submission_id);
  collect_env(plan, v);
  v.retries = retries(plan, diags);
  v.retry = slurm_retry(plan);
  v.directives =
      directives(plan, v.submission_dir, submission_id_or_dry_run(plan, options.submission_id),
                 v.per_node, v.retries, v.secrets, check);
  v.setup_steps = &plan.setup_steps;
  v.code_id = submission_id_or_dry_run(plan, options.submission_id);
  srun_options(plan, v, check, diags);
  v.task_command = task_command(plan, options);
  v.watchdog = plan.watchdog;
  v.checkpoint_dir = plan.job.checkpoint.dir.get_or("");
  // The logs of the ranks that may print iteration lines (jobs/job_progress.h), as --wait
  // follows them; a per-node launcher's ranks write into their node's log.
  for (int rank : progress_ranks(plan.progress_rank, static_cast<int>(t.num_gpus))) {
    std::string log = v.per_node ? fmt::format("node{}.log", rank / t.gpus_per_node)
                                 : fmt::format("rank{}.log", rank);
    if (std::find(v.watchdog_logs.begin(), v.watchdog_logs.end(), log) == v.watchdog_logs.end())
      v.watchdog_logs.push_back(log);
  }
  if (!check.ok()) return std::nullopt;
  return v;
}

// The template's variables (docs/executors/slurm.md), in one pass over the view. Every value
// a user controls is shell-quoted here: a custom template may put {{job_dir}} anywhere, and a
// job dir may hold blanks, `$(...)` or a newline.
TemplateData template_data(const SbatchView& v) {
  TemplateData data;
  data.set("job_name", v.job_name);
  data.set("nodes", std::to_string(v.nodes));
  data.set("gpus_per_node", std::to_string(v.gpus_per_node));
  data.set("ranks", std::to_string(v.ranks));
  data.set("tasks_per_node", std::to_string(v.per_node ? 1 : v.gpus_per_node));
  data.set("launcher", v.launcher);
  data.set("job_dir", shell_quote(v.job_dir));
  data.set("job_dir_q", shell_quote(v.job_dir));
  data.set("submission_dir", shell_quote(v.submission_dir));
  data.set("submission_dir_q", shell_quote(v.submission_dir));
  data.set("master_port_base", std::to_string(kMasterPortBase));
  data.set("master_port_span", std::to_string(kMasterPortSpan));
  data.ensure_list("secrets");
  for (const auto& name : v.secrets) {
    TemplateData item;
    item.set("name", name);
    item.set("check",
             fmt::format("[ -n \"${{{0}+set}}\" ] || {{ echo \"bridge-launch: secret {0} is "
                         "missing from the submission environment\" >&2; exit 1; }}",
                         name));
    data.add_item("secrets", std::move(item));
  }
  data.ensure_list("exports");
  for (const auto& [name, value] : v.exports) {
    TemplateData item;
    item.set("name", name);
    item.set("value_q", shell_quote(value));
    data.add_item("exports", std::move(item));
  }
  for (const auto& d : v.directives) data.add_text_item("directives", d);
  data.ensure_list("setup_steps");
  for (size_t i = 0; i < v.setup_steps->size(); ++i) {
    const SetupStep& s = (*v.setup_steps)[i];
    TemplateData item;
    item.set("index", std::to_string(i + 1));
    item.set("source", one_line(s.source));
    item.set("reason", one_line(s.reason));
    item.set("command_q", shell_quote(s.command));
    data.add_item("setup_steps", std::move(item));
  }
  for (const auto& o : v.srun_options) data.add_text_item("srun_options", o);
  data.set("layout", v.layout);
  data.set("tasks_per_node", std::to_string(v.per_node ? 1 : v.gpus_per_node));
  data.set("task_command", v.task_command);
  data.set("retries", std::to_string(v.retries));
  data.set_bool("retry", v.retries > 0);
  data.set("attempts", std::to_string(v.retries + 1));
  data.set("max_attempts", std::to_string(v.retry.max_attempts));
  data.set("checkpoint_dir_q", shell_quote(v.checkpoint_dir));
  data.set("retry_on", fmt::format("{}", fmt::join(v.retry.retry_on, ", ")));
  data.set("exclude_failed_nodes", v.retry.exclude_failed_nodes ? "true" : "false");
  data.set_lazy("retry_triage_q", [retry = v.retry, per_node = v.per_node] {
    return shell_quote(retry_triage_program(retry, per_node));
  });
  data.set_bool("watchdog", v.watchdog.enabled);
  data.set("watchdog_logs", fmt::format("{}", fmt::join(v.watchdog_logs, " ")));
  data.set("watchdog_ere_q", shell_quote(kIterationLineEre));
  data.set("watchdog_startup", std::to_string(v.watchdog.startup_timeout));
  data.set("watchdog_progress", std::to_string(v.watchdog.progress_timeout));
  data.set("watchdog_grace", std::to_string(v.watchdog.teardown_grace));
  data.set("watchdog_poll", std::to_string(v.watchdog.poll_seconds()));
  data.set("watchdog_kill_after", std::to_string(kWatchdogKillAfter));
  return data;
}

}  // namespace

std::optional<TemplateData> sbatch_template_data(const Plan& plan,
                                                 const SlurmRenderOptions& options,
                                                 Diagnostics& diags) {
  std::optional<SbatchView> view = sbatch_view(plan, options, diags);
  if (!view) return std::nullopt;
  return template_data(*view);
}

std::optional<SbatchScript> render_sbatch_script(const Plan& plan,
                                                 const SlurmRenderOptions& options,
                                                 Diagnostics& diags) {
  auto data = sbatch_template_data(plan, options, diags);
  if (!data) return std::nullopt;
  std::string override_path = plan.job.executor.slurm.template_path.get_or("");
  std::string file_text;
  auto text = template_view(kSbatchTemplateName, override_path, file_text, diags);
  if (!text) return std::nullopt;
  auto script = render_template(*text, *data,
                                override_path.empty() ? kSbatchTemplateName : override_path, diags);
  if (!script) return std::nullopt;
  SbatchScript out;
  out.text = std::move(*script);
  out.job_name = slurm_job_name(*plan.job.name.value);
  for (const auto& v : plan.env.vars)
    if (v.secret) out.secret_names.push_back(v.name);
  return out;
}

}  // namespace bridge
