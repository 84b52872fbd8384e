// SPDX-License-Identifier: Apache-2.0
// bench_reduce: throughput of the reduction engine next to memcpy, measured in the
// same run, for every dtype x op. See README.md for flags and the JSON fields.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "conflux/common/json_text.h"
#include "conflux/common/reduce.h"
#include "reduce_dispatch.h"

namespace {

using conflux::DType;
using conflux::Op;
using conflux::reduce::detail::KernelTable;

struct Options {
  size_t bytes = 64u << 20;
  size_t cache_bytes = 256u << 10;
  int iters = 5;
  std::string json;
  std::string isa;
  std::optional<DType> dtype;  // --dtype: only this one
  std::optional<Op> op;        // --op: only this one
  bool selected(DType t) const { return !dtype || *dtype == t; }
  bool selected(Op o) const { return !op || *op == o; }
};

struct FreeDeleter {
  void operator()(uint8_t* p) const { std::free(p); }
};

// 64-byte aligned, zeroed (pages faulted in before timing).
struct Buffer {
  explicit Buffer(size_t n) : size(n), p(static_cast<uint8_t*>(std::aligned_alloc(64, round(n)))) {
    if (!p) {
      std::abort();
    }
    std::memset(p.get(), 0, round(n));
  }
  static size_t round(size_t n) { return ((n ? n : 1) + 63) / 64 * 64; }
  uint8_t* get() const { return p.get(); }
  size_t size;
  std::unique_ptr<uint8_t, FreeDeleter> p;
};

// 1.0 in every float format (so sums stay finite and products never go denormal);
// 1 for integers.
void fill_ones(DType t, uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    uint8_t* e = p + i * conflux::dtype_size(t);
    switch (t) {
      case DType::kFloat16: {
        uint16_t v = 0x3C00;
        std::memcpy(e, &v, 2);
        break;
      }
      case DType::kBfloat16: {
        uint16_t v = 0x3F80;
        std::memcpy(e, &v, 2);
        break;
      }
      case DType::kFloat8e4m3:
        *e = 0x38;
        break;
      case DType::kFloat8e5m2:
        *e = 0x3C;
        break;
      case DType::kFloat32: {
        float v = 1.0f;
        std::memcpy(e, &v, 4);
        break;
      }
      case DType::kFloat64: {
        double v = 1.0;
        std::memcpy(e, &v, 8);
        break;
      }
      default:
        std::memset(e, 0, conflux::dtype_size(t));
        *e = 1;
        break;
    }
  }
}

// Best (shortest) time in seconds of `iters` runs of f, after one warm-up run.
template <class F>
double best_time(int iters, F&& f) {
  f();
  double best = 1e30;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (s < best) {
      best = s;
    }
  }
  return best;
}

double gbps(double bytes, double seconds) { return bytes / seconds / 1e9; }

double memcpy_gbps(size_t bytes, int iters, size_t reps) {
  Buffer a(bytes), b(bytes);
  std::memset(a.get(), 1, bytes);
  const double s = best_time(iters, [&] {
    for (size_t r = 0; r < reps; ++r) {
      std::memcpy(b.get(), a.get(), bytes);
    }
  });
  return gbps(static_cast<double>(bytes) * reps, s);
}

// Accumulate GB/s (source bytes per second) over `bytes` of source, `reps` passes per run.
double accumulate_gbps(const KernelTable& k, DType t, Op op, size_t bytes, int iters, size_t reps) {
  const size_t n = bytes / conflux::dtype_size(t);
  Buffer src(n * conflux::dtype_size(t)), acc(n * conflux::accum_size(t));
  fill_ones(t, src.get(), n);
  k.init[static_cast<size_t>(t)](acc.get(), src.get(), n);
  auto fn = k.accumulate[static_cast<size_t>(t)][static_cast<size_t>(op)];
  const double s = best_time(iters, [&] {
    for (size_t r = 0; r < reps; ++r) {
      fn(acc.get(), src.get(), n);
    }
  });
  return gbps(static_cast<double>(src.size) * reps, s);
}

