// SPDX-License-Identifier: Apache-2.0
// conflux-fabric-gloo: Gloo's ring AllReduce (TCP transport) as the plain-ring baseline of the
// fabric harness (bench/fabric/README.md). One process per rank; ranks meet through a Gloo
// FileStore in a directory every rank can see. Rank 0 prints an nccl-tests-style table with
// the same columns as conflux-nccl-driver, every result is verified, and the last line is
// `verified: all results correct` (exit 0) or `# error: ...` (exit 1). Bad flags: exit 2.
//
// Usage: conflux-fabric-gloo --rank R --nranks N --store DIR --addr IP
//            [-b MIN] [-e MAX] [-f STEP] [-n ITERS] [-w WARMUP] [--prefix P] [--timeout S]
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "baseline_sweep.h"

namespace {

using conflux::bench::Sweep;

struct Options {
  int rank = -1, nranks = 0;
  std::string store, addr, prefix = "gloo";
  Sweep sweep;
  int timeout_s = 300;
};

bool parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    if (f == "--rank")
      o->rank = std::atoi(v);
    else if (f == "--nranks")
      o->nranks = std::atoi(v);
    else if (f == "--store")
      o->store = v;
    else if (f == "--addr")
      o->addr = v;
    else if (f == "--prefix")
      o->prefix = v;
    else if (f == "--timeout")
      o->timeout_s = std::atoi(v);
    else if (!conflux::bench::parse_sweep_flag(f, v, &o->sweep))
      return false;
  }
  return o->rank >= 0 && o->nranks > 0 && o->rank < o->nranks && !o->store.empty() &&
         !o->addr.empty() && o->sweep.valid();
}

void sum_floats(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

// Reduces one double over all ranks with `fn` (gloo::max / gloo::sum); every rank gets it.
double reduce_over_ranks(const std::shared_ptr<gloo::Context>& ctx, double v, ReduceFn fn) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setOutput(&v, 1);
  opts.setReduceFunction(fn);
  opts.setTag(0x7fff0000u);
  gloo::allreduce(opts);
  return v;
}

int run(const Options& o) {
  gloo::transport::tcp::attr attr;
  attr.hostname = o.addr;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.nranks);
  ctx->setTimeout(std::chrono::seconds(o.timeout_s));
  gloo::rendezvous::FileStore file_store(o.store);
  gloo::rendezvous::PrefixStore store(o.prefix, file_store);
  ctx->connectFullMesh(store, dev);

  uint32_t tag = 1;
  conflux::bench::Collectives c;
  c.allreduce = [&](float* in, float* out, size_t count) {
    gloo::AllreduceOptions opts(ctx);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts.setInput(in, count);
    opts.setOutput(out, count);
    opts.setReduceFunction(&sum_floats);
    opts.setTag(tag++);
    gloo::allreduce(opts);
  };
  c.barrier = [&] {
    gloo::BarrierOptions bo(ctx);
    gloo::barrier(bo);
  };
  c.max_over_ranks = [&](double v) {
    return reduce_over_ranks(ctx, v, static_cast<ReduceFn>(&gloo::max<double>));
  };
  c.sum_over_ranks = [&](double v) {
    return reduce_over_ranks(ctx, v, static_cast<ReduceFn>(&gloo::sum<double>));
  };
  return conflux::bench::run_sweep(o.rank, o.nranks, o.sweep, c,
                                   "conflux-fabric-gloo: " + std::to_string(o.nranks) +
                                       " ranks, gloo ring allreduce, tcp transport",
                                   "gloo  (gloo::allreduce RING, float sum, out-of-place)");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, &o)) {
    std::fprintf(stderr,
                 "usage: conflux-fabric-gloo --rank R --nranks N --store DIR --addr IP [-b MIN] "
                 "[-e MAX] [-f STEP] [-n ITERS] [-w WARMUP] [--prefix P] [--timeout S]\n");
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::printf("# error: rank %d: %s\n", o.rank, e.what());
    std::fflush(stdout);
    return 1;
  }
}
