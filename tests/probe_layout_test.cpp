// bridge-probe's pure parts: the layout it reads from the plan, the process groups in
// Megatron-Core's rank order, the overlap fields and what it says about each, and the
// two-stream schedule every emulated overlap runs on (with sleeps as parts, directions only).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "model/overlap.h"
#include "probe/env_check.h"
#include "probe/knobs.h"
#include "probe/layout.h"
#include "probe/options.h"
#include "probe/overlap_engine.h"
#include "probe/probe_error.h"
#include "probe/transport.h"

namespace bridge::probe {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

Layout MustRead(const std::vector<std::string>& overrides, int world) {
  const LayoutResult r = read_layout(overrides, world);
  EXPECT_TRUE(r.layout) << r.error;
  return r.layout.value_or(Layout{});
}

TEST(ProbeLayout, AbsentAndNullSizesAreOne) {
  const Layout l = MustRead({"model.virtual_pipeline_model_parallel_size=null"}, 4);
  EXPECT_EQ(l.tp, 1);
  EXPECT_EQ(l.pp, 1);
  EXPECT_FALSE(l.vpp);
  EXPECT_EQ(l.dp, 4);
  EXPECT_EQ(l.ep, 1);
  EXPECT_FALSE(l.sequence_parallel);
}

TEST(ProbeLayout, SizesThatDoNotFitTheWorldAreErrors) {
  EXPECT_THAT(read_layout({"model.tensor_model_parallel_size=3"}, 8).error,
              HasSubstr("tp*pp*cp = 3 does not divide the world size 8"));
  EXPECT_THAT(read_layout({"model.expert_model_parallel_size=16"}, 8).error,
              HasSubstr("etp*ep*pp = 16 does not divide the world size 8"));
  EXPECT_THAT(read_layout({"model.pipeline_model_parallel_size=two"}, 8).error,
              HasSubstr("is not a positive integer"));
}

// World 8, tp 2, pp 2: Megatron-Core's dense groups (order tp-cp-dp-pp).
TEST(ProbeLayout, DenseGroupsFollowMegatronOrder) {
  const Layout l =
      MustRead({"model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                "model.sequence_parallel=true"},
               8);
  EXPECT_EQ(l.dp, 2);
  EXPECT_TRUE(l.sequence_parallel);
  const RankGroups g5 = groups_of(l, 5);
  EXPECT_THAT(g5.tp.ranks, ElementsAre(4, 5));
  EXPECT_EQ(g5.tp.index, 1);
  EXPECT_THAT(g5.pp.ranks, ElementsAre(1, 5));
  EXPECT_EQ(g5.pp.index, 1);
  EXPECT_THAT(g5.dp.ranks, ElementsAre(5, 7));
  EXPECT_EQ(g5.dp.index, 0);
  EXPECT_THAT(groups_of(l, 2).dp.ranks, ElementsAre(0, 2));
}

// Expert groups use etp-ep-edp-pp; an unset etp follows tp, as in Megatron-Core.
TEST(ProbeLayout, ExpertGroupsFollowMegatronOrder) {
  const Layout etp1 =
      MustRead({"model.tensor_model_parallel_size=2", "model.expert_model_parallel_size=4",
                "model.expert_tensor_parallel_size=1"},
               8);
  EXPECT_EQ(etp1.edp, 2);
  EXPECT_THAT(groups_of(etp1, 6).ep.ranks, ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(groups_of(etp1, 6).ep.index, 2);
  const Layout etp_tp =
      MustRead({"model.tensor_model_parallel_size=2", "model.expert_model_parallel_size=2"}, 8);
  EXPECT_EQ(etp_tp.etp, 2);
  EXPECT_THAT(groups_of(etp_tp, 1).ep.ranks, ElementsAre(1, 3));
  EXPECT_THAT(groups_of(etp_tp, 5).ep.ranks, ElementsAre(5, 7));
}

TEST(ProbeLayout, EveryGroupHasEachMemberOnceAndTheSameMembersEverywhere) {
  const Layout l =
      MustRead({"model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                "model.context_parallel_size=2", "model.expert_model_parallel_size=4",
                "model.expert_tensor_parallel_size=1"},
               16);
  for (int r = 0; r < 16; ++r) {
    const RankGroups g = groups_of(l, r);
    for (const Group* group : {&g.tp, &g.pp, &g.dp, &g.ep}) {
      EXPECT_EQ(group->ranks[static_cast<size_t>(group->index)], r);
      for (const int member : group->ranks) {
        const RankGroups other = groups_of(l, member);
        const Group* same = group == &g.tp   ? &other.tp
                            : group == &g.pp ? &other.pp
                            : group == &g.dp ? &other.dp
                                             : &other.ep;
        EXPECT_EQ(same->ranks, group->ranks) << "rank " << r << " and " << member;
      }
    }
  }
}

TEST(ProbeLayout, PeersAreSymmetric) {
  const Layout l =
      MustRead({"model.tensor_model_parallel_size=2", "model.pipeline_model_parallel_size=2",
                "model.expert_model_parallel_size=4", "model.expert_tensor_parallel_size=1"},
               16);
  for (int a = 0; a < 16; ++a) {
    for (const int b : peers_of(l, a)) {
      const std::vector<int> back = peers_of(l, b);
      EXPECT_NE(std::find(back.begin(), back.end(), a), back.end()) << a << " -> " << b;
    }
  }
}

TEST(ProbeKnobs, ReadsTheForwardedFieldsAndTheDdpFallbacks) {
  const OverlapKnobs k = read_knobs(
      {"comm_overlap.tp_comm_overlap=true", "comm_overlap.overlap_moe_expert_parallel_comm=True",
       "comm_overlap.delay_wgrad_compute=false", "ddp.overlap_param_gather=true",
       "ddp.use_distributed_optimizer=true", "ddp.bucket_size=4096"});
  EXPECT_TRUE(k.tp_comm_overlap);
  EXPECT_TRUE(k.overlap_moe_expert_parallel_comm);
  EXPECT_FALSE(k.delay_wgrad_compute);
  EXPECT_TRUE(k.overlap_param_gather);
  EXPECT_TRUE(k.distributed_optimizer);
  EXPECT_EQ(k.bucket_size, 4096);
}

TEST(ProbeKnobs, BucketSizeSetsTheBucketCountUnlessTheFlagDoes) {
  EXPECT_EQ(plan_buckets(65536, std::nullopt, 4096).buckets, 16);
  EXPECT_EQ(plan_buckets(65537, std::nullopt, 4096).buckets, 17);
  EXPECT_EQ(plan_buckets(65536, std::nullopt, int64_t{134217728}).buckets, 1);
  EXPECT_EQ(plan_buckets(65536, 3, 4096).buckets, 3);
  EXPECT_EQ(plan_buckets(65536, 3, 4096).source, "--buckets");
  EXPECT_EQ(plan_buckets(65536, std::nullopt, std::nullopt).buckets, 8);
}

TEST(ProbeKnobs, EachForwardedFieldSaysWhatItDoesInThisLayout) {
  const std::vector<std::string> overrides{
      "comm_overlap.tp_comm_overlap=true", "comm_overlap.overlap_p2p_comm=false",
      "comm_overlap.overlap_moe_expert_parallel_comm=true", "comm_overlap.bucket_size=1024",
      "model.expert_model_parallel_size=2"};
  const Layout l = MustRead(overrides, 2);
  const auto lines = describe_knobs(overrides, l, read_knobs(overrides), {4, "bucket_size"});
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], HasSubstr("tp_comm_overlap=true: inactive: tp=1"));
  EXPECT_THAT(lines[1], HasSubstr("overlap_p2p_comm=false: inactive: pp=1"));
  EXPECT_THAT(lines[2], HasSubstr("overlap_moe_expert_parallel_comm=true: ep phase: a "
                                  "micro-batch's dispatch/combine all-to-all overlaps"));
  EXPECT_THAT(lines[3], HasSubstr("bucket_size=1024: dp-grad phase: 4 gradient buckets"));
  for (const auto& line : lines) EXPECT_THAT(line, Not(HasSubstr("no effect")));
}

TEST(ProbeKnobs, TpOverlapWithoutSequenceParallelIsReportedAsRefused) {
  const std::vector<std::string> overrides{"comm_overlap.tp_comm_overlap=true",
                                           "model.tensor_model_parallel_size=2"};
  const auto lines =
      describe_knobs(overrides, MustRead(overrides, 2), read_knobs(overrides), {1, "default"});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("REFUSED: needs sequence_parallel"));
}

