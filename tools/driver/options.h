// SPDX-License-Identifier: Apache-2.0
// Command-line options of conflux-nccl-driver (see README.md for the full table).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "conflux/common/dtype.h"
#include "driver/status.h"

namespace conflux::driver {

// AllReduce through CollNet (aggregators only, or split with the ring), AllReduce over the
// p2p net ring, CollNetDirect's ReduceScatter / AllGather through CollNet, and PXN-shared p2p
// connections with grouped receives (pxn.h).
enum class Mode { kCollNet, kHybrid, kRing, kReduceScatter, kAllGather, kPxn };
const char* mode_name(Mode m);
inline bool is_direct(Mode m) { return m == Mode::kReduceScatter || m == Mode::kAllGather; }

inline constexpr double kAutoRingFraction = -1.0;  // --ring-fraction auto

// --mixed-chunks: the small requests' size, under the plugin's inline-completion limit.
inline constexpr size_t kMixedSmallChunk = 4096;

struct Options {
  std::string plugin;  // --plugin PATH|NAME; empty: NCCL_NET_PLUGIN, then libnccl-net.so
  int nranks = 0;      // --nranks N: fork N local ranks; 0: take the rank from CONFLUX_DRIVER_*
  size_t minbytes = 4;
  size_t maxbytes = size_t{64} << 20;
  double stepfactor = 4.0;
  int iters = 20;
  int warmup = 5;
  std::vector<DType> dtypes{DType::kFloat32};
  std::vector<Op> ops{Op::kSum};
  std::vector<Mode> modes{Mode::kCollNet, Mode::kHybrid, Mode::kRing};
  double ring_fraction = 0.5;     // hybrid mode
  double rs_ring_fraction = 0.0;  // reducescatter mode
  size_t chunk_bytes = size_t{1} << 20;
  int inflight = 8;
  bool mixed_chunks =
      false;  // collnet/hybrid: alternate kMixedSmallChunk requests with chunk_bytes
  bool inplace = false;
  // CollNet modes on device memory (device_buffers.h), as NCCL at gdr 1.
  bool device_buffers = false;
  bool deterministic = false;
  bool check_iters = false;      // verify every warmup/timed iteration, not only the check run
  bool require_collnet = false;  // CollNet unavailable/declined is an error, not a skipped table
  uint64_t seed = 1;
  std::string json_path;
  std::string timeline_path;  // --timeline FILE: rank 0's per-iteration times (report.h)
  double timeout_s = 300.0;
  int idle_sleep_us = 0;              // polling loops: 0 = sched_yield (NCCL-like), N = sleep N us
  int inject_exit_rank = -1;          // test hook: this rank exits abruptly after setup
  int close_stagger_ms = 0;           // rank r closes its CollNet comm r * this ms after the others
  std::vector<uint32_t> tree_leaves;  // --tree-leaves: ranks per leaf (deterministic reference)
  int net_abi = 11;                   // --net-abi: the ncclNetPlugin_vN driven (8..12)
  int service_conns = 0;              // --service-conns: connections made by a service thread
  int hold_conns = 0;                 // --hold-conns: ... and kept open; resources reported
  int service_collnet = 0;            // --service-collnet: CollNet comms a service thread makes
  int nccl_channels = 1;              // --nccl-channels: channels of the regions (8 per group)
  size_t nccl_region_bytes = 0;       // --nccl-regions: CollNet AllReduce requests (0: off)
  int pxn_senders = 2;                // --pxn-senders: senders per peer (pxn mode)
  int pxn_lag = 16;                   // --pxn-lag: messages sender j-1 posts before sender j
  int pxn_steps = 32;                 // --pxn-steps: messages per sender per iteration
  bool nccl_steps = false;            // --nccl-steps: ring mode as NCCL's proxy (nccl_steps.h)
  bool help = false;
};

// Parses argv. On error returns a Status naming the bad flag; --help sets opts->help.
Status parse_options(int argc, char** argv, Options* opts);
void print_usage(const char* argv0);

// "4", "64K", "1M", "2G" (binary multiples) -> bytes. False on junk or overflow.
bool parse_bytes(const std::string& s, size_t* out);

// Message sizes minbytes, minbytes*f, ... <= maxbytes.
std::vector<size_t> size_list(const Options& o);

}  // namespace conflux::driver