// reduce_n over k sources of bytes/k each: GB/s of input bytes.
double reduce_n_gbps(const KernelTable& k, DType t, Op op, size_t nsrc, size_t bytes, int iters) {
  const size_t n = bytes / nsrc / conflux::dtype_size(t);
  std::vector<Buffer> srcs;
  std::vector<const void*> ptrs;
  for (size_t j = 0; j < nsrc; ++j) {
    srcs.emplace_back(n * conflux::dtype_size(t));
    fill_ones(t, srcs.back().get(), n);
    ptrs.push_back(srcs.back().get());
  }
  Buffer dst(n * conflux::dtype_size(t));
  auto fn = k.reduce_n[static_cast<size_t>(t)][static_cast<size_t>(op)];
  const double s = best_time(iters, [&] { fn(dst.get(), ptrs.data(), nsrc, n); });
  return gbps(static_cast<double>(n * conflux::dtype_size(t) * nsrc), s);
}

// init (narrow -> fp32) and finish (fp32 -> narrow): GB/s of narrow bytes.
std::pair<double, double> init_finish_gbps(const KernelTable& k, DType t, size_t bytes, int iters) {
  const size_t n = bytes / conflux::dtype_size(t);
  Buffer narrow(n * conflux::dtype_size(t)), acc(n * 4);
  fill_ones(t, narrow.get(), n);
  const size_t ti = static_cast<size_t>(t);
  const double si = best_time(iters, [&] { k.init[ti](acc.get(), narrow.get(), n); });
  const double sf = best_time(iters, [&] { k.finish[ti](narrow.get(), acc.get(), n); });
  return {gbps(static_cast<double>(narrow.size), si), gbps(static_cast<double>(narrow.size), sf)};
}

size_t parse_size(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end && *end ? *end : ' ') {
    case 'k':
    case 'K':
      v *= 1024;
      break;
    case 'm':
    case 'M':
      v *= 1024 * 1024;
      break;
    case 'g':
    case 'G':
      v *= 1024.0 * 1024 * 1024;
      break;
    default:
      break;
  }
  return v < 64 ? 64 : static_cast<size_t>(v);
}

void usage() {
  std::printf(
      "usage: bench_reduce [--bytes N[K|M|G]] [--cache-bytes N] [--iters N] [--json FILE]\n"
      "                    [--isa scalar|sse2|avx2|avx512bw|neon] [--dtype T] [--op OP] "
      "[--quick]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has = i + 1 < argc;
    if (a == "--quick") {
      o.bytes = 1u << 20;
      o.cache_bytes = 64u << 10;
      o.iters = 2;
    } else if (a == "--bytes" && has) {
      o.bytes = parse_size(argv[++i]);
    } else if (a == "--cache-bytes" && has) {
      o.cache_bytes = parse_size(argv[++i]);
    } else if (a == "--iters" && has) {
      o.iters = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--json" && has) {
      o.json = argv[++i];
    } else if (a == "--isa" && has) {
      o.isa = argv[++i];
    } else if (a == "--dtype" && has && conflux::parse_dtype(argv[i + 1])) {
      o.dtype = conflux::parse_dtype(argv[++i]);
    } else if (a == "--op" && has && conflux::parse_op(argv[i + 1])) {
      o.op = conflux::parse_op(argv[++i]);
    } else {
      usage();
      return false;
    }
  }
  return true;
}