TEST(ProbeKnobs, ReadsTheParamGatherDeferralAndUserbuffersFields) {
  const OverlapKnobs k = read_knobs(
      {"ddp.align_param_gather=true", "optimizer.overlap_param_gather_with_optimizer_step=true",
       "comm_overlap.defer_embedding_wgrad_compute=true", "comm_overlap.wgrad_deferral_limit=3",
       "comm_overlap.tp_comm_overlap_cfg=userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192"});
  EXPECT_TRUE(k.align_param_gather);
  EXPECT_TRUE(k.overlap_param_gather_with_optimizer_step);
  EXPECT_TRUE(k.defer_embedding_wgrad_compute);
  EXPECT_EQ(k.wgrad_deferral_limit, 3);
  EXPECT_EQ(k.tp_comm_overlap_cfg, "userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192");
  const OverlapKnobs none = read_knobs({"comm_overlap.tp_comm_overlap_cfg=null"});
  EXPECT_FALSE(none.tp_comm_overlap_cfg);
  EXPECT_EQ(none.wgrad_deferral_limit, 0);  // Megatron-Core's default: every micro-batch.
}

// Megatron-Core's meaning of wgrad_deferral_limit: 0 defers every micro-batch, N the first N.
TEST(ProbeKnobs, DeferralLimitCapsTheDeferredMicroBatches) {
  OverlapKnobs k;
  EXPECT_EQ(deferred_embedding_wgrads(k, 4), 0);
  k.defer_embedding_wgrad_compute = true;
  EXPECT_EQ(deferred_embedding_wgrads(k, 4), 4);
  k.wgrad_deferral_limit = 1;
  EXPECT_EQ(deferred_embedding_wgrads(k, 4), 1);
  k.wgrad_deferral_limit = 9;
  EXPECT_EQ(deferred_embedding_wgrads(k, 4), 4);
  k.wgrad_deferral_limit = -1;  // Refused at set-up (exit 2); never deferred.
  EXPECT_EQ(deferred_embedding_wgrads(k, 4), 0);
}

