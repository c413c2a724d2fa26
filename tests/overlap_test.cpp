// The model-level overlap rules (docs/overlap.md): M0 defaults, M1 TP gate, M2 pipeline
// selection, M3 expert-parallel prerequisites (with E6), M4 delay_wgrad_compute, M5 user
// precedence and provenance, E5, and --strict. Recipes are built from YAML text and
// KEY=VALUE overrides, exactly as the CLI builds them.
#include "model/overlap.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "model/recipe_loader.h"
#include "model/topology.h"
#include "tests/support/test_util.h"

namespace bridge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

constexpr const char* kBase = "name: t\ncluster: {num_gpus: 8, gpus_per_node: 8}\n";

struct Outcome {
  explicit Outcome(bool strict) : diags(strict) {}
  Diagnostics diags;
  std::optional<Recipe> recipe;
  OverlapResolution res;
  const ResolvedOverlap& o() const { return res.overlap; }

  std::vector<const Diagnostic*> all(const std::string& code) const {
    std::vector<const Diagnostic*> out;
    for (const auto& d : diags.items())
      if (d.code == code) out.push_back(&d);
    return out;
  }
  const Diagnostic* first(const std::string& code, const std::string& path = "") const {
    return test::find_diag(diags, code, path);
  }
  std::vector<std::string> paths(const std::string& code) const {
    std::vector<std::string> out;
    for (const auto* d : all(code)) out.push_back(d->path);
    return out;
  }
  std::string dump() const {
    std::string s;
    for (const auto& d : diags.items()) s += format_diagnostic(d, false);
    return s;
  }
};

// Loads `text` with `overrides`, computes the topology and resolves the overlap config.
Outcome resolve(const std::vector<std::string>& overrides, bool strict = false,
                const std::string& text = kBase) {
  Outcome run(strict);
  run.recipe = load_recipe_text(text, "t.yaml", overrides, run.diags);
  if (!run.recipe) {
    ADD_FAILURE() << "recipe did not load:\n" << run.dump();
    return run;
  }
  auto topo = compute_topology(*run.recipe, run.diags);
  if (!topo) {
    ADD_FAILURE() << "topology failed:\n" << run.dump();
    return run;
  }
  run.res = resolve_comm_overlap(*run.recipe, *topo, run.diags);
  return run;
}

template <class T>
void expect_field(const Resolved<T>& r, const std::optional<T>& value, ValueSource source,
                  const std::string& rule) {
  EXPECT_EQ(r.value, value);
  EXPECT_EQ(r.source, source);
  EXPECT_EQ(r.rule, rule);
}

const std::vector<std::string> kTpOverlapOk{
    "model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
    "runtime.transformer_engine=\"2.9.0\"", "comm_overlap.tp_comm_overlap=true"};

// ep=2 with 2 experts: the smallest recipe that satisfies every EP-overlap prerequisite.
const std::vector<std::string> kEpOverlapOk{"model.expert_model_parallel_size=2",
                                            "model.num_moe_experts=2",
                                            "model.moe_token_dispatcher_type=alltoall",
                                            "model.precision=bf16",
                                            "runtime.torch=\"2.9.0\"",
                                            "comm_overlap.overlap_moe_expert_parallel_comm=true"};