const KernelTable* pick_table(const std::string& name) {
  using namespace conflux::reduce::detail;
  if (name.empty()) {
    return &active_table();
  }
  for (Isa i : usable_isas()) {
    if (isa_name(i) == name) {
      return table_for(i);
    }
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    return 2;
  }
  const KernelTable* k = pick_table(o.isa);
  if (k == nullptr) {
    std::fprintf(stderr, "bench_reduce: ISA '%s' is not usable on this CPU\n", o.isa.c_str());
    return 2;
  }
  const size_t cache_reps = std::max<size_t>(1, (o.bytes / o.cache_bytes) / 4);
  const double mc = std::max(memcpy_gbps(o.bytes, o.iters, 1), 1e-9);
  const double mc_cache = std::max(memcpy_gbps(o.cache_bytes, o.iters, cache_reps), 1e-9);
  std::printf("ISA %s | buffer %zu bytes, in-cache %zu bytes, best of %d\n",
              std::string(k->name).c_str(), o.bytes, o.cache_bytes, o.iters);
  std::printf("memcpy: %.2f GB/s (buffer), %.2f GB/s (in cache)\n\n", mc, mc_cache);

  namespace json = conflux::json;
  json::Json acc_rows = json::Json::array(), rn_rows = acc_rows, init_rows = acc_rows,
             finish_rows = acc_rows;
  std::printf("accumulate (GB/s of source read)\n%-9s %-5s %9s %7s %11s %7s\n", "dtype", "op",
              "GB/s", "ratio", "cache GB/s", "ratio");
  for (int ti = 0; ti < conflux::kNumDTypes; ++ti) {
    const auto t = static_cast<DType>(ti);
    for (int oi = 0; oi < conflux::kNumOps; ++oi) {
      const auto op = static_cast<Op>(oi);
      if (!o.selected(t) || !o.selected(op)) {
        continue;
      }
      const double g = accumulate_gbps(*k, t, op, o.bytes, o.iters, 1);
      const double gc = accumulate_gbps(*k, t, op, o.cache_bytes, o.iters, cache_reps);
      std::printf("%-9s %-5s %9.2f %7.2f %11.2f %7.2f\n", conflux::dtype_name(t).data(),
                  conflux::op_name(op).data(), g, g / mc, gc, gc / mc_cache);
      acc_rows.push_back({{"dtype", conflux::dtype_name(t)},
                          {"op", conflux::op_name(op)},
                          {"gbps", json::fixed(g, 4)},
                          {"ratio", json::fixed(g / mc, 4)},
                          {"cache_gbps", json::fixed(gc, 4)},
                          {"cache_ratio", json::fixed(gc / mc_cache, 4)}});
    }
  }

  std::printf("\nreduce_n (GB/s of input read; total input = buffer)\n%-9s %-5s", "dtype", "op");
  for (size_t ns : {2, 4, 8}) {
    std::printf("  N=%zu GB/s  ratio", ns);
  }
  std::printf("\n");
  for (int ti = 0; ti < conflux::kNumDTypes; ++ti) {
    const auto t = static_cast<DType>(ti);
    for (int oi = 0; oi < conflux::kNumOps; ++oi) {
      const auto op = static_cast<Op>(oi);
      if (!o.selected(t) || !o.selected(op)) {
        continue;
      }
      std::printf("%-9s %-5s", conflux::dtype_name(t).data(), conflux::op_name(op).data());
      for (size_t ns : {2, 4, 8}) {
        const double g = reduce_n_gbps(*k, t, op, ns, o.bytes, o.iters);
        std::printf("  %9.2f %6.2f", g, g / mc);
        rn_rows.push_back({{"dtype", conflux::dtype_name(t)},
                           {"op", conflux::op_name(op)},
                           {"n", ns},
                           {"gbps", json::fixed(g, 4)},
                           {"ratio", json::fixed(g / mc, 4)}});
      }
      std::printf("\n");
    }
  }

  std::printf("\ninit / finish of narrow floats (GB/s of narrow bytes)\n%-9s %9s %7s %9s %7s\n",
              "dtype", "init", "ratio", "finish", "ratio");
  for (int ti = 0; ti < conflux::kNumDTypes; ++ti) {
    const auto t = static_cast<DType>(ti);
    if (!conflux::dtype_is_narrow_float(t) || !o.selected(t)) {
      continue;
    }
    const auto [gi, gf] = init_finish_gbps(*k, t, o.bytes, o.iters);
    std::printf("%-9s %9.2f %7.2f %9.2f %7.2f\n", conflux::dtype_name(t).data(), gi, gi / mc, gf,
                gf / mc);
    const std::string_view dn = conflux::dtype_name(t);
    init_rows.push_back(
        {{"dtype", dn}, {"gbps", json::fixed(gi, 4)}, {"ratio", json::fixed(gi / mc, 4)}});
    finish_rows.push_back(
        {{"dtype", dn}, {"gbps", json::fixed(gf, 4)}, {"ratio", json::fixed(gf / mc, 4)}});
  }

  if (!o.json.empty()) {
    std::ofstream f(o.json);
    const json::Json report = {{"schema", "conflux.bench_reduce.v1"},
                               {"isa", k->name},
                               {"bytes", o.bytes},
                               {"cache_bytes", o.cache_bytes},
                               {"iters", o.iters},
                               {"memcpy_gbps", json::fixed(mc, 4)},
                               {"memcpy_cache_gbps", json::fixed(mc_cache, 4)},
                               {"accumulate", std::move(acc_rows)},
                               {"reduce_n", std::move(rn_rows)},
                               {"init", std::move(init_rows)},
                               {"finish", std::move(finish_rows)}};
    f << json::lines(report) << "\n";
    if (!f) {
      std::fprintf(stderr, "bench_reduce: cannot write %s\n", o.json.c_str());
      return 1;
    }
  }
  return 0;
}