TEST(ProbeKnobs, UserbuffersSplitFollowsTheFc2FpropMethod) {
  EXPECT_EQ(plan_tp_split(std::nullopt, 2).chunks, 4);
  EXPECT_EQ(plan_tp_split("userbuffers_fp8_b200_h8192_tp2_mbs1_seqlen8192", 8).chunks, 8);   // ring
  EXPECT_EQ(plan_tp_split("userbuffers_bf16_b200_h8192_tp2_mbs1_seqlen8192", 8).chunks, 4);  // pipe
  EXPECT_EQ(plan_tp_split("no_such_preset", 2).chunks, 4);
  EXPECT_THAT(plan_tp_split("no_such_preset", 2).source, HasSubstr("unknown preset"));
  EXPECT_EQ(plan_tp_split("{qkv_dgrad:{method:bulk,num_sm:4},fc2_fprop:{method:pipeline,num_sm:"
                          "8,num_splits:6,set_sm_margin:true}}",
                          2)
                .chunks,
            6);
  EXPECT_EQ(plan_tp_split("{fc2_fprop:{method:ring_exchange,aggregate:false}}", 4).chunks, 4);
  EXPECT_EQ(plan_tp_split("{qkv_dgrad:{method:bulk,num_sm:4}}", 2).chunks, 1);
}

// The probe's copy of the presets' fc2_fprop methods agrees with the launcher's table: each
// preset by name splits as its own expansion, passed inline, does.
TEST(ProbeKnobs, UserbuffersPresetSplitsMatchTheLaunchersPresets) {
  ASSERT_EQ(userbuffers_preset_names().size(), 19u);
  for (const std::string& name : userbuffers_preset_names()) {
    const auto expanded = expand_userbuffers_preset(name);
    ASSERT_TRUE(expanded) << name;
    const TpSplit by_name = plan_tp_split(name, 8);
    EXPECT_THAT(by_name.source, HasSubstr("preset")) << name;
    EXPECT_EQ(by_name.chunks, plan_tp_split(userbuffers_hydra_value(*expanded), 8).chunks) << name;
  }
}

TEST(ProbeKnobs, BootstrapBackendSaysItHasNothingToEmulate) {
  const std::vector<std::string> overrides{"comm_overlap.tp_comm_bootstrap_backend=nccl",
                                           "model.tensor_model_parallel_size=2"};
  const auto lines =
      describe_knobs(overrides, MustRead(overrides, 2), read_knobs(overrides), {1, "default"});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_THAT(lines[0], HasSubstr("tp_comm_bootstrap_backend=nccl: bootstrap only: no effect on "
                                  "step time, nothing to emulate"));
}