std::vector<std::string> plus(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// ---- M0 ----

TEST(OverlapDefaults, AllFourteenFieldsWithSourceAndRule) {
  Outcome run = resolve({});
  const ResolvedOverlap& o = run.o();
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
  expect_field<bool>(o.tp_comm_overlap, false, ValueSource::kDefault, "M0");
  EXPECT_FALSE(o.tp_comm_overlap_cfg.value.has_value());
  EXPECT_EQ(o.tp_comm_overlap_cfg.source, ValueSource::kDefault);
  EXPECT_EQ(o.tp_comm_overlap_preset, "");
  expect_field<std::string>(o.tp_comm_bootstrap_backend, "nccl", ValueSource::kDefault, "M0");
  expect_field<bool>(o.overlap_p2p_comm, false, ValueSource::kRule, "M2");
  expect_field<bool>(o.batch_p2p_comm, false, ValueSource::kRule, "M2");
  // No distributed optimizer: the DP fields stay null (rule D does not apply).
  expect_field<bool>(o.overlap_grad_reduce, std::nullopt, ValueSource::kDefault, "M0");
  expect_field<bool>(o.overlap_param_gather, std::nullopt, ValueSource::kDefault, "M0");
  expect_field<bool>(o.overlap_param_gather_with_optimizer_step, std::nullopt,
                     ValueSource::kDefault, "M0");
  expect_field<bool>(o.align_param_gather, std::nullopt, ValueSource::kDefault, "M0");
  expect_field<int64_t>(o.bucket_size, std::nullopt, ValueSource::kDefault, "M0");
  expect_field<bool>(o.defer_embedding_wgrad_compute, false, ValueSource::kDefault, "M0");
  expect_field<int64_t>(o.wgrad_deferral_limit, -1, ValueSource::kDefault, "M0");
  expect_field<bool>(o.overlap_moe_expert_parallel_comm, false, ValueSource::kDefault, "M0");
  expect_field<bool>(o.delay_wgrad_compute, false, ValueSource::kDefault, "M0");
  EXPECT_EQ(run.res.flex_dispatcher_backend, "");
}

TEST(OverlapDefaults, ValueSourceNames) {
  EXPECT_STREQ(value_source_name(ValueSource::kUser), "user");
  EXPECT_STREQ(value_source_name(ValueSource::kDefault), "default");
  EXPECT_STREQ(value_source_name(ValueSource::kRule), "rule");
}

// ---- M1 ----

TEST(OverlapTpGate, EnabledWhenTpSequenceParallelAndTePresent) {
  Outcome run = resolve(kTpOverlapOk);
  expect_field<bool>(run.o().tp_comm_overlap, true, ValueSource::kUser, "M5");
  EXPECT_FALSE(run.diags.has_code("tp-overlap-disabled"));
  EXPECT_EQ(run.o().tp_comm_bootstrap_backend.value, "nccl");
}

TEST(OverlapTpGate, UnknownTeVersionStillCountsAsPresent) {
  Outcome run = resolve({"model.tensor_model_parallel_size=2", "model.sequence_parallel=true",
                         "comm_overlap.tp_comm_overlap=true"});
  EXPECT_EQ(run.o().tp_comm_overlap.value, true);
  EXPECT_FALSE(run.diags.has_code("tp-overlap-disabled"));
}

TEST(OverlapTpGate, TpBelowTwoIsReportedFirst) {
  // All three cases fail; only the first (tp < 2) is reported, as in the runtime.
  Outcome run = resolve({"model.tensor_model_parallel_size=1", "model.sequence_parallel=false",
                         "runtime.transformer_engine=false", "comm_overlap.tp_comm_overlap=true"});
  auto hits = run.all("tp-overlap-disabled");
  ASSERT_EQ(hits.size(), 1u) << run.dump();
  EXPECT_EQ(hits[0]->severity, Severity::kWarning);
  EXPECT_EQ(hits[0]->path, "comm_overlap.tp_comm_overlap");
  EXPECT_THAT(hits[0]->message, HasSubstr("tensor_model_parallel_size is 1"));
  EXPECT_THAT(hits[0]->help, HasSubstr("tensor_model_parallel_size >= 2"));
  expect_field<bool>(run.o().tp_comm_overlap, false, ValueSource::kRule, "M1");
}

TEST(OverlapTpGate, SequenceParallelIsCheckedBeforeTe) {
  Outcome run = resolve({"model.tensor_model_parallel_size=4", "runtime.transformer_engine=false",
                         "comm_overlap.tp_comm_overlap=true"});
  auto hits = run.all("tp-overlap-disabled");
  ASSERT_EQ(hits.size(), 1u) << run.dump();
  EXPECT_THAT(hits[0]->message, HasSubstr("sequence_parallel is false"));
  EXPECT_THAT(hits[0]->help, HasSubstr("sequence_parallel: true"));
  EXPECT_EQ(run.o().tp_comm_overlap.value, false);
}

TEST(OverlapTpGate, TeAbsentIsTheLastCase) {
  Outcome run = resolve({"model.tensor_model_parallel_size=4", "model.sequence_parallel=true",
                         "runtime.transformer_engine=false", "comm_overlap.tp_comm_overlap=true"});
  auto hits = run.all("tp-overlap-disabled");
  ASSERT_EQ(hits.size(), 1u) << run.dump();
  EXPECT_THAT(hits[0]->message, HasSubstr("transformer_engine is false"));
  EXPECT_THAT(hits[0]->help, HasSubstr("Transformer Engine"));
  expect_field<bool>(run.o().tp_comm_overlap, false, ValueSource::kRule, "M1");
}

TEST(OverlapTpGate, NotEvaluatedWithoutARequest) {
  Outcome run =
      resolve({"model.tensor_model_parallel_size=1", "comm_overlap.tp_comm_overlap=false"});
  EXPECT_FALSE(run.diags.has_code("tp-overlap-disabled"));
  expect_field<bool>(run.o().tp_comm_overlap, false, ValueSource::kUser, "M5");
}

TEST(OverlapTpGate, PointsAtTheRequestInTheFile) {
  std::string text = std::string(kBase) + "comm_overlap:\n  tp_comm_overlap: true\n";
  Outcome run = resolve({}, false, text);
  const Diagnostic* d = run.first("tp-overlap-disabled");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->loc.file, "t.yaml");
  EXPECT_EQ(d->loc.line, 4);
  EXPECT_EQ(d->loc.column, 20);
}

TEST(OverlapTpGate, StrictTurnsTheWarningIntoAnError) {
  Outcome run = resolve({"comm_overlap.tp_comm_overlap=true"}, /*strict=*/true);
  const Diagnostic* d = run.first("tp-overlap-disabled");
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_TRUE(run.diags.has_errors());
}

TEST(OverlapTpGate, GatedRequestStaysOffAndIsForwardedOff) {
  Outcome run = resolve({"comm_overlap.tp_comm_overlap=true"});
  auto args = overlap_runtime_args(run.res);
  EXPECT_NE(std::find(args.begin(), args.end(), "comm_overlap.tp_comm_overlap=false"), args.end());
}

// ---- M2 / M5 / E5 ----

TEST(OverlapPipeline, NoPipelineMeansNeitherP2pMode) {
  Outcome run = resolve({});
  EXPECT_EQ(run.o().overlap_p2p_comm.value, false);
  EXPECT_EQ(run.o().batch_p2p_comm.value, false);
}

TEST(OverlapPipeline, InterleavedPipelineOverlapsP2p) {
  Outcome run = resolve(
      {"model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2"});
  expect_field<bool>(run.o().overlap_p2p_comm, true, ValueSource::kRule, "M2");
  expect_field<bool>(run.o().batch_p2p_comm, false, ValueSource::kRule, "M2");
}

