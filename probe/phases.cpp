#include "probe/phases.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "probe/probe_error.h"

namespace bridge::probe {
namespace {

// A small positive integer for element k of the block that member `from` sends to `to` in
// item `item` of `step`: exact in float, different per sender, receiver, element and item, so
// a block delivered to the wrong place or at the wrong time does not match.
float pattern(int from, int to, int64_t k, int step, int item) {
  const int64_t mix =
      int64_t{from} * 31 + int64_t{to} * 17 + k * 7 + int64_t{step} * 13 + int64_t{item} * 5;
  return static_cast<float>(mix % 61 + 1);
}

// One direction of one pass through the model: backward costs twice the forward.
double pass_ms(const PhaseSetup& s, bool backward) { return s.layer_ms * (backward ? 2.0 : 1.0); }

}  // namespace

void ResultCheck::expect(float got, float expected, const Site& site) {
  if (got == expected) return;
  // The message is built only for the first difference: this runs for every element.
  if (wrong++ == 0) {
    first = str_printf("step %d, %s, item %d, block %d, index %zu: got %.9g, expected %.9g",
                       site.step, site.phase, site.item, site.block, site.index,
                       static_cast<double>(got), static_cast<double>(expected));
  }
}

bool tp_overlap_applies(const PhaseSetup& setup) {
  return setup.knobs.tp_comm_overlap && setup.layout.sequence_parallel && setup.layout.tp > 1;
}

// ---- EP: dispatch all-to-all, expert compute, combine all-to-all ----------------------------

ScheduleTiming run_ep_phase(GroupComm& ep, const PhaseSetup& s, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check) {
  const int members = ep.size();
  const int me = ep.index();
  const auto n = static_cast<size_t>(std::max(1, s.tokens / members)) * s.hidden;
  const int per_direction = s.microbatches * s.layers;
  struct Buffers {
    std::vector<float> send, recv, out, back;
  };
  std::vector<std::unique_ptr<Buffers>> buffers;
  std::vector<ScheduleItem> items;
  const std::string phase = str_printf("step %d ep all-to-all", ctx.step);
  for (int u = 0; u < 2 * per_direction; ++u) {
    const bool backward = u >= per_direction;
    auto b = std::make_unique<Buffers>();
    const size_t total = n * static_cast<size_t>(members);
    b->send.resize(total);
    b->recv.resize(total);
    b->out.resize(total);
    b->back.resize(total);
    for (int j = 0; j < members; ++j)
      for (size_t k = 0; k < n; ++k) b->send[j * n + k] = pattern(me, j, k, ctx.step, u);
    if (ctx.corrupt && u == 0 && members > 1) b->send[((me + 1) % members) * n] += 1.0F;
    Buffers* raw = b.get();
    buffers.push_back(std::move(b));
    ScheduleItem item;
    item.before = [&ep, raw, n, phase] {
      return ep.all_to_all(raw->send.data(), raw->recv.data(), n, phase + " (dispatch)");
    };
    // Delayed wgrad: the backward's weight-gradient half moves behind the combine.
    const bool delay = backward && s.knobs.delay_wgrad_compute;
    const double main_ms = delay ? s.layer_ms : pass_ms(s, backward);
    item.compute = [raw, n, members, me, u, main_ms, &check, &ctx] {
      device_compute(main_ms, [&] {
        for (int q = 0; q < members; ++q) {
          for (size_t k = 0; k < n; ++k) {
            const float x = raw->recv[q * n + k];
            check.expect(x, pattern(q, me, k, ctx.step, u),
                         Site{"ep dispatch all-to-all", ctx.step, u, q, k});
            raw->out[q * n + k] = 2.0F * x + static_cast<float>(me + 1);
          }
        }
      });
    };
    if (delay) item.deferred = [ms = s.layer_ms] { device_compute(ms, nullptr); };
    item.after = [&ep, raw, n, phase] {
      return ep.all_to_all(raw->out.data(), raw->back.data(), n, phase + " (combine)");
    };
    items.push_back(std::move(item));
  }
  const ScheduleTiming timing = run_schedule(items, s.knobs.overlap_moe_expert_parallel_comm, comm);
  for (int u = 0; u < 2 * per_direction; ++u) {
    const Buffers& b = *buffers[static_cast<size_t>(u)];
    for (int j = 0; j < members; ++j)
      for (size_t k = 0; k < n; ++k)
        check.expect(b.back[j * n + k], 2.0F * pattern(me, j, k, ctx.step, u) + (j + 1),
                     Site{"ep combine all-to-all", ctx.step, u, j, k});
  }
  return timing;
}

// ---- TP: all-gather, GEMM, reduce-scatter (sequence parallel) --------------------------------

namespace {

// One GEMM pass with sequence parallelism, split into `chunks` pipelined pieces.
ScheduleTiming tp_sequence_parallel_pass(GroupComm& tp, const PhaseSetup& s, const StepContext& ctx,
                                         int pass, bool backward, CommStream& comm,
                                         ResultCheck& check) {
  const int members = tp.size();
  const int me = tp.index();
  const bool overlap = tp_overlap_applies(s);
  const int chunks =
      overlap ? std::clamp(std::min(s.tp_chunks, s.tokens), 1, PhaseSetup::kMaxTpChunks) : 1;
  const auto n = static_cast<size_t>(s.tokens / chunks) * s.hidden;
  const auto total = n * static_cast<size_t>(members);
  const std::string phase = str_printf("step %d tp", ctx.step);
  std::vector<std::vector<float>> gathered(chunks, std::vector<float>(total));
  std::vector<std::vector<float>> partial(chunks, std::vector<float>(total));
  std::vector<ScheduleItem> items;
  for (int c = 0; c < chunks; ++c) {
    const int item_id = pass * PhaseSetup::kMaxTpChunks + c;
    float* own = gathered[c].data() + static_cast<size_t>(me) * n;
    for (size_t k = 0; k < n; ++k) own[k] = pattern(me, c, k, ctx.step, item_id);
    if (ctx.corrupt && pass == 0 && c == 0) own[0] += 1.0F;
    float* g = gathered[c].data();
    float* p = partial[c].data();
    ScheduleItem item;
    item.before = [&tp, g, n, phase] { return tp.all_gather(g, n, phase + " all-gather"); };
    const double ms = pass_ms(s, backward) / chunks;
    item.compute = [g, p, n, total, members, me, c, item_id, ms, &check, &ctx] {
      device_compute(ms, [&] {
        for (int q = 0; q < members; ++q)
          for (size_t k = 0; k < n; ++k)
            check.expect(g[q * n + k], pattern(q, c, k, ctx.step, item_id),
                         Site{"tp all-gather", ctx.step, item_id, q, k});
        // This rank's partial product of every token row; the reduce-scatter sums them.
        for (size_t i = 0; i < total; ++i) p[i] = g[i] + static_cast<float>(me + 1);
      });
    };
    item.after = [&tp, p, n, phase] { return tp.reduce_scatter(p, n, phase + " reduce-scatter"); };
    items.push_back(std::move(item));
  }
  const ScheduleTiming timing = run_schedule(items, overlap, comm);
  const float rank_sum = static_cast<float>(members) * static_cast<float>(members + 1) / 2.0F;
  for (int c = 0; c < chunks; ++c) {
    const int item_id = pass * PhaseSetup::kMaxTpChunks + c;
    const float* mine = partial[c].data() + static_cast<size_t>(me) * n;
    for (size_t k = 0; k < n; ++k)
      check.expect(mine[k], members * pattern(me, c, k, ctx.step, item_id) + rank_sum,
                   Site{"tp reduce-scatter", ctx.step, item_id, me, k});
  }
  return timing;
}

// Without sequence parallelism every rank holds the whole activation: GEMM, then all-reduce.
ScheduleTiming tp_all_reduce_pass(GroupComm& tp, const PhaseSetup& s, const StepContext& ctx,
                                  int pass, bool backward, CommStream& comm, ResultCheck& check) {
  const int members = tp.size();
  const int me = tp.index();
  const auto n = static_cast<size_t>(s.tokens) * s.hidden;
  const auto total = n * static_cast<size_t>(members);
  std::vector<float> partial(total);
  const std::string phase = str_printf("step %d tp all-reduce", ctx.step);
  ScheduleItem item;
  item.compute = [&, total] {
    device_compute(pass_ms(s, backward), [&] {
      for (size_t i = 0; i < total; ++i) {
        partial[i] =
            pattern(static_cast<int>(i / n), 0, static_cast<int64_t>(i % n), ctx.step, pass) +
            static_cast<float>(me + 1);
      }
      if (ctx.corrupt && pass == 0) partial[0] += 1.0F;
    });
  };
  item.after = [&tp, &partial, n, phase] { return tp.all_reduce(partial.data(), n, phase); };
  const ScheduleTiming timing = run_schedule({item}, false, comm);
  const float rank_sum = static_cast<float>(members) * static_cast<float>(members + 1) / 2.0F;
  for (size_t i = 0; i < total; ++i) {
    const int block = static_cast<int>(i / n);
    check.expect(
        partial[i],
        members * pattern(block, 0, static_cast<int64_t>(i % n), ctx.step, pass) + rank_sum,
        Site{"tp all-reduce", ctx.step, pass, block, i % n});
  }
  return timing;
}

}  // namespace

ScheduleTiming run_tp_phase(GroupComm& tp, const PhaseSetup& s, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check) {
  ScheduleTiming total;
  int pass = 0;
  // The passes depend on each other (a layer's input is the previous layer's output), so
  // each GEMM's chunks are pipelined only among themselves.
  for (const bool backward : {false, true}) {
    for (int m = 0; m < s.microbatches; ++m) {
      for (int l = 0; l < s.layers; ++l) {
        const StepContext pass_ctx{ctx.step, ctx.corrupt && pass == 0};
        total += s.layout.sequence_parallel
                     ? tp_sequence_parallel_pass(tp, s, pass_ctx, pass, backward, comm, check)
                     : tp_all_reduce_pass(tp, s, pass_ctx, pass, backward, comm, check);
        ++pass;
      }
    }
  }
  return total;
}

// ---- PP: activations and gradients between stages -------------------------------------------

ScheduleTiming run_pp_phase(GroupComm& pp, const PhaseSetup& s, const StepContext& ctx,
                            CommStream& comm, ResultCheck& check) {
  const int stages = pp.size();
  const int me = pp.index();
  const int prev = (me + stages - 1) % stages;
  const int chunks = s.layout.chunks_per_stage();
  const double chunk_layers = static_cast<double>(s.layers) / chunks;
  const auto n = static_cast<size_t>(s.tokens) * s.hidden;
  const int per_direction = s.microbatches * chunks;
  const bool batched = s.knobs.batch_p2p_comm;
  const std::string phase = str_printf("step %d pp send/recv", ctx.step);
  std::vector<std::vector<float>> sent(2 * static_cast<size_t>(per_direction),
                                       std::vector<float>(n));
  std::vector<std::vector<float>> received(2 * static_cast<size_t>(per_direction),
                                           std::vector<float>(n));
  // The last stage holds the output layer; its weight-gradient GEMM (one layer's forward time
  // per micro-batch) is the first backward work of each micro-batch there, unless
  // defer_embedding_wgrad_compute moves it to the end of the backward.
  const bool output_stage = me == stages - 1;
  const int deferred_wgrads = output_stage ? deferred_embedding_wgrads(s.knobs, s.microbatches) : 0;
  std::vector<ScheduleItem> items;
  for (int u = 0; u < 2 * per_direction; ++u) {
    const bool backward = u >= per_direction;
    float* out = sent[u].data();
    float* in = received[u].data();
    ScheduleItem item;
    double ms = pass_ms(s, backward) * chunk_layers;
    const int v = u - per_direction;  // The backward item's index.
    if (output_stage && backward && v % chunks == 0 && v / chunks >= deferred_wgrads)
      ms += s.layer_ms;
    item.compute = [out, n, me, u, ms, &ctx] {
      device_compute(ms, [&] {
        for (size_t k = 0; k < n; ++k) out[k] = pattern(me, 0, k, ctx.step, u);
        if (ctx.corrupt && u == 0) out[0] += 1.0F;
      });
    };
    item.after = [&pp, out, in, n, batched, phase] { return pp.shift(out, in, n, batched, phase); };
    items.push_back(std::move(item));
  }
  // The deferred embedding wgrads run at the end, while the last send/recv is in flight.
  if (deferred_wgrads > 0) {
    items.back().deferred = [ms = s.layer_ms * deferred_wgrads] { device_compute(ms, nullptr); };
  }
  const ScheduleTiming timing = run_schedule(items, s.knobs.overlap_p2p_comm, comm);
  for (int u = 0; u < 2 * per_direction; ++u)
    for (size_t k = 0; k < n; ++k)
      check.expect(received[u][k], pattern(prev, 0, k, ctx.step, u),
                   Site{"pp send/recv", ctx.step, u, prev, k});
  return timing;
}

// ---- DP: parameter all-gather of the distributed optimizer ----------------------------------

namespace {

// The optimizer step (half the forward's device time), one item per bucket: each bucket's
// update writes this rank's shard of the bucket's parameters, which its all-gather then sends.
std::vector<ScheduleItem> optimizer_step_items(std::vector<std::vector<float>>& gathered, size_t n,
                                               int me, const PhaseSetup& s,
                                               const StepContext& ctx) {
  std::vector<ScheduleItem> items;
  for (int b = 0; b < s.buckets; ++b) {
    float* own = gathered[static_cast<size_t>(b)].data() + static_cast<size_t>(me) * n;
    ScheduleItem item;
    item.compute = [own, n, me, b, ms = s.forward_ms / 2.0 / s.buckets, &ctx] {
      device_compute(ms, [&] {
        for (size_t k = 0; k < n; ++k) own[k] = pattern(me, b, k, ctx.step, b);
        if (ctx.corrupt && b == 0) own[0] += 1.0F;
      });
    };
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

ScheduleTiming run_param_gather_phase(GroupComm& dp, const PhaseSetup& s, const StepContext& ctx,
                                      CommStream& comm, ResultCheck& check) {
  const int members = dp.size();
  const int me = dp.index();
  const int64_t per_bucket = std::max<int64_t>(s.params / s.buckets, members);
  const auto n = static_cast<size_t>(per_bucket / members);
  const std::string phase = str_printf("step %d dp param all-gather", ctx.step);
  const bool overlap = s.knobs.overlap_param_gather;
  // Model chunks (virtual pipeline stages) each own a contiguous range of the buckets.
  const int chunks =
      std::clamp(s.layout.pp > 1 ? s.layout.chunks_per_stage() : 1, 1, std::max(1, s.buckets));
  auto chunk_of = [&s, chunks](int b) { return b * chunks / s.buckets; };
  auto first_of_chunk = [&](int b) { return b == 0 || chunk_of(b) != chunk_of(b - 1); };
  const bool with_optimizer = overlap && s.knobs.overlap_param_gather_with_optimizer_step;
  const bool align = overlap && chunks > 1 && s.knobs.align_param_gather;

  std::vector<std::vector<float>> gathered(s.buckets,
                                           std::vector<float>(n * static_cast<size_t>(members)));
  auto gather = [&dp, &gathered, n, phase](int b) {
    float* g = gathered[static_cast<size_t>(b)].data();
    return [&dp, g, n, phase] { return dp.all_gather(g, n, phase); };
  };
  ScheduleTiming total;
  std::vector<ScheduleItem> items;  // The segment that runs as one schedule.
  auto flush = [&] {
    if (!items.empty()) total += run_schedule(items, overlap, comm);
    items.clear();
  };
  items = optimizer_step_items(gathered, n, me, s, ctx);
  std::vector<int> launched(static_cast<size_t>(s.buckets), -1);  // Item whose `after` gathers b.
  // overlap_param_gather_with_optimizer_step: the first bucket's all-gather starts as soon as
  // its update is done, while the rest of the optimizer step runs.
  if (with_optimizer) {
    items[0].after = gather(0);
    launched[0] = 0;
  }
  // align_param_gather: every model chunk's first all-gather is launched at the start of the
  // forward; without it each chunk's is launched when that chunk first runs.
  if (align) {
    for (int b = 0; b < s.buckets; ++b) {
      if (!first_of_chunk(b) || launched[static_cast<size_t>(b)] >= 0) continue;
      ScheduleItem launch;
      launch.after = gather(b);
      launched[static_cast<size_t>(b)] = static_cast<int>(items.size());
      items.push_back(std::move(launch));
    }
  }
  if (std::all_of(launched.begin(), launched.end(), [](int i) { return i < 0; })) flush();
  for (int b = 0; b < s.buckets; ++b) {
    // Without alignment the prefetch chain of one chunk does not reach the next chunk.
    if (!align && b > 0 && first_of_chunk(b)) flush();
    const float* g = gathered[static_cast<size_t>(b)].data();
    ScheduleItem item;
    if (launched[static_cast<size_t>(b)] >= 0) {
      item.waits_for = launched[static_cast<size_t>(b)];
    } else {
      item.before = gather(b);
    }
    item.compute = [g, n, members, b, ms = s.forward_ms / s.buckets, &check, &ctx] {
      device_compute(ms, [&] {
        for (int q = 0; q < members; ++q)
          for (size_t k = 0; k < n; ++k)
            check.expect(g[q * n + k], pattern(q, b, k, ctx.step, b),
                         Site{"dp param all-gather", ctx.step, b, q, k});
      });
    };
    items.push_back(std::move(item));
  }
  flush();
  return total;
}

}  // namespace bridge::probe