// In a layout where every phase runs, no forwarded field is left unmodeled.
TEST(ProbeKnobs, NoForwardedFieldIsUnmodeledWhenItsPhaseRuns) {
  const std::vector<std::string> overrides{
      "model.tensor_model_parallel_size=2",
      "model.sequence_parallel=true",
      "model.pipeline_model_parallel_size=2",
      "model.virtual_pipeline_model_parallel_size=2",
      "model.expert_model_parallel_size=2",
      "ddp.use_distributed_optimizer=true",
      "comm_overlap.tp_comm_overlap=true",
      "comm_overlap.tp_comm_overlap_cfg=userbuffers_bf16_h100_h8192_tp4_mbs1_seqlen8192",
      "comm_overlap.tp_comm_bootstrap_backend=nccl",
      "comm_overlap.overlap_p2p_comm=true",
      "comm_overlap.batch_p2p_comm=false",
      "comm_overlap.defer_embedding_wgrad_compute=true",
      "comm_overlap.wgrad_deferral_limit=0",
      "comm_overlap.overlap_moe_expert_parallel_comm=true",
      "comm_overlap.delay_wgrad_compute=true",
      "comm_overlap.overlap_grad_reduce=true",
      "comm_overlap.overlap_param_gather=true",
      "comm_overlap.overlap_param_gather_with_optimizer_step=true",
      "comm_overlap.align_param_gather=true",
      "comm_overlap.bucket_size=1024"};
  const auto lines =
      describe_knobs(overrides, MustRead(overrides, 16), read_knobs(overrides), {4, "bucket_size"});
  ASSERT_EQ(lines.size(), 14u);
  for (const auto& line : lines) {
    EXPECT_THAT(line, Not(HasSubstr("not modeled: "))) << line;
    EXPECT_THAT(line, Not(HasSubstr("inactive"))) << line;
    EXPECT_THAT(line, Not(HasSubstr("accepted, no effect"))) << line;
  }
  EXPECT_THAT(lines[1], HasSubstr("tp phase: 4 chunks per TP GEMM (preset: fc2_fprop pipeline"));
  EXPECT_THAT(lines[5], HasSubstr("output-layer wgrad moves out of the backward's critical path"));
  EXPECT_THAT(lines[11], HasSubstr("first bucket's param all-gather starts during the optimizer "
                                   "step"));
  EXPECT_THAT(lines[12], HasSubstr("every model chunk's param all-gather launched together"));
}