TEST(OverlapPipeline, PipelineWithoutVppBatchesP2p) {
  Outcome run = resolve({"model.pipeline_model_parallel_size=4"});
  expect_field<bool>(run.o().overlap_p2p_comm, false, ValueSource::kRule, "M2");
  expect_field<bool>(run.o().batch_p2p_comm, true, ValueSource::kRule, "M2");
}

TEST(OverlapPipeline, VppOfOneIsNotInterleaved) {
  Outcome run = resolve(
      {"model.pipeline_model_parallel_size=2", "model.virtual_pipeline_model_parallel_size=1"});
  EXPECT_EQ(run.o().overlap_p2p_comm.value, false);
  EXPECT_EQ(run.o().batch_p2p_comm.value, true);
}

TEST(OverlapPrecedence, UserFalseBeatsRuleTrue) {
  Outcome run = resolve({"model.pipeline_model_parallel_size=4",
                         "model.virtual_pipeline_model_parallel_size=2",
                         "comm_overlap.overlap_p2p_comm=false"});
  expect_field<bool>(run.o().overlap_p2p_comm, false, ValueSource::kUser, "M5");
  expect_field<bool>(run.o().batch_p2p_comm, false, ValueSource::kRule, "M2");
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
}

TEST(OverlapPrecedence, BatchP2pKeepsTheUsersValueToo) {
  Outcome run = resolve(
      {"model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=2",
       "comm_overlap.overlap_p2p_comm=false", "comm_overlap.batch_p2p_comm=true"});
  expect_field<bool>(run.o().overlap_p2p_comm, false, ValueSource::kUser, "M5");
  expect_field<bool>(run.o().batch_p2p_comm, true, ValueSource::kUser, "M5");
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
}

TEST(OverlapPrecedence, EveryModelLevelUserValueWins) {
  Outcome run = resolve({"comm_overlap.tp_comm_bootstrap_backend=mpi",
                         "comm_overlap.defer_embedding_wgrad_compute=true",
                         "comm_overlap.wgrad_deferral_limit=3", "comm_overlap.batch_p2p_comm=true",
                         "comm_overlap.overlap_moe_expert_parallel_comm=false",
                         "comm_overlap.delay_wgrad_compute=false"});
  const ResolvedOverlap& o = run.o();
  expect_field<std::string>(o.tp_comm_bootstrap_backend, "mpi", ValueSource::kUser, "M5");
  expect_field<bool>(o.defer_embedding_wgrad_compute, true, ValueSource::kUser, "M5");
  expect_field<int64_t>(o.wgrad_deferral_limit, 3, ValueSource::kUser, "M5");
  expect_field<bool>(o.batch_p2p_comm, true, ValueSource::kUser, "M5");
  expect_field<bool>(o.overlap_moe_expert_parallel_comm, false, ValueSource::kUser, "M5");
  expect_field<bool>(o.delay_wgrad_compute, false, ValueSource::kUser, "M5");
}

TEST(OverlapPrecedence, UnknownBootstrapBackendIsAnError) {
  Outcome run = resolve({"comm_overlap.tp_comm_bootstrap_backend=ncl"});
  const Diagnostic* d = run.first("unknown-bootstrap-backend");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.tp_comm_bootstrap_backend");
  EXPECT_THAT(d->message, HasSubstr("did you mean `nccl`"));
}

// Megatron-Core's TransformerConfig raises ValueError for a deferred embedding wgrad with a
// negative limit, and -1 is the default limit (E7).
TEST(OverlapPipeline, DeferredEmbeddingWgradNeedsANonNegativeLimit) {
  Outcome run = resolve(
      {"model.pipeline_model_parallel_size=2", "comm_overlap.defer_embedding_wgrad_compute=true"});
  const Diagnostic* d = run.first("wgrad-deferral-limit-negative");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.wgrad_deferral_limit");
  EXPECT_THAT(d->message, HasSubstr("wgrad_deferral_limit -1 (the default)"));
  EXPECT_THAT(d->help, HasSubstr("0 defers"));
  for (const char* limit : {"0", "22"}) {
    Outcome ok = resolve({"model.pipeline_model_parallel_size=2",
                          "comm_overlap.defer_embedding_wgrad_compute=true",
                          std::string("comm_overlap.wgrad_deferral_limit=") + limit});
    EXPECT_FALSE(ok.diags.has_code("wgrad-deferral-limit-negative")) << limit << ok.dump();
  }
}

// Megatron-Core's non-interleaved schedule raises ValueError when overlap_p2p_comm is true,
// so the user's value (which wins by M5) makes the job fail at its first step.
TEST(OverlapPipeline, P2pOverlapWithoutVppIsAnError) {
  Outcome run =
      resolve({"model.pipeline_model_parallel_size=4", "comm_overlap.overlap_p2p_comm=true"});
  const Diagnostic* d = run.first("p2p-overlap-without-vpp");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.overlap_p2p_comm");
  EXPECT_THAT(d->message, HasSubstr("non-interleaved schedule"));
  EXPECT_THAT(d->message, HasSubstr("first training step"));
  EXPECT_THAT(d->help, HasSubstr("virtual_pipeline_model_parallel_size"));
  EXPECT_EQ(run.o().overlap_p2p_comm.value, true);  // the user's value still wins (M5)
  // One diagnostic for the one cause: not also the interleaved schedule's pair check.
  EXPECT_FALSE(run.diags.has_code("p2p-comm-conflict")) << run.dump();
  EXPECT_EQ(run.diags.count(Severity::kError), 1u) << run.dump();
}

