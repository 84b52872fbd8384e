// SPDX-License-Identifier: Apache-2.0
// The size sweep shared by the fabric harness's third-party baselines (Gloo, Open MPI): the
// sweep flags, inputs whose float sums are exact in any order, and the nccl-tests-style table
// that bench/fabric/fabric_run.py parses, with the host's CPU cost under each row. A baseline
// supplies its AllReduce, a barrier and a reduction of one double over the ranks; run_sweep() does
// the rest.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "util/proc.h"

namespace conflux::bench {

struct Sweep {
  uint64_t minbytes = 4, maxbytes = 64ull << 20;
  double step = 4;
  int iters = 20, warmup = 5;

  bool valid() const {
    return step > 1 && iters > 0 && warmup >= 0 && minbytes >= 4 && maxbytes >= minbytes;
  }
};

// Parses "64", "8K", "16M", "1G" (binary suffixes). Returns false on junk.
inline bool parse_size(const char* s, uint64_t* out) {
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

// Takes one sweep flag (-b -e -f -n -w and their long names) with its value `v`; false when
// `flag` is not a sweep flag or `v` does not parse.
inline bool parse_sweep_flag(const std::string& flag, const char* v, Sweep* s) {
  uint64_t n = 0;
  if ((flag == "-b" || flag == "--minbytes") && parse_size(v, &n))
    s->minbytes = n;
  else if ((flag == "-e" || flag == "--maxbytes") && parse_size(v, &n))
    s->maxbytes = n;
  else if (flag == "-f" || flag == "--stepfactor")
    s->step = std::atof(v);
  else if (flag == "-n" || flag == "--iters")
    s->iters = std::atoi(v);
  else if (flag == "-w" || flag == "--warmup")
    s->warmup = std::atoi(v);
  else
    return false;
  return true;
}

// Small integers, so every partial sum is exact in float whatever the order of reduction.
inline float input_value(int rank, size_t i) {
  return static_cast<float>((rank * 7 + i * 13) % 17);
}

struct Collectives {
  // Out-of-place float sum of `count` elements over every rank.
  std::function<void(float* in, float* out, size_t count)> allreduce;
  std::function<void()> barrier;
  std::function<double(double)> max_over_ranks;
  std::function<double(double)> sum_over_ranks;
};

// Runs the sweep: per size `warmup` untimed and `iters` timed AllReduces, the slowest rank's
// mean time, every element checked on every rank. Rank 0 prints the table (`title` and `mode`
// head it) and `verified: all results correct` or `# error: ...`. Returns the exit code.
inline int run_sweep(int rank, int nranks, const Sweep& s, const Collectives& c,
                     const std::string& title, const std::string& mode) {
  const bool lead = rank == 0;
  if (lead) {
    std::printf("# %s\n#\n# mode: %s\n", title.c_str(), mode.c_str());
    std::printf("#%11s %12s %9s %6s %10s %12s %12s %7s\n", "size", "count", "type", "redop",
                "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
  }
  uint64_t total_wrong = 0;
  for (double b = static_cast<double>(s.minbytes); b <= static_cast<double>(s.maxbytes) * 1.0001;
       b *= s.step) {
    const size_t count = std::max<size_t>(1, static_cast<size_t>(b) / sizeof(float));
    std::vector<float> in(count), out(count), expect(count);
    for (size_t i = 0; i < count; ++i) {
      in[i] = input_value(rank, i);
      float sum = 0;
      for (int r = 0; r < nranks; ++r) sum += input_value(r, i);
      expect[i] = sum;
    }
    for (int i = 0; i < s.warmup; ++i) c.allreduce(in.data(), out.data(), count);
    std::fill(out.begin(), out.end(), std::nanf(""));
    c.barrier();
    tools::HostCpuWindow cpu;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < s.iters; ++i) c.allreduce(in.data(), out.data(), count);
    const auto t1 = std::chrono::steady_clock::now();
    c.barrier();  // every rank's timed iterations are in rank 0's CPU window
    cpu.stop();
    const double mine = std::chrono::duration<double, std::micro>(t1 - t0).count() / s.iters;
    const double t = c.max_over_ranks(mine);
    uint64_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += out[i] != expect[i];
    const auto all_wrong = static_cast<uint64_t>(c.sum_over_ranks(static_cast<double>(wrong)));
    total_wrong += all_wrong;
    if (lead) {
      const double bytes = static_cast<double>(count * sizeof(float));
      const double algbw = bytes / t / 1e3;  // bytes/us -> GB/s
      const double busbw = algbw * 2.0 * (nranks - 1) / nranks;
      std::printf("%12zu %12zu %9s %6s %10.2f %12.3f %12.3f %7llu\n", count * sizeof(float), count,
                  "float", "sum", t, algbw, busbw, static_cast<unsigned long long>(all_wrong));
      std::printf("%s\n",
                  tools::host_cpu_line(cpu.per_gb(bytes * s.iters / 1e9), cpu.seconds()).c_str());
      std::fflush(stdout);
    }
  }
  if (lead) {
    if (total_wrong == 0)
      std::printf("verified: all results correct\n");
    else
      std::printf("# error: %llu wrong elements (summed over ranks)\n",
                  static_cast<unsigned long long>(total_wrong));
    std::fflush(stdout);
  }
  return total_wrong == 0 ? 0 : 1;
}

}  // namespace conflux::bench
