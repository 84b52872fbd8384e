// SPDX-License-Identifier: Apache-2.0
// Command-line parsing for conflux-nccl-driver, on CLI11 (as the worker's and the CLI's): long
// flags take "--flag VALUE" or "--flag=VALUE"; the nccl-tests short forms -b -e -f -n -w -d -o
// too. The list values (modes, dtypes, ops, tree leaves) and sizes are parsed here.
#include "driver/options.h"

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace conflux::driver {
namespace {

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    size_t comma = s.find(',', start);
    if (comma == std::string::npos) comma = s.size();
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

bool parse_int(const std::string& s, long lo, long hi, long* out) {
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(s.c_str(), &end, 10);
  if (errno != 0 || end == s.c_str() || *end != '\0' || v < lo || v > hi) return false;
  *out = v;
  return true;
}

bool parse_double(const std::string& s, double* out) {
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end == s.c_str() || *end != '\0' || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

Status bad(const std::string& flag, const std::string& value, const char* why) {
  return invalid_argument("invalid value '" + value + "' for " + flag + ": " + why);
}

Status parse_dtypes(const std::string& v, std::vector<DType>* out) {
  out->clear();
  if (v == "all") {
    for (int i = 0; i < kNumDTypes; ++i) out->push_back(static_cast<DType>(i));
    return Status();
  }
  for (const std::string& name : split_commas(v)) {
    auto t = parse_dtype(name);
    if (!t) return bad("--dtype", name, "unknown datatype");
    out->push_back(*t);
  }
  return out->empty() ? bad("--dtype", v, "empty list") : Status();
}

Status parse_ops(const std::string& v, std::vector<Op>* out) {
  out->clear();
  if (v == "all") {
    for (int i = 0; i < kNumOps; ++i) out->push_back(static_cast<Op>(i));
    return Status();
  }
  for (const std::string& name : split_commas(v)) {
    auto op = parse_op(name);
    if (!op) return bad("--op", name, "unknown op (sum, prod, max, min)");
    out->push_back(*op);
  }
  return out->empty() ? bad("--op", v, "empty list") : Status();
}

Status parse_modes(const std::string& v, std::vector<Mode>* out) {
  out->clear();
  for (const std::string& name : split_commas(v)) {
    if (name == "collnet")
      out->push_back(Mode::kCollNet);
    else if (name == "hybrid")
      out->push_back(Mode::kHybrid);
    else if (name == "ring")
      out->push_back(Mode::kRing);
    else if (name == "reducescatter")
      out->push_back(Mode::kReduceScatter);
    else if (name == "allgather")
      out->push_back(Mode::kAllGather);
    else if (name == "pxn")
      out->push_back(Mode::kPxn);
    else
      return bad("--modes", name,
                 "expected collnet, hybrid, ring, reducescatter, allgather or pxn");
  }
  return out->empty() ? bad("--modes", v, "empty list") : Status();
}

Status parse_leaves(const std::string& v, std::vector<uint32_t>* out) {
  out->clear();
  for (const std::string& part : split_commas(v)) {
    long k = 0;
    if (!parse_int(part, 1, 4096, &k))
      return bad("--tree-leaves", v, "expected N,N,... (each >= 1)");
    out->push_back(static_cast<uint32_t>(k));
  }
  return out->empty() ? bad("--tree-leaves", v, "empty list") : Status();
}

[[noreturn]] void reject(const std::string& flag, const std::string& value, const char* why) {
  throw CLI::ValidationError(flag, "invalid value '" + value + "': " + why);
}

size_t bytes_of(const std::string& flag, const std::string& v) {
  size_t b = 0;
  if (!parse_bytes(v, &b)) reject(flag, v, "expected bytes, e.g. 4, 64K, 1M");
  return b;
}

double number_of(const std::string& flag, const std::string& v) {
  double d = 0;
  if (!parse_double(v, &d)) reject(flag, v, "expected a number");
  return d;
}

// A status-returning list parser as CLI11's callback (it throws the status's text).
template <typename T>
std::function<void(const std::string&)> list_into(Status (*parse)(const std::string&, T*), T* out) {
  return [parse, out](const std::string& v) {
    const Status st = parse(v, out);
    if (!st.ok()) throw CLI::ValidationError(st.message());
  };
}

std::function<void(const std::string&)> fraction_into(const std::string& flag, double* out) {
  return [flag, out](const std::string& v) {
    if (v == "auto") {
      *out = kAutoRingFraction;
      return;
    }
    const double d = number_of(flag, v);
    if (d < 0.0 || d > 1.0) reject(flag, v, "expected 0..1 or auto");
    *out = d;
  };
}

// Every flag, its default and its range: README.md's table, in its order.
void describe(CLI::App& app, Options* o) {
  app.description(
      "Runs AllReduce through an NCCL net/CollNet plugin the way NCCL's proxy calls it, one "
      "process per rank, and verifies every result.");
  app.set_help_flag("-h,--help", "print this help");
  // A flag given twice takes its last value (harnesses append overrides to their defaults).
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--plugin", o->plugin,
                 "plugin file, or a name resolved like NCCL_NET_PLUGIN (default: "
                 "$NCCL_NET_PLUGIN, else libnccl-net.so)");
  app.add_option("--nranks", o->nranks,
                 "fork N ranks on this machine; without it the rank comes from "
                 "CONFLUX_DRIVER_RANK/_NRANKS/_ROOT=host:port")
      ->check(CLI::Range(1, 1024));
  app.add_option_function<std::string>("--modes", list_into(parse_modes, &o->modes),
                                       "collnet,hybrid,ring (default), reducescatter, allgather, "
                                       "pxn");
  app.add_option_function<std::string>("--ring-fraction",
                                       fraction_into("--ring-fraction", &o->ring_fraction),
                                       "CONFLUX_RING_FRACTION of the hybrid mode (0.5; auto)");
  app.add_option_function<std::string>("--rs-ring-fraction",
                                       fraction_into("--rs-ring-fraction", &o->rs_ring_fraction),
                                       "CONFLUX_RING_FRACTION of the reducescatter mode (0)");
  app.add_option_function<std::string>(
      "-b,--minbytes", [o](const std::string& v) { o->minbytes = bytes_of("--minbytes", v); },
      "smallest size (4); K/M/G suffixes");
  app.add_option_function<std::string>(
      "-e,--maxbytes", [o](const std::string& v) { o->maxbytes = bytes_of("--maxbytes", v); },
      "largest size (64M)");
  app.add_option_function<std::string>(
      "-f,--stepfactor",
      [o](const std::string& v) {
        o->stepfactor = number_of("--stepfactor", v);
        if (o->stepfactor <= 1.0) reject("--stepfactor", v, "expected a factor > 1");
      },
      "size multiplier (4)");
  app.add_option("-n,--iters", o->iters, "timed iterations (20)")->check(CLI::Range(1, 1000000));
  app.add_option("-w,--warmup", o->warmup, "warm-up iterations (5)")->check(CLI::Range(0, 1000000));
  app.add_option_function<std::string>("-d,--dtype", list_into(parse_dtypes, &o->dtypes),
                                       "datatypes, LIST or all (float)");
  app.add_option_function<std::string>("-o,--op", list_into(parse_ops, &o->ops),
                                       "sum,prod,max,min or all (sum)");
  app.add_option_function<std::string>(
      "--chunk-bytes",
      [o](const std::string& v) {
        o->chunk_bytes = bytes_of("--chunk-bytes", v);
        if (o->chunk_bytes < 8) reject("--chunk-bytes", v, "must be at least 8");
      },
      "bytes per request (1M)");
  app.add_option("--inflight", o->inflight, "requests in flight, per peer for ring (8)")
      ->check(CLI::Range(1, 32));
  app.add_option("--net-abi", o->net_abi,
                 "drive ncclNetPlugin_vN (8, 9, 10, 12) through a v11 adapter (11)")
      ->check(CLI::Range(8, 12));
  app.add_option("--nccl-channels", o->nccl_channels,
                 "with --nccl-regions: channels, in groups of 8 (1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--service-conns", o->service_conns,
                 "a service thread connects, registers and closes K more connections (0)")
      ->check(CLI::Range(0, 256));
  app.add_option("--hold-conns", o->hold_conns,
                 "as --service-conns, the connections held open; threads and fds reported (0)")
      ->check(CLI::Range(0, 256));
  app.add_option("--service-collnet", o->service_collnet,
                 "collnet, hybrid: a service thread connects K more CollNet comms (0)")
      ->check(CLI::Range(0, 16));
  app.add_option_function<std::string>(
      "--nccl-regions",
      [o](const std::string& v) {
        const size_t b = bytes_of("--nccl-regions", v);
        if (b == 0 || b % 64 != 0 || b > (size_t{64} << 20)) {
          reject("--nccl-regions", v, "expected a multiple of 64 bytes up to 64M");
        }
        o->nccl_region_bytes = b;
      },
      "collnet, hybrid: every iallreduce a whole B-byte region of one staging area");
  // Grouped receives take at most 8 parts (NCCL_NET_MAX_RECVS).
  app.add_option("--pxn-senders", o->pxn_senders, "pxn: senders per peer (2)")
      ->check(CLI::Range(1, 8));
  app.add_option("--pxn-lag", o->pxn_lag, "pxn: messages sender j-1 posts before sender j (16)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--pxn-steps", o->pxn_steps, "pxn: messages per sender per iteration (32)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--seed", o->seed, "input seed (1)")->check(CLI::Range(0L, 0x7fffffffL));
  app.add_option("--json", o->json_path, "write all rows and the environment as JSON (rank 0)");
  app.add_option("--timeline", o->timeline_path,
                 "write each timed iteration's end time and duration (rank 0)");
  app.add_option_function<std::string>(
      "--timeout",
      [o](const std::string& v) {
        o->timeout_s = number_of("--timeout", v);
        if (o->timeout_s <= 0.0) reject("--timeout", v, "expected seconds > 0");
      },
      "whole-run limit in seconds (300)");
  app.add_option("--idle-sleep-us", o->idle_sleep_us,
                 "idle polling sleeps N us instead of sched_yield (0)")
      ->check(CLI::Range(0, 1000000));
  app.add_option("--inject-rank-exit", o->inject_exit_rank,
                 "test hook: rank R exits abruptly after setup")
      ->check(CLI::Range(0, 1000000));
  app.add_option_function<std::string>("--tree-leaves", list_into(parse_leaves, &o->tree_leaves),
                                       "ranks per leaf aggregator of a reduction tree, N,N,...");
  app.add_option("--close-stagger-ms", o->close_stagger_ms,
                 "rank r closes its CollNet communicator r*N ms late (0)")
      ->check(CLI::Range(0, 1000000));
  app.add_flag("--nccl-steps", o->nccl_steps, "ring mode: NCCL's proxy step by step");
  app.add_flag("--mixed-chunks", o->mixed_chunks, "collnet, hybrid: every other request 4 KiB");
  app.add_flag("--inplace", o->inplace, "in-place AllReduce (send buffer == receive buffer)");
  app.add_flag("--device-buffers", o->device_buffers,
               "CollNet modes on device memory, registered with NCCL_PTR_CUDA as at gdr 1");
  app.add_flag("--deterministic", o->deterministic,
               "CONFLUX_DETERMINISTIC=1: CollNet results bit for bit the rank-order reference");
  app.add_flag("--check-iters", o->check_iters, "verify every warm-up and timed iteration too");
  app.add_flag("--require-collnet", o->require_collnet,
               "fail if CollNet is unavailable or declined");
}

// What one flag cannot say alone.
Status check_together(const Options* o) {
  if (o->minbytes > o->maxbytes) return invalid_argument("--minbytes is larger than --maxbytes");
  if (o->maxbytes == 0) return invalid_argument("--maxbytes must be > 0");
  if (o->maxbytes > (size_t{8} << 30))
    return invalid_argument("--maxbytes above 8G is not supported");
  if (!o->tree_leaves.empty() && o->nranks > 0) {
    uint32_t sum = 0;
    for (uint32_t k : o->tree_leaves) sum += k;
    if (sum != static_cast<uint32_t>(o->nranks)) {
      return invalid_argument("--tree-leaves must add up to --nranks");
    }
  }
  if (o->service_conns > 0 && o->hold_conns > 0) {
    return invalid_argument("--service-conns and --hold-conns exclude each other");
  }
  if (o->service_collnet > 0) {
    for (Mode m : o->modes) {
      if (m != Mode::kCollNet && m != Mode::kHybrid) {
        return invalid_argument(
            std::string("--service-collnet applies to the collnet and hybrid ") +
            "modes only, not " + mode_name(m));
      }
    }
  }
  for (Mode m : o->modes) {
    if (is_direct(m) && o->inplace) {
      return invalid_argument(std::string("--inplace applies to AllReduce modes only, not ") +
                              mode_name(m));
    }
  }
  return Status();
}

}  // namespace

const char* mode_name(Mode m) {
  switch (m) {
    case Mode::kCollNet:
      return "collnet";
    case Mode::kHybrid:
      return "hybrid";
    case Mode::kRing:
      return "ring";
    case Mode::kReduceScatter:
      return "reducescatter";
    case Mode::kAllGather:
      return "allgather";
    case Mode::kPxn:
      return "pxn";
  }
  return "?";
}

bool parse_bytes(const std::string& s, size_t* out) {
  if (s.empty() || s[0] < '0' || s[0] > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (errno != 0) return false;
  std::string_view suffix(end);
  int shift = 0;
  if (suffix == "" || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KB" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MB" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GB" || suffix == "GiB")
    shift = 30;
  else
    return false;
  if (v > (~0ULL >> shift)) return false;
  *out = static_cast<size_t>(v << shift);
  return true;
}

Status parse_options(int argc, char** argv, Options* o) {
  CLI::App app;
  describe(app, o);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    o->help = true;
    return Status();
  } catch (const CLI::ParseError& e) {
    return invalid_argument(e.what());
  }
  return check_together(o);
}

std::vector<size_t> size_list(const Options& o) {
  std::vector<size_t> sizes;
  double s = static_cast<double>(o.minbytes == 0 ? 1 : o.minbytes);
  while (s <= static_cast<double>(o.maxbytes) + 0.5) {
    size_t b = static_cast<size_t>(s);
    if (sizes.empty() || b != sizes.back()) sizes.push_back(b);
    s *= o.stepfactor;
  }
  return sizes;
}

void print_usage(const char* argv0) {
  Options unused;
  CLI::App app;
  describe(app, &unused);
  app.name(argv0);
  std::fputs(app.help().c_str(), stdout);
}

}  // namespace conflux::driver