TEST(OverlapPipeline, P2pOverlapWithoutVppIsAnErrorWithoutStrictToo) {
  Outcome strict =
      resolve({"model.pipeline_model_parallel_size=2", "comm_overlap.overlap_p2p_comm=true"}, true);
  const Diagnostic* d = strict.first("p2p-overlap-without-vpp");
  ASSERT_NE(d, nullptr) << strict.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->help, ::testing::Not(HasSubstr("--strict")));
}

TEST(OverlapPipeline, P2pOverlapWithVppOrWithoutPipelineIsAccepted) {
  Outcome a = resolve({"model.pipeline_model_parallel_size=4",
                       "model.virtual_pipeline_model_parallel_size=2",
                       "comm_overlap.overlap_p2p_comm=true"});
  EXPECT_TRUE(a.diags.items().empty()) << a.dump();
  Outcome b = resolve({"comm_overlap.overlap_p2p_comm=true"});
  EXPECT_TRUE(b.diags.items().empty()) << b.dump();
}

// vpp 1 selects the interleaved schedule (with one chunk), where M2's batch_p2p_comm=true
// meets the user's overlap_p2p_comm=true: the interleaved schedule refuses the pair.
TEST(OverlapPipeline, P2pOverlapWithVppOneConflictsWithM2BatchedP2p) {
  Outcome run = resolve({"model.pipeline_model_parallel_size=4",
                         "model.virtual_pipeline_model_parallel_size=1",
                         "comm_overlap.overlap_p2p_comm=true"});
  const Diagnostic* d = run.first("p2p-comm-conflict");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->message, HasSubstr("M2"));
  EXPECT_THAT(d->help, HasSubstr("virtual_pipeline_model_parallel_size >= 2"));
  EXPECT_FALSE(run.diags.has_code("p2p-overlap-without-vpp")) << run.dump();
}

TEST(OverlapPipeline, P2pOverlapWithVppOneAndNoBatchingWarnsAboutTheBubble) {
  Outcome run = resolve(
      {"model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=1",
       "comm_overlap.overlap_p2p_comm=true", "comm_overlap.batch_p2p_comm=false"});
  const Diagnostic* d = run.first("p2p-overlap-single-chunk");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "comm_overlap.overlap_p2p_comm");
  EXPECT_THAT(d->message, HasSubstr("one model chunk"));
  EXPECT_THAT(d->message, HasSubstr("bubble"));
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
  // The flag does take effect there, so --strict does not turn this into an error.
  Outcome strict = resolve(
      {"model.pipeline_model_parallel_size=4", "model.virtual_pipeline_model_parallel_size=1",
       "comm_overlap.overlap_p2p_comm=true", "comm_overlap.batch_p2p_comm=false"},
      true);
  EXPECT_FALSE(strict.diags.has_errors()) << strict.dump();
}

TEST(OverlapPipeline, BothP2pModesWithInterleavingIsAnError) {
  Outcome run =
      resolve({"model.pipeline_model_parallel_size=4",
               "model.virtual_pipeline_model_parallel_size=2", "comm_overlap.batch_p2p_comm=true"});
  const Diagnostic* d = run.first("p2p-comm-conflict");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.batch_p2p_comm");
  EXPECT_THAT(d->help, HasSubstr("batch_p2p_comm: false"));
}

// ---- M3 / E6 ----

TEST(OverlapEp, MinimalValidRecipeEnablesEpOverlap) {
  Outcome run = resolve(kEpOverlapOk);
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
  expect_field<bool>(run.o().overlap_moe_expert_parallel_comm, true, ValueSource::kUser, "M5");
}

TEST(OverlapEp, FlexDispatcherAndFp16AreAccepted) {
  Outcome run = resolve(
      plus(kEpOverlapOk, {"model.moe_token_dispatcher_type=flex",
                          "model.moe_flex_dispatcher_backend=deepep", "model.precision=fp16"}));
  EXPECT_FALSE(run.diags.has_code("ep-overlap-prerequisite")) << run.dump();
  EXPECT_EQ(run.res.flex_dispatcher_backend, "deepep");
}

TEST(OverlapEp, MtpLayersZeroOrOneAcceptedTwoRejected) {
  for (const char* ok : {"model.mtp_num_layers=0", "model.mtp_num_layers=1"}) {
    Outcome run = resolve(plus(kEpOverlapOk, {ok}));
    EXPECT_FALSE(run.diags.has_errors()) << ok << "\n" << run.dump();
  }
  Outcome run = resolve(plus(kEpOverlapOk, {"model.mtp_num_layers=2"}));
  EXPECT_THAT(run.paths("ep-overlap-prerequisite"), ElementsAre("model.mtp_num_layers"));
  EXPECT_THAT(run.first("ep-overlap-prerequisite")->message, HasSubstr("got 2"));
}

TEST(OverlapEp, MoeInRecomputeModulesRejected) {
  Outcome run = resolve(plus(kEpOverlapOk, {"model.recompute_granularity=selective",
                                            "model.recompute_modules=[core_attn,moe]"}));
  EXPECT_THAT(run.paths("ep-overlap-prerequisite"), ElementsAre("model.recompute_modules"));
  Outcome ok = resolve(plus(kEpOverlapOk, {"model.recompute_granularity=selective",
                                           "model.recompute_modules=[core_attn,mlp]"}));
  EXPECT_FALSE(ok.diags.has_errors()) << ok.dump();
}

