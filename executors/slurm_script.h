// The Slurm executor's pure half: Plan -> sbatch script text (what --dry-run prints, what the
// golden tests compare, what is piped into `sbatch --parsable`).
//
// render_sbatch_script fills the embedded template `sbatch.mustache` (or the file named by
// executor.slurm.template) with data derived from the plan. Contract:
// - No side effects and no dependence on the machine except `options`: the same plan and
//   options give the same bytes.
// - Every launch value is exported single-quoted ('\'' for embedded quotes), so it reaches
//   the ranks byte-for-byte; `expand: true` values are exported double-quoted inside each
//   task (expanded there, on the rank).
// - Secret values never appear: secrets are named in `#SBATCH --export=ALL,NAME...`, checked
//   for presence at run time, and listed in --container-env; their values travel in the
//   submission environment (see SbatchScript::secret_names).
// - Errors (a value Slurm cannot carry, a broken user template) are diagnostics; the result
//   is then nullopt.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/diagnostics.h"
#include "base/shell_quote.h"
#include "executors/slurm_template.h"
#include "plan/plan.h"

namespace bridge {

struct SlurmRenderOptions {
  // Directory holding the bridge-probe to run: a runtime command `bridge-probe` (no slash) is
  // rendered as `<probe_dir>/bridge-probe`. "" leaves the name to the PATH of the ranks.
  std::string probe_dir;
  // The registry's job id of this submission (unique by construction): the job's files go to
  // <job_dir>/<submission_id>/, so two submissions never share a directory, not even when a
  // reset controller hands out a Slurm id again. "" renders the dry-run id `<name>-dry-run`.
  std::string submission_id;
};

struct SbatchScript {
  std::string text;
  std::string job_name;                   // sanitized for Slurm
  std::vector<std::string> secret_names;  // pass these through sbatch's environment
};

// The name of the embedded default template.
inline constexpr const char* kSbatchTemplateName = "sbatch.mustache";

// The template variables for `plan` (documented in docs/executors/slurm.md).
std::optional<TemplateData> sbatch_template_data(const Plan& plan,
                                                 const SlurmRenderOptions& options,
                                                 Diagnostics& diags);

std::optional<SbatchScript> render_sbatch_script(const Plan& plan,
                                                 const SlurmRenderOptions& options,
                                                 Diagnostics& diags);

// Slurm job names: printable ASCII without blanks or shell/directive-hostile characters;
// everything else becomes '_'. Never empty.
std::string slurm_job_name(const std::string& name);

// <job_dir>/<submission id>: where the batch output, the script copy and the rank logs of
// one submission go (the id sanitized as a single path component).
std::string slurm_submission_dir(const Plan& plan, const std::string& submission_id);

// True when `option` (an sbatch option, with its value after `=` or a blank) sets the job's
// comment: --comment, or a prefix of it that sbatch accepts (--com, --comm, ...).
bool sbatch_option_sets_comment(std::string_view option);

// True when the comment sbatch takes from `script` is exactly `comment`: the last directive
// in the script's leading block of comments (sbatch stops looking at the first command) that
// sets a comment is `#SBATCH --comment=<comment>`. The built-in template always has it; a
// user template may leave it out or set another after it.
bool script_sets_comment(std::string_view script, std::string_view comment);

// The MASTER_PORT a job gets: 20000 + job id % 10000 (matches the script's arithmetic).
int slurm_master_port(long long job_id);

}  // namespace bridge
