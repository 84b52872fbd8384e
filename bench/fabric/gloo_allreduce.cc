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

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

struct Options {
  int rank = -1, nranks = 0;
  std::string store, addr, prefix = "gloo";
  uint64_t minbytes = 4, maxbytes = 64ull << 20;
  double step = 4;
  int iters = 20, warmup = 5, timeout_s = 300;
};

// Parses "64", "8K", "16M", "1G" (binary suffixes). Returns false on junk.
bool parse_size(const char* s, uint64_t* out) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return false;
  uint64_t mul = 1;
  if (*end == 'K' || *end == 'k')
    mul = 1ull << 10, ++end;
  else if (*end == 'M' || *end == 'm')
    mul = 1ull << 20, ++end;
  else if (*end == 'G' || *end == 'g')
    mul = 1ull << 30, ++end;
  if (*end != '\0') return false;
  *out = static_cast<uint64_t>(v * static_cast<double>(mul));
  return true;
}

bool parse_args(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (i + 1 >= argc) return false;
    const char* v = argv[++i];
    uint64_t n = 0;
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
    else if ((f == "-b" || f == "--minbytes") && parse_size(v, &n))
      o->minbytes = n;
    else if ((f == "-e" || f == "--maxbytes") && parse_size(v, &n))
      o->maxbytes = n;
    else if (f == "-f" || f == "--stepfactor")
      o->step = std::atof(v);
    else if (f == "-n" || f == "--iters")
      o->iters = std::atoi(v);
    else if (f == "-w" || f == "--warmup")
      o->warmup = std::atoi(v);
    else if (f == "--timeout")
      o->timeout_s = std::atoi(v);
    else
      return false;
  }
  return o->rank >= 0 && o->nranks > 0 && o->rank < o->nranks && !o->store.empty() &&
         !o->addr.empty() && o->step > 1 && o->iters > 0 && o->warmup >= 0 && o->minbytes >= 4 &&
         o->maxbytes >= o->minbytes;
}

// Small integers, so every partial sum is exact in float whatever the order of reduction.
float input_value(int rank, size_t i) { return static_cast<float>((rank * 7 + i * 13) % 17); }

void sum_floats(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<float*>(c);
  const auto* x = static_cast<const float*>(a);
  const auto* y = static_cast<const float*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
}

void run_allreduce(const std::shared_ptr<gloo::Context>& ctx, float* in, float* out, size_t count,
                   uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
  opts.setInput(in, count);
  opts.setOutput(out, count);
  opts.setReduceFunction(&sum_floats);
  opts.setTag(tag);
  gloo::allreduce(opts);
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

// One table row: returns the number of wrong elements on this rank.
uint64_t bench_size(const std::shared_ptr<gloo::Context>& ctx, const Options& o, size_t count,
                    double* time_us) {
  std::vector<float> in(count), out(count), expect(count);
  for (size_t i = 0; i < count; ++i) {
    in[i] = input_value(o.rank, i);
    float s = 0;
    for (int r = 0; r < o.nranks; ++r) s += input_value(r, i);
    expect[i] = s;
  }
  uint32_t tag = 1;
  for (int i = 0; i < o.warmup; ++i) run_allreduce(ctx, in.data(), out.data(), count, tag++);
  std::fill(out.begin(), out.end(), std::nanf(""));
  gloo::BarrierOptions bo(ctx);
  gloo::barrier(bo);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < o.iters; ++i) run_allreduce(ctx, in.data(), out.data(), count, tag++);
  auto t1 = std::chrono::steady_clock::now();
  double mine = std::chrono::duration<double, std::micro>(t1 - t0).count() / o.iters;
  *time_us = reduce_over_ranks(ctx, mine, static_cast<ReduceFn>(&gloo::max<double>));
  uint64_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += out[i] != expect[i];
  return wrong;
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

  const bool lead = o.rank == 0;
  if (lead) {
    std::printf("# conflux-fabric-gloo: %d ranks, gloo ring allreduce, tcp transport\n#\n",
                o.nranks);
    std::printf("# mode: gloo  (gloo::allreduce RING, float sum, out-of-place)\n");
    std::printf("#%11s %12s %9s %6s %10s %12s %12s %7s\n", "size", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  uint64_t total_wrong = 0;
  for (double b = static_cast<double>(o.minbytes); b <= static_cast<double>(o.maxbytes) * 1.0001;
       b *= o.step) {
    size_t count = std::max<size_t>(1, static_cast<size_t>(b) / sizeof(float));
    double t = 0;
    double wrong = static_cast<double>(bench_size(ctx, o, count, &t));
    double any_wrong = reduce_over_ranks(ctx, wrong, static_cast<ReduceFn>(&gloo::sum<double>));
    total_wrong += static_cast<uint64_t>(any_wrong);
    if (lead) {
      double bytes = static_cast<double>(count * sizeof(float));
      double algbw = bytes / t / 1e3;  // bytes/us -> GB/s
      double busbw = algbw * 2.0 * (o.nranks - 1) / o.nranks;
      std::printf("%12zu %12zu %9s %6s %10.2f %12.3f %12.3f %7llu\n", count * sizeof(float), count,
                  "float", "sum", t, algbw, busbw, static_cast<unsigned long long>(any_wrong));
      std::fflush(stdout);
    }
  }
  if (lead) {
    if (total_wrong == 0)
      std::printf("verified: all results correct\n");
    else
      std::printf("# error: %llu wrong elements (summed over ranks)\n",
                  static_cast<unsigned long long>(total_wrong));
  }
  return total_wrong == 0 ? 0 : 1;
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