TEST(OverlapEp, PipelineWithoutVppRejected) {
  Outcome run = resolve(plus(kEpOverlapOk, {"model.pipeline_model_parallel_size=2"}));
  EXPECT_THAT(run.paths("ep-overlap-prerequisite"),
              ElementsAre("model.virtual_pipeline_model_parallel_size"));
  Outcome ok = resolve(plus(kEpOverlapOk, {"model.pipeline_model_parallel_size=2",
                                           "model.virtual_pipeline_model_parallel_size=2"}));
  EXPECT_FALSE(ok.diags.has_errors()) << ok.dump();
}

TEST(OverlapEp, EachSizeAndTypePrerequisite) {
  struct Case {
    const char* override_arg;
    const char* path;
    const char* text;
  } cases[] = {
      {"model.expert_model_parallel_size=1", "model.expert_model_parallel_size", "got 1"},
      {"model.num_moe_experts=null", "model.num_moe_experts", "null"},
      {"model.moe_token_dispatcher_type=allgather", "model.moe_token_dispatcher_type", "allgather"},
      {"model.moe_token_dispatcher_type=null", "model.moe_token_dispatcher_type", "allgather"},
      {"model.precision=fp32", "model.precision", "fp32"},
      {"model.moe_shared_expert_overlap=true", "model.moe_shared_expert_overlap", "true"},
      {"model.recompute_method=uniform", "model.recompute_method", "uniform"},
      {"model.recompute_num_layers=2", "model.recompute_num_layers", "got 2"},
      {"runtime.torch=\"2.5.1\"", "runtime.torch", "2.5.1"},
  };
  for (const auto& c : cases) {
    Outcome run = resolve(plus(kEpOverlapOk, {c.override_arg}));
    auto hits = run.all("ep-overlap-prerequisite");
    ASSERT_EQ(hits.size(), 1u) << c.override_arg << "\n" << run.dump();
    EXPECT_EQ(hits[0]->severity, Severity::kError);
    EXPECT_EQ(hits[0]->path, c.path);
    EXPECT_THAT(hits[0]->message, HasSubstr(c.text)) << c.override_arg;
    EXPECT_FALSE(hits[0]->help.empty());
  }
}

TEST(OverlapEp, ReleasedAndLocalTorchBuildsAreAccepted) {
  for (const char* v :
       {"runtime.torch=\"2.6.0\"", "runtime.torch=\"2.6.0+git1234\"", "runtime.torch=\"2.6\"",
        "runtime.torch=\"2.6.0.post1\"", "runtime.torch=\"2.7.0a0+79aa17489c.nv25.04\"",
        "runtime.torch=\"2.10.0\""}) {
    Outcome run = resolve(plus(kEpOverlapOk, {v}));
    EXPECT_FALSE(run.diags.has_errors()) << v << "\n" << run.dump();
  }
}

// The NGC 25.01 torch is a 2.6.0 pre-release; Megatron-Bridge's is_torch_min_version("2.6.0")
// compares with packaging.version and fails its "A2A Overlap encounters hang issue" assertion.
TEST(OverlapEp, NgcTorchPreReleaseOf26IsRefused) {
  Outcome run = resolve(plus(kEpOverlapOk, {"runtime.torch=\"2.6.0a0+ecf3bae40a.nv25.01\""}));
  const Diagnostic* d = run.first("ep-overlap-prerequisite", "runtime.torch");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->message, HasSubstr("torch >= 2.6.0"));
  EXPECT_THAT(d->message, HasSubstr("2.6.0a0+ecf3bae40a.nv25.01"));
  EXPECT_THAT(d->message, HasSubstr("pre-release of 2.6.0"));
  EXPECT_THAT(d->help, HasSubstr("hangs"));
  for (const char* v : {"runtime.torch=\"2.6.0rc1\"", "runtime.torch=\"2.6.0.dev20241112\"",
                        "runtime.torch=\"2.5.1\""}) {
    Outcome older = resolve(plus(kEpOverlapOk, {v}));
    EXPECT_TRUE(older.first("ep-overlap-prerequisite", "runtime.torch")) << v << "\n"
                                                                         << older.dump();
  }
}

TEST(OverlapEp, UnknownTorchIsAnUnverifiedWarning) {
  Outcome run = resolve(plus(kEpOverlapOk, {"runtime.torch=null"}));
  const Diagnostic* d = run.first("unverified-version");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_EQ(d->path, "runtime.torch");
  EXPECT_THAT(d->message, HasSubstr("torch >= 2.6.0"));
  EXPECT_FALSE(run.diags.has_errors());
}

TEST(OverlapEp, FullRecomputeErrorSuggestsSelective) {
  Outcome run = resolve(plus(kEpOverlapOk, {"model.recompute_granularity=full"}));
  const Diagnostic* d = run.first("ep-overlap-prerequisite", "model.recompute_granularity");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_THAT(d->message, HasSubstr("full"));
  EXPECT_THAT(d->help, HasSubstr("selective"));
}

TEST(OverlapEp, AllFailingPrerequisitesAreReportedTogether) {
  Outcome run =
      resolve({"model.pipeline_model_parallel_size=2", "model.precision=fp32",
               "model.moe_token_dispatcher_type=allgather", "model.recompute_granularity=full",
               "model.recompute_method=uniform", "model.recompute_num_layers=1",
               "model.recompute_modules=[moe]", "model.moe_shared_expert_overlap=true",
               "model.mtp_num_layers=3", "runtime.torch=\"2.4.0\"",
               "comm_overlap.overlap_moe_expert_parallel_comm=true"});
  EXPECT_THAT(run.paths("ep-overlap-prerequisite"),
              UnorderedElementsAre("model.expert_model_parallel_size", "model.num_moe_experts",
                                   "model.moe_token_dispatcher_type", "model.precision",
                                   "runtime.torch", "model.virtual_pipeline_model_parallel_size",
                                   "model.recompute_granularity", "model.recompute_method",
                                   "model.recompute_num_layers", "model.recompute_modules",
                                   "model.moe_shared_expert_overlap", "model.mtp_num_layers"));
  for (const auto* d : run.all("ep-overlap-prerequisite"))
    EXPECT_THAT(d->message, HasSubstr(d->path)) << d->path;
}

