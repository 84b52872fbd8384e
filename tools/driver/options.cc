// Command-line parsing for conflux-nccl-driver. Long flags take "--flag VALUE" or
// "--flag=VALUE"; the nccl-tests short forms -b -e -f -n -w -d -o are accepted too.
#include "driver/options.h"

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
  return Status::Error("invalid value '" + value + "' for " + flag + ": " + why);
}

Status parse_dtypes(const std::string& v, std::vector<DType>* out) {
  out->clear();
  if (v == "all") {
    for (int i = 0; i < kNumDTypes; ++i) out->push_back(static_cast<DType>(i));
    return Status::Ok();
  }
  for (const std::string& name : split_commas(v)) {
    auto t = parse_dtype(name);
    if (!t) return bad("--dtype", name, "unknown datatype");
    out->push_back(*t);
  }
  return out->empty() ? bad("--dtype", v, "empty list") : Status::Ok();
}

Status parse_ops(const std::string& v, std::vector<Op>* out) {
  out->clear();
  if (v == "all") {
    for (int i = 0; i < kNumOps; ++i) out->push_back(static_cast<Op>(i));
    return Status::Ok();
  }
  for (const std::string& name : split_commas(v)) {
    auto op = parse_op(name);
    if (!op) return bad("--op", name, "unknown op (sum, prod, max, min)");
    out->push_back(*op);
  }
  return out->empty() ? bad("--op", v, "empty list") : Status::Ok();
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
  return out->empty() ? bad("--modes", v, "empty list") : Status::Ok();
}

Status parse_leaves(const std::string& v, std::vector<uint32_t>* out) {
  out->clear();
  for (const std::string& part : split_commas(v)) {
    long k = 0;
    if (!parse_int(part, 1, 4096, &k))
      return bad("--tree-leaves", v, "expected N,N,... (each >= 1)");
    out->push_back(static_cast<uint32_t>(k));
  }
  return out->empty() ? bad("--tree-leaves", v, "empty list") : Status::Ok();
}