TEST(ProbeEnvCheck, DeviceConnectionsLineNamesTheValueAndItsLimit) {
  EXPECT_THAT(device_connections_line("1"),
              HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS is '1' on rank 0"));
  EXPECT_THAT(device_connections_line(nullptr), HasSubstr("CUDA_DEVICE_MAX_CONNECTIONS is unset"));
  EXPECT_THAT(device_connections_line("32"), HasSubstr("cannot show its effect"));
}

// ---- the schedule ----------------------------------------------------------------------------

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// Items whose parts sleep and record the order in which the communication parts ran.
struct Recorder {
  std::mutex mu;
  std::vector<std::string> comm;

  std::vector<ScheduleItem> Items(int count, int ms, bool deferred) {
    std::vector<ScheduleItem> items;
    for (int i = 0; i < count; ++i) {
      ScheduleItem item;
      item.before = [this, i, ms] {
        Log("b" + std::to_string(i), ms);
        return ProbeStatus();
      };
      item.compute = [ms] { SleepMs(ms); };
      if (deferred) item.deferred = [ms] { SleepMs(ms); };
      item.after = [this, i, ms] {
        Log("a" + std::to_string(i), ms);
        return ProbeStatus();
      };
      items.push_back(item);
    }
    return items;
  }

  void Log(const std::string& what, int ms) {
    {
      std::lock_guard<std::mutex> lock(mu);
      comm.push_back(what);
    }
    SleepMs(ms);
  }
};

TEST(ProbeSchedule, WithoutOverlapEveryItemRunsInTurn) {
  Recorder r;
  CommStream stream;
  run_schedule(r.Items(3, 1, false), false, stream);
  EXPECT_THAT(r.comm, ElementsAre("b0", "a0", "b1", "a1", "b2", "a2"));
}

// The order every rank's communication stream follows, so collectives line up across ranks.
TEST(ProbeSchedule, WithOverlapTheNextBeforeAndThePreviousAfterSurroundEachCompute) {
  Recorder r;
  CommStream stream;
  run_schedule(r.Items(4, 1, false), true, stream);
  EXPECT_THAT(r.comm, ElementsAre("b0", "b1", "a0", "b2", "a1", "b3", "a2", "a3"));
}

TEST(ProbeSchedule, OverlapExposesLessCommunication) {
  Recorder off_items;
  Recorder on_items;
  CommStream stream;
  const ScheduleTiming off = run_schedule(off_items.Items(4, 10, false), false, stream);
  const ScheduleTiming on = run_schedule(on_items.Items(4, 10, false), true, stream);
  EXPECT_LT(on.exposed_ms(), 0.8 * off.exposed_ms());
  EXPECT_GT(on.comm_ms, 0.0);
  EXPECT_GT(on.compute_ms, 0.0);
}

TEST(ProbeSchedule, DeferredComputeHidesTheAfterPart) {
  Recorder plain;
  Recorder deferred;
  CommStream stream;
  // One item: before, compute, after. The deferred part overlaps `after`; without it the
  // same amount of compute would sit before `after` (modelled by doubling compute).
  std::vector<ScheduleItem> folded = plain.Items(1, 10, false);
  folded[0].compute = [] { SleepMs(20); };
  const ScheduleTiming without = run_schedule(folded, false, stream);
  const ScheduleTiming with = run_schedule(deferred.Items(1, 10, true), false, stream);
  EXPECT_LT(with.exposed_ms(), 0.8 * without.exposed_ms());
}

// Communication launched early (an item's `after`) and waited on only where a later item
// needs it (`waits_for`) hides behind the compute in between; the same communication as the
// later item's `before` is exposed.
TEST(ProbeSchedule, WaitingForAnEarlierAfterHidesItBehindTheComputeBetween) {
  auto items = [](bool early) {
    std::vector<ScheduleItem> list(3);
    list[0].compute = [] { SleepMs(2); };
    list[1].compute = [] { SleepMs(30); };  // e.g. the rest of the optimizer step
    list[2].compute = [] { SleepMs(2); };
    if (early) {
      list[0].after = [] {
        SleepMs(20);
        return ProbeStatus();
      };
      list[2].waits_for = 0;
    } else {
      list[2].before = [] {
        SleepMs(20);
        return ProbeStatus();
      };
    }
    return list;
  };
  CommStream stream;
  const ScheduleTiming late = run_schedule(items(false), false, stream);
  const ScheduleTiming early = run_schedule(items(true), true, stream);
  EXPECT_GT(late.exposed_ms(), 15.0);
  EXPECT_LT(early.exposed_ms(), 0.5 * late.exposed_ms());
}

TEST(ProbeSchedule, AnItemWaitsForTheAfterItNeeds) {
  std::mutex mu;
  std::vector<std::string> order;
  auto log = [&](const std::string& what) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(what);
  };
  std::vector<ScheduleItem> items(2);
  items[0].after = [&] {
    SleepMs(20);
    log("a0");
    return ProbeStatus();
  };
  items[1].waits_for = 0;
  items[1].compute = [&] { log("c1"); };
  CommStream stream;
  run_schedule(items, true, stream);
  EXPECT_THAT(order, ElementsAre("a0", "c1"));
}

TEST(ProbeErrors, AMalformedExpectedEnvIsAUsageFailure) {
  const ProbeResult<ExpectedEnv> parsed = parse_expected_env("A=1;B?");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().exit_code(), kExitUsage);
  EXPECT_EQ(parsed.why(),
            "BRIDGE_EXPECTED_ENV: entry 'A=1': expected NAME=HEX with 16 lowercase hex digits "
            "(FNV-1a 64)");
  const ProbeResult<ExpectedEnv> good = parse_expected_env("A?;B=af63dc4c8601ec8c");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good->vars.size(), 2U);
}

TEST(ProbeErrors, ReadingPastTheEndOfAMessageIsACommFailure) {
  WireWriter w;
  w.u32(7);
  WireReader r(w.data());
  EXPECT_EQ(r.u32(), 7U);
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.u64(), 0U);
  EXPECT_EQ(r.bytes(), "");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().exit_code(), kExitComm);
  EXPECT_EQ(r.status().why(), "malformed control message");
}

TEST(ProbeErrors, AnUnknownFlagIsAUsageFailure) {
  char prog[] = "bridge-probe";
  char flag[] = "--bogus=1";
  char* argv[] = {prog, flag};
  const ProbeResult<Options> options = parse_options(2, argv);
  ASSERT_FALSE(options.ok());
  EXPECT_EQ(options.status().exit_code(), kExitUsage);
  EXPECT_EQ(options.why(), "unknown flag '--bogus=1' (see --help)");
}

}  // namespace
}  // namespace bridge::probe