TEST(OverlapEp, LocationIsTheFieldOrElseTheRequest) {
  std::string text = std::string(kBase) +
                     "model:\n"
                     "  expert_model_parallel_size: 2\n"
                     "  num_moe_experts: 2\n"
                     "  precision: fp32\n"
                     "runtime: {torch: \"2.9.0\"}\n"
                     "comm_overlap:\n"
                     "  overlap_moe_expert_parallel_comm: true\n";
  Outcome run = resolve({}, false, text);
  const Diagnostic* precision = run.first("ep-overlap-prerequisite", "model.precision");
  ASSERT_NE(precision, nullptr) << run.dump();
  EXPECT_EQ(precision->loc.line, 6);
  EXPECT_EQ(precision->loc.column, 14);
  // The dispatcher is unset: the diagnostic points at the request.
  const Diagnostic* dispatcher =
      run.first("ep-overlap-prerequisite", "model.moe_token_dispatcher_type");
  ASSERT_NE(dispatcher, nullptr) << run.dump();
  EXPECT_EQ(dispatcher->loc.line, 9);
  EXPECT_EQ(dispatcher->loc.column, 37);
}

TEST(OverlapEp, ModelLevelFlagAloneDoesNotTriggerPrerequisites) {
  Outcome run = resolve({"model.overlap_moe_expert_parallel_comm=true"});
  EXPECT_FALSE(run.diags.has_code("ep-overlap-prerequisite")) << run.dump();
  // ...but the runtime overwrites it with the resolved false: the user is told.
  const Diagnostic* d = run.first("ep-overlap-flag-overridden");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->path, "model.overlap_moe_expert_parallel_comm");
  EXPECT_THAT(d->help, HasSubstr("comm_overlap.overlap_moe_expert_parallel_comm: true"));
  EXPECT_EQ(run.o().overlap_moe_expert_parallel_comm.value, false);
}

TEST(OverlapEp, UserFalseSkipsThePrerequisites) {
  Outcome run = resolve({"comm_overlap.overlap_moe_expert_parallel_comm=false"});
  EXPECT_FALSE(run.diags.has_code("ep-overlap-prerequisite"));
}

// ---- M4 ----

std::vector<std::string> delay_wgrad(const std::vector<std::string>& extra) {
  return plus(plus(kEpOverlapOk, {"comm_overlap.delay_wgrad_compute=true"}), extra);
}

TEST(OverlapDelayWgrad, WithEpOverlapIsAccepted) {
  Outcome run = resolve(delay_wgrad({"runtime.transformer_engine=\"2.9.0\""}));
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
  expect_field<bool>(run.o().delay_wgrad_compute, true, ValueSource::kUser, "M5");
}

TEST(OverlapDelayWgrad, WithoutEpOverlapRejected) {
  Outcome run = resolve({"comm_overlap.delay_wgrad_compute=true"});
  const Diagnostic* d = run.first("delay-wgrad-requires-ep-overlap");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "comm_overlap.delay_wgrad_compute");
  EXPECT_THAT(d->help, HasSubstr("overlap_moe_expert_parallel_comm: true"));
}

TEST(OverlapDelayWgrad, ModelLevelEpFlagSatisfiesTheRequirement) {
  Outcome run = resolve(
      {"model.overlap_moe_expert_parallel_comm=true", "comm_overlap.delay_wgrad_compute=true"});
  EXPECT_FALSE(run.diags.has_code("delay-wgrad-requires-ep-overlap")) << run.dump();
}

TEST(OverlapDelayWgrad, GradReduceOverlapNeedsTe27) {
  // Data-parallel overlap applies with the distributed optimizer (D1); without it the user's
  // comm_overlap.overlap_grad_reduce is ignored, and so is its TE requirement.
  Outcome old_te = resolve(
      delay_wgrad({"ddp.use_distributed_optimizer=true", "comm_overlap.overlap_grad_reduce=true",
                   "runtime.transformer_engine=\"2.6.0\""}));
  const Diagnostic* d = old_te.first("delay-wgrad-te-version");
  ASSERT_NE(d, nullptr) << old_te.dump();
  EXPECT_EQ(d->path, "runtime.transformer_engine");
  EXPECT_THAT(d->message, HasSubstr("overlap_grad_reduce"));
  EXPECT_THAT(d->message, HasSubstr(">= 2.7.0"));
  Outcome ddp_flag = resolve(
      delay_wgrad({"ddp.overlap_grad_reduce=true", "runtime.transformer_engine=\"2.6.1\""}));
  EXPECT_TRUE(ddp_flag.diags.has_code("delay-wgrad-te-version")) << ddp_flag.dump();
  Outcome ok = resolve(delay_wgrad(
      {"comm_overlap.overlap_grad_reduce=true", "runtime.transformer_engine=\"2.7.0\""}));
  EXPECT_FALSE(ok.diags.has_code("delay-wgrad-te-version")) << ok.dump();
  Outcome dev = resolve(
      delay_wgrad({"ddp.use_distributed_optimizer=true", "comm_overlap.overlap_grad_reduce=true",
                   "runtime.transformer_engine=\"2.7.0.dev0+f05f12c\""}));
  EXPECT_TRUE(dev.diags.has_code("delay-wgrad-te-version")) << dev.dump();
}