// Applies one flag with its value. `takes_value` tells the caller whether to consume one.
Status apply(const std::string& flag, const std::string& val, Options* o) {
  long n = 0;
  size_t bytes = 0;
  double d = 0;
  if (flag == "--plugin") {
    o->plugin = val;
    return Status::Ok();
  }
  if (flag == "--nranks") {
    if (!parse_int(val, 1, 1024, &n)) return bad(flag, val, "expected 1..1024");
    o->nranks = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--minbytes" || flag == "-b" || flag == "--maxbytes" || flag == "-e" ||
      flag == "--chunk-bytes") {
    if (!parse_bytes(val, &bytes)) return bad(flag, val, "expected bytes, e.g. 4, 64K, 1M");
    if (flag == "--chunk-bytes") {
      if (bytes < 8) return bad(flag, val, "must be at least 8");
      o->chunk_bytes = bytes;
    } else if (flag == "--minbytes" || flag == "-b") {
      o->minbytes = bytes;
    } else {
      o->maxbytes = bytes;
    }
    return Status::Ok();
  }
  if (flag == "--stepfactor" || flag == "-f") {
    if (!parse_double(val, &d) || d <= 1.0) return bad(flag, val, "expected a factor > 1");
    o->stepfactor = d;
    return Status::Ok();
  }
  if (flag == "--iters" || flag == "-n" || flag == "--warmup" || flag == "-w" ||
      flag == "--inflight" || flag == "--inject-rank-exit" || flag == "--idle-sleep-us" ||
      flag == "--close-stagger-ms") {
    const bool at_least_one = (flag == "--inflight" || flag == "--iters" || flag == "-n");
    const long hi = (flag == "--inflight") ? 32 : 1000000;
    const long lo = at_least_one ? 1 : 0;
    if (!parse_int(val, lo, hi, &n)) return bad(flag, val, "out of range");
    if (flag == "--iters" || flag == "-n")
      o->iters = static_cast<int>(n);
    else if (flag == "--warmup" || flag == "-w")
      o->warmup = static_cast<int>(n);
    else if (flag == "--inflight")
      o->inflight = static_cast<int>(n);
    else if (flag == "--idle-sleep-us")
      o->idle_sleep_us = static_cast<int>(n);
    else if (flag == "--close-stagger-ms")
      o->close_stagger_ms = static_cast<int>(n);
    else
      o->inject_exit_rank = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--dtype" || flag == "-d") return parse_dtypes(val, &o->dtypes);
  if (flag == "--op" || flag == "-o") return parse_ops(val, &o->ops);
  if (flag == "--modes") return parse_modes(val, &o->modes);
  if (flag == "--net-abi") {
    if (!parse_int(val, 8, 12, &n)) return bad(flag, val, "expected 8, 9, 10, 11 or 12");
    o->net_abi = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--nccl-channels") {
    if (!parse_int(val, 1, 64, &n)) return bad(flag, val, "expected 1..64");
    o->nccl_channels = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--service-conns" || flag == "--hold-conns") {
    if (!parse_int(val, 0, 256, &n)) return bad(flag, val, "expected 0..256");
    (flag == "--service-conns" ? o->service_conns : o->hold_conns) = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--service-collnet") {
    if (!parse_int(val, 0, 16, &n)) return bad(flag, val, "expected 0..16");
    o->service_collnet = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--nccl-regions") {
    if (!parse_bytes(val, &bytes) || bytes == 0 || bytes % 64 != 0 || bytes > (size_t{64} << 20))
      return bad(flag, val, "expected a multiple of 64 bytes up to 64M");
    o->nccl_region_bytes = bytes;
    return Status::Ok();
  }
  if (flag == "--pxn-senders" || flag == "--pxn-lag" || flag == "--pxn-steps") {
    // Grouped receives take at most 8 parts (NCCL_NET_MAX_RECVS).
    const long hi = flag == "--pxn-senders" ? 8 : 100000;
    if (!parse_int(val, flag == "--pxn-lag" ? 0 : 1, hi, &n)) return bad(flag, val, "out of range");
    int* dst = flag == "--pxn-senders" ? &o->pxn_senders
               : flag == "--pxn-lag"   ? &o->pxn_lag
                                       : &o->pxn_steps;
    *dst = static_cast<int>(n);
    return Status::Ok();
  }
  if (flag == "--tree-leaves") return parse_leaves(val, &o->tree_leaves);
  if (flag == "--ring-fraction" || flag == "--rs-ring-fraction") {
    if (val == "auto") {
      d = kAutoRingFraction;
    } else if (!parse_double(val, &d) || d < 0.0 || d > 1.0) {
      return bad(flag, val, "expected 0..1 or auto");
    }
    (flag == "--ring-fraction" ? o->ring_fraction : o->rs_ring_fraction) = d;
    return Status::Ok();
  }
  if (flag == "--seed") {
    if (!parse_int(val, 0, 0x7fffffffL, &n)) return bad(flag, val, "expected 0..2^31-1");
    o->seed = static_cast<uint64_t>(n);
    return Status::Ok();
  }
  if (flag == "--json" || flag == "--timeline") {
    (flag == "--json" ? o->json_path : o->timeline_path) = val;
    return Status::Ok();
  }
  if (flag == "--timeout") {
    if (!parse_double(val, &d) || d <= 0.0) return bad(flag, val, "expected seconds > 0");
    o->timeout_s = d;
    return Status::Ok();
  }
  return Status::Error("unknown option " + flag + " (see --help)");
}

bool is_switch(const std::string& flag, Options* o) {
  if (flag == "--inplace")
    o->inplace = true;
  else if (flag == "--device-buffers")
    o->device_buffers = true;
  else if (flag == "--deterministic")
    o->deterministic = true;
  else if (flag == "--mixed-chunks")
    o->mixed_chunks = true;
  else if (flag == "--check-iters")
    o->check_iters = true;
  else if (flag == "--require-collnet")
    o->require_collnet = true;
  else if (flag == "--nccl-steps")
    o->nccl_steps = true;
  else if (flag == "--help" || flag == "-h")
    o->help = true;
  else
    return false;
  return true;
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
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (is_switch(arg, o)) continue;
    std::string flag = arg, val;
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      flag = arg.substr(0, eq);
      val = arg.substr(eq + 1);
    } else {
      if (arg.empty() || arg[0] != '-') return Status::Error("unexpected argument '" + arg + "'");
      if (i + 1 >= argc) return Status::Error("option " + arg + " needs a value");
      val = argv[++i];
    }
    DRV_TRY(apply(flag, val, o));
  }
  if (o->help) return Status::Ok();
  if (o->minbytes > o->maxbytes) return Status::Error("--minbytes is larger than --maxbytes");
  if (o->maxbytes == 0) return Status::Error("--maxbytes must be > 0");
  if (o->maxbytes > (size_t{8} << 30)) return Status::Error("--maxbytes above 8G is not supported");
  if (!o->tree_leaves.empty() && o->nranks > 0) {
    uint32_t sum = 0;
    for (uint32_t k : o->tree_leaves) sum += k;
    if (sum != static_cast<uint32_t>(o->nranks)) {
      return Status::Error("--tree-leaves must add up to --nranks");
    }
  }
  if (o->service_conns > 0 && o->hold_conns > 0) {
    return Status::Error("--service-conns and --hold-conns exclude each other");
  }
  if (o->service_collnet > 0) {
    for (Mode m : o->modes) {
      if (m != Mode::kCollNet && m != Mode::kHybrid) {
        return Status::Error(std::string("--service-collnet applies to the collnet and hybrid ") +
                             "modes only, not " + mode_name(m));
      }
    }
  }
  for (Mode m : o->modes) {
    if (is_direct(m) && o->inplace) {
      return Status::Error(std::string("--inplace applies to AllReduce modes only, not ") +
                           mode_name(m));
    }
  }
  return Status::Ok();
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
  std::printf(
      "Usage: %s [options]\n"
      "Runs AllReduce through an NCCL net/CollNet plugin the way NCCL's proxy calls it,\n"
      "with host memory, one process per rank, and verifies every result.\n\n"
      "  --plugin PATH|NAME     plugin file, or a name resolved like NCCL_NET_PLUGIN\n"
      "                         (default: $NCCL_NET_PLUGIN, else libnccl-net.so)\n"
      "  --nranks N             fork N ranks on this machine; without it the rank comes from\n"
      "                         CONFLUX_DRIVER_RANK/_NRANKS/_ROOT=host:port\n"
      "  --modes LIST           collnet,hybrid,ring (default: all three); also\n"
      "                         reducescatter,allgather (CollNetDirect pattern; size = total),\n"
      "                         pxn (senders sharing a connection, grouped irecvs, or with\n"
      "                         maxRecvs 1 a connection each; size = bytes per message)\n"
      "  --net-abi N            drive ncclNetPlugin_vN (8, 9, 10, 12) through a v11 adapter,\n"
      "                         as NCCL 2.28 presents an older plugin (default 11; 12: NCCL\n"
      "                         2.30's, properties converted), with the CollNet of the same\n"
      "                         version; the tuner is left out\n"
      "  --nccl-steps           ring mode: NCCL's proxy step by step over --nccl-channels\n"
      "                         channels (LL/LL128/Simple steps, one progress loop), --iters\n"
      "                         AllReduces per size then a barrier; every step checked\n"
      "  --nccl-channels C      with --nccl-regions: C channels, in groups of 8 issued\n"
      "                         round-robin, the area registered per channel (default 1)\n"
      "  --service-conns K      a service thread connects, registers and closes K more\n"
      "                         connections to rank+1 while the mode runs (NCCL's proxy\n"
      "                         service thread beside its progress thread)\n"
      "  --hold-conns K         as --service-conns, but the K connections stay open for the\n"
      "                         mode's life; rank 0 reports threads and fds per rank\n"
      "  --service-collnet K    collnet, hybrid: a service thread connects K more CollNet\n"
      "                         comms over the same ranks, one after the other, registers,\n"
      "                         runs verified AllReduces, deregisters and closes each, while\n"
      "                         the mode's own CollNet comm streams\n"
      "  --nccl-regions B       collnet, hybrid: each iallreduce is a whole B-byte region of\n"
      "                         one shared staging area whatever the user's size, its tail\n"
      "                         stale (0xff), as NCCL's CollNet proxy issues them\n"
      "  --pxn-senders N        pxn: senders per peer (2, at most 8)\n"
      "  --pxn-lag N            pxn: sender j starts once sender j-1 posted N messages (16)\n"
      "  --pxn-steps N          pxn: messages per sender per iteration (32)\n"
      "  --ring-fraction F      CONFLUX_RING_FRACTION of the hybrid mode (default 0.5;\n"
      "                         auto: the plugin's split from the grants and link rates)\n"
      "  --rs-ring-fraction F   CONFLUX_RING_FRACTION of the reducescatter mode (default 0)\n"
      "  -b|--minbytes B        smallest size (default 4); K/M/G suffixes\n"
      "  -e|--maxbytes B        largest size (default 64M)\n"
      "  -f|--stepfactor F      size multiplier (default 4)\n"
      "  -n|--iters N           timed iterations (default 20)\n"
      "  -w|--warmup N          warm-up iterations (default 5)\n"
      "  -d|--dtype LIST|all    datatypes (default float)\n"
      "  -o|--op LIST|all       sum,prod,max,min (default sum)\n"
      "  --chunk-bytes B        bytes per request (default 1M)\n"
      "  --inflight N           requests in flight, per peer for ring (default 8, max 32)\n"
      "  --mixed-chunks         collnet, hybrid: every other request is 4 KiB, so that small\n"
      "                         requests (completed inside test()) queue ahead of large ones\n"
      "  --inplace              in-place AllReduce (send buffer == receive buffer)\n"
      "  --device-buffers       CollNet modes on device memory (CUDA driver loaded at run\n"
      "                         time), registered with NCCL_PTR_CUDA as NCCL does at gdr 1\n"
      "  --deterministic        set CONFLUX_DETERMINISTIC=1; CollNet results must match the\n"
      "                         rank-order reference bit for bit\n"
      "  --check-iters          also verify every warm-up and timed iteration\n"
      "  --require-collnet      fail if CollNet is unavailable or declined\n"
      "  --seed N               input seed (default 1)\n"
      "  --json FILE            write all rows and the environment as JSON (rank 0)\n"
      "  --timeline FILE        write each timed iteration's end time and duration (rank 0)\n"
      "  --timeout S            whole-run limit in seconds (default 300)\n"
      "  --idle-sleep-us N      idle polling sleeps N us instead of sched_yield (default 0;\n"
      "                         helps when ranks outnumber cores), longer while completions\n"
      "                         are far apart: up to 1/4 of the wait, 1/8 of the gap, 1 ms\n"
      "  --inject-rank-exit R   test hook: rank R exits abruptly after setup\n"
      "  --tree-leaves N,N,...  the aggregators form a reduction tree with these many ranks\n"
      "                         per leaf, in rank order: --deterministic checks against the\n"
      "                         two-level reference (each leaf in rank order, then the leaves)\n"
      "  --close-stagger-ms N   rank r closes its CollNet communicator r*N ms late, as ranks\n"
      "                         do when NCCL tears a job down\n",
      argv0);
}

}  // namespace conflux::driver
