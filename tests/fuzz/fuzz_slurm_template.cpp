// libFuzzer target: render_template (executors/slurm_template.h), the Mustache subset of the
// sbatch template (executor.slurm.template / --template), on a fuzzed template text with a
// fixed TemplateData: the variables of templates/sbatch.mustache (so that template, a seed,
// renders), text lists, lists of items with their own variables, a true and a false bool
// and an empty list. Any text must render or fail with exactly one error diagnostic, never
// crash or throw; sections nest at most kMaxSectionDepth (64) deep, however deep the input.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "executors/slurm_template.h"
#include "plan/plan_output.h"
#include "tests/fuzz/fuzz_common.h"

namespace {

// The renderer's limit (kMaxSectionDepth in executors/slurm_template.cpp).
constexpr int kMaxSectionDepth = 64;

bridge::TemplateData make_data() {
  bridge::TemplateData d;
  d.set("job_name", "fuzz-job");
  d.set("nodes", "2");
  d.set("gpus_per_node", "8");
  d.set("ranks", "16");
  d.set("launcher", "torchrun");
  d.set("job_dir", "'/scratch/fuzz/jobs/fuzz-job'");
  d.set("job_dir_q", "'/scratch/fuzz/jobs/fuzz-job'");
  d.set("submission_dir", "'/scratch/fuzz/jobs/fuzz-job/fuzz-job-20261130-120000-ab12'");
  d.set("submission_dir_q", "'/scratch/fuzz/jobs/fuzz-job/fuzz-job-20261130-120000-ab12'");
  d.set("master_port_base", "29500");
  d.set("master_port_span", "1000");
  d.set("layout", "2 node(s) x 8 rank(s)");
  d.set("task_command", "bash -c 'exec python train.py'");
  d.set("empty_text", "");
  d.set_bool("retry", true);
  d.set("retries", "2");
  d.set_bool("exclusive", false);
  d.add_text_item("directives", "--job-name=fuzz-job");
  d.add_text_item("directives", "--nodes=2");
  d.add_text_item("directives", "--gpus-per-node=8");
  d.add_text_item("srun_options", "--kill-on-bad-exit=1");
  d.add_text_item("srun_options", "--output=\"$BRIDGE_JOB_DIR/rank%t.log\"");
  for (const char* name : {"NCCL_DEBUG", "CUDA_DEVICE_MAX_CONNECTIONS"}) {
    bridge::TemplateData e;
    e.set("name", name);
    e.set("value_q", "'1'");
    d.add_item("exports", std::move(e));
  }
  bridge::TemplateData secret;
  secret.set("name", "WANDB_API_KEY");
  secret.set("check", ": \"${WANDB_API_KEY:?is not set}\"");
  d.add_item("secrets", std::move(secret));
  bridge::TemplateData step;
  step.set("index", "1");
  step.set("source", "runtime.setup");
  step.set("reason", "install the wheel");
  step.set("command_q", "'pip install --user wheel'");
  step.set_bool("per_node", true);
  d.add_item("setup_steps", std::move(step));
  d.ensure_list("empty_list");
  return d;
}

// The deepest section nesting of `text`, read the way the parser reads tags: a tag runs from
// `{{` to the next `}}`, `{{#`/`{{^` open a section and `{{/` closes one.
int max_section_depth(const std::string& text) {
  int depth = 0, deepest = 0;
  for (size_t pos = 0;;) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) break;
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos) break;
    char sigil = close > open + 2 ? text[open + 2] : '\0';
    if (sigil == '#' || sigil == '^') deepest = std::max(deepest, ++depth);
    if (sigil == '/') --depth;
    pos = close + 2;
  }
  return deepest;
}

void check(const std::string& text, const bridge::TemplateData& data) {
  bridge::Diagnostics diags;
  std::optional<std::string> out = bridge::render_template(text, data, "fuzz.mustache", diags);
  if (out.has_value() == diags.has_errors())
    bridge::fuzz::fail("render_template: a result despite errors, or neither");
  if (!out) {
    if (diags.items().size() != 1) bridge::fuzz::fail("a failed render without exactly one error");
    const std::string& code = diags.items()[0].code;
    if (code != "template-syntax" && code != "template-render")
      bridge::fuzz::fail("unexpected diagnostic code " + code);
  } else {
    if (max_section_depth(text) > kMaxSectionDepth)
      bridge::fuzz::fail("rendered sections nested deeper than the limit");
    if (text.find("{{") == std::string::npos && *out != text)
      bridge::fuzz::fail("a template without tags did not render as itself");
  }
  // Messages quote the template's tags: escaped (printable_text), so any bytes render as
  // text and JSON alike.
  bridge::fuzz::render_diagnostics(diags);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bridge::TemplateData kData = make_data();
  static const bool kDeepChecked = [] {
    // Far past the limit (and past what the fuzzer's max_len allows): refused, no recursion.
    std::string deep;
    for (int i = 0; i < 100000; ++i) deep += "{{#retry}}";
    bridge::Diagnostics diags;
    if (bridge::render_template(deep, kData, "deep.mustache", diags) || !diags.has_errors())
      bridge::fuzz::fail("100000 nested sections were not refused");
    return true;
  }();
  (void)kDeepChecked;
  std::string text(reinterpret_cast<const char*>(data), size);
  // Nested list sections multiply; the renderer caps its work, so the full data is used.
  check(text, kData);
  return 0;
}