// The check reads the value the job gets: with the distributed optimizer a rule turns the
// grad-reduce overlap on (D1/D2), and delay_wgrad then needs TE >= 2.7 just the same
// (the plan used to send ddp.overlap_grad_reduce=true with TE 2.6 and say ok).
TEST(OverlapDelayWgrad, GradReduceOverlapFromARuleNeedsTe27Too) {
  Outcome old_te = resolve(
      delay_wgrad({"ddp.use_distributed_optimizer=true", "runtime.transformer_engine=\"2.6.0\""}));
  ASSERT_EQ(old_te.res.ddp.overlap_grad_reduce, std::optional<bool>(true)) << old_te.dump();
  const Diagnostic* d = old_te.first("delay-wgrad-te-version");
  ASSERT_NE(d, nullptr) << old_te.dump();
  EXPECT_THAT(d->message, HasSubstr("turned on by rule"));
  Outcome unknown = resolve(delay_wgrad({"ddp.use_distributed_optimizer=true"}));
  EXPECT_NE(unknown.first("unverified-version", "runtime.transformer_engine"), nullptr)
      << unknown.dump();
  Outcome ok = resolve(
      delay_wgrad({"ddp.use_distributed_optimizer=true", "runtime.transformer_engine=\"2.7.0\""}));
  EXPECT_FALSE(ok.diags.has_code("delay-wgrad-te-version")) << ok.dump();
}

TEST(OverlapDelayWgrad, GradientAccumulationFusionNeedsTe27) {
  Outcome run = resolve(delay_wgrad(
      {"model.gradient_accumulation_fusion=true", "runtime.transformer_engine=\"2.5.0\""}));
  const Diagnostic* d = run.first("delay-wgrad-te-version");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_THAT(d->message, HasSubstr("gradient_accumulation_fusion"));
  Outcome absent = resolve(
      delay_wgrad({"model.gradient_accumulation_fusion=true", "runtime.transformer_engine=false"}));
  const Diagnostic* a = absent.first("delay-wgrad-te-version");
  ASSERT_NE(a, nullptr) << absent.dump();
  EXPECT_THAT(a->message, HasSubstr("false"));
}

TEST(OverlapDelayWgrad, UnknownTeIsAnUnverifiedWarning) {
  Outcome run = resolve(delay_wgrad({"model.gradient_accumulation_fusion=true"}));
  const Diagnostic* d = run.first("unverified-version", "runtime.transformer_engine");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kWarning);
  EXPECT_THAT(d->message, HasSubstr("2.7.0"));
  EXPECT_FALSE(run.diags.has_errors()) << run.dump();
}

TEST(OverlapDelayWgrad, NoTeRequirementWithoutGradReduceOrFusion) {
  Outcome run = resolve(delay_wgrad({"runtime.transformer_engine=\"2.0.0\""}));
  EXPECT_FALSE(run.diags.has_code("delay-wgrad-te-version")) << run.dump();
}

// Bias-free attention unless a test says otherwise, so that each test sees only its subject
// (an unset add_bias_linear means true, which fails the check on its own).
std::vector<std::string> graphed_attn(const std::vector<std::string>& extra) {
  return delay_wgrad(plus({"model.cuda_graph_impl=transformer_engine",
                           "model.cuda_graph_scope=[attn]", "model.add_bias_linear=false"},
                          extra));
}

TEST(OverlapDelayWgrad, GraphedAttentionWithoutGaFusionRejected) {
  Outcome unset = resolve(graphed_attn({"runtime.transformer_engine=\"2.12.0\""}));
  const Diagnostic* d = unset.first("cuda-graph-scope-unsupported");
  ASSERT_NE(d, nullptr) << unset.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_EQ(d->path, "model.gradient_accumulation_fusion");
  EXPECT_THAT(d->help, HasSubstr("gradient_accumulation_fusion: true"));
  Outcome off = resolve(graphed_attn(
      {"runtime.transformer_engine=\"2.12.0\"", "model.gradient_accumulation_fusion=false"}));
  EXPECT_THAT(off.paths("cuda-graph-scope-unsupported"),
              ElementsAre("model.gradient_accumulation_fusion"));
}

// Under the Megatron-Bridge adapters an unset gradient_accumulation_fusion means true (the
// provider turns it on when Transformer Engine imports): the graphed-attention check does not
// tell the user to set what the runtime already uses (a new user's report, issue 47).
TEST(OverlapDelayWgrad, GraphedAttentionUnderMegatronBridgeTakesTheUnsetFusionAsOn) {
  Outcome run = resolve(graphed_attn(
      {"runtime.transformer_engine=\"2.12.0\"", "runtime.command=[python, pretrain.py]"}));
  EXPECT_EQ(run.first("cuda-graph-scope-unsupported", "model.gradient_accumulation_fusion"),
            nullptr)
      << run.dump();
  Outcome off = resolve(graphed_attn({"runtime.transformer_engine=\"2.12.0\"",
                                      "runtime.command=[python, pretrain.py]",
                                      "model.gradient_accumulation_fusion=false"}));
  EXPECT_THAT(off.paths("cuda-graph-scope-unsupported"),
              ElementsAre("model.gradient_accumulation_fusion"));
}

TEST(OverlapDelayWgrad, GraphedAttentionWithBiasRejected) {
  Outcome run = resolve(graphed_attn({"runtime.transformer_engine=\"2.12.0\"",
                                      "model.gradient_accumulation_fusion=true",
                                      "model.add_bias_linear=true", "model.add_qkv_bias=true"}));
  EXPECT_THAT(run.paths("cuda-graph-scope-unsupported"),
              ElementsAre("model.add_bias_linear", "model.add_qkv_bias"));
}

// Megatron-Core's add_bias_linear defaults to true, so leaving it unset keeps the bias that
// Megatron-Bridge's "does not support attention bias" assertion refuses.
TEST(OverlapDelayWgrad, GraphedAttentionWithUnsetBiasLinearRejected) {
  Outcome run = resolve(delay_wgrad(
      {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=[attn]",
       "runtime.transformer_engine=\"2.12.0\"", "model.gradient_accumulation_fusion=true"}));
  EXPECT_THAT(run.paths("cuda-graph-scope-unsupported"), ElementsAre("model.add_bias_linear"));
  const Diagnostic* d = run.first("cuda-graph-scope-unsupported");
  ASSERT_NE(d, nullptr) << run.dump();
  EXPECT_EQ(d->severity, Severity::kError);
  EXPECT_THAT(d->message, HasSubstr("unset, which means true"));
  EXPECT_THAT(d->help, HasSubstr("model.add_bias_linear: false"));
  // Pointed at the scope that triggered the check, since the field has no line of its own.
  EXPECT_TRUE(d->loc.from_override()) << d->loc.describe();
  EXPECT_THAT(d->loc.override_arg, HasSubstr("cuda_graph_scope"));
  // add_qkv_bias keeps Megatron-Core's default false: unset is fine.
  EXPECT_EQ(run.first("cuda-graph-scope-unsupported", "model.add_qkv_bias"), nullptr);
}

TEST(OverlapDelayWgrad, GraphedAttentionNeedsTe212) {
  Outcome run = resolve(graphed_attn(
      {"runtime.transformer_engine=\"2.11.0\"", "model.gradient_accumulation_fusion=true"}));
  EXPECT_THAT(run.paths("cuda-graph-scope-unsupported"), ElementsAre("runtime.transformer_engine"));
  EXPECT_THAT(run.first("cuda-graph-scope-unsupported")->message, HasSubstr("2.12.0"));
  // TE pre-releases of 2.12.0 are older than 2.12.0 (PEP 440), as the runtime sees them.
  for (const char* v : {"2.12.0rc1", "2.12.0a0", "2.12.0.dev0+f05f12c"}) {
    Outcome pre = resolve(graphed_attn({std::string("runtime.transformer_engine=\"") + v + "\"",
                                        "model.gradient_accumulation_fusion=true"}));
    EXPECT_THAT(pre.paths("cuda-graph-scope-unsupported"),
                ElementsAre("runtime.transformer_engine"))
        << v;
  }
  Outcome local = resolve(graphed_attn({"runtime.transformer_engine=\"2.12.0+5e4e0b2\"",
                                        "model.gradient_accumulation_fusion=true"}));
  EXPECT_TRUE(local.diags.items().empty()) << local.dump();
}

TEST(OverlapDelayWgrad, SupportedGraphedAttentionAccepted) {
  Outcome run = resolve(graphed_attn({"runtime.transformer_engine=\"2.12.0\"",
                                      "model.gradient_accumulation_fusion=true",
                                      "model.add_bias_linear=false", "model.add_qkv_bias=false"}));
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
}

TEST(OverlapDelayWgrad, CudaGraphsOffDoNotCheckTheScope) {
  Outcome run =
      resolve(delay_wgrad({"model.cuda_graph_impl=none", "model.cuda_graph_scope=[attn]"}));
  EXPECT_FALSE(run.diags.has_code("cuda-graph-scope-unsupported")) << run.dump();
}

TEST(OverlapDelayWgrad, GraphedRouterOnlyMattersWithANonOverlappedSharedExpert) {
  std::vector<std::string> router{"model.cuda_graph_impl=local",
                                  "model.cuda_graph_scope=[moe_router]",
                                  "runtime.transformer_engine=\"2.12.0\""};
  Outcome plain = resolve(delay_wgrad(router));
  EXPECT_FALSE(plain.diags.has_code("cuda-graph-scope-unsupported")) << plain.dump();
  Outcome shared =
      resolve(delay_wgrad(plus(router, {"model.moe_shared_expert_intermediate_size=1024"})));
  EXPECT_THAT(shared.paths("cuda-graph-scope-unsupported"),
              ElementsAre("model.gradient_accumulation_fusion"));
  // Router scope does not require bias-free attention.
  Outcome bias = resolve(delay_wgrad(
      plus(router, {"model.moe_shared_expert_intermediate_size=1024",
                    "model.gradient_accumulation_fusion=true", "model.add_bias_linear=true"})));
  EXPECT_FALSE(bias.diags.has_code("cuda-graph-scope-unsupported")) << bias.dump();
}

TEST(OverlapDelayWgrad, NotCheckedWhenDelayWgradIsOff) {
  Outcome run = resolve({"model.cuda_graph_impl=local", "model.cuda_graph_scope=[attn]",
                         "runtime.transformer_engine=\"2.0.0\""});
  EXPECT_TRUE(run.diags.items().empty()) << run.dump();
}

}  // namespace
}  // namespace bridge
