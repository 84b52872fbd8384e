// SPDX-License-Identifier: Apache-2.0
// `conflux check`: the preflight a user runs on a worker host before a job. For each
// aggregator it does what the NCCL plugin does at connect, as a one-rank job of its own:
// TCP connect and ServerHello, the authenticated Join (CONFLUX_SECRET), and full-payload UDP
// round trips through the aggregator's reduction (a one-rank AllReduce returns its input),
// by multicast when the aggregator grants a group and this host receives its probe;
// then it says what a job would do: which aggregators it would use, or that the plugin would
// decline CollNet and run everything on the worker ring, and why; and which net carries the
// job's point-to-point traffic (Conflux's TCP net, or the CONFLUX_NET_DELEGATE plugin, loaded
// as the plugin would load it); per NIC of that net, the GPUDirect bit NCCL will compute
// (nccl/topo_gdr.h: CollNet mirrors the net's devices) and whether CollNet can take the device
// memory NCCL then hands it (the CUDA driver loads: collnet/staging.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace conflux::cli {

struct CheckOptions {
  std::string aggregators;  // host:port,... (CONFLUX_AGGREGATORS)
  std::string secret;       // CONFLUX_SECRET
  uint32_t payload_bytes = 8192;
  std::string bind_addr = "0.0.0.0";
  int timeout_ms = 5000;
  std::string net_delegate;            // CONFLUX_NET_DELEGATE
  bool net_delegate_fallback = false;  // CONFLUX_NET_DELEGATE_FALLBACK
};

struct AggregatorCheck {
  std::string endpoint;
  bool joined = false;      // control port, ServerHello, authenticated Join
  bool round_trip = false;  // full-payload AllReduce exact
  std::string error;        // the first failure
  uint32_t granted_slots = 0, payload_bytes = 0;
  bool data_mac = false, deterministic = false;
  bool multicast = false;  // results came by the job's group (the probe was received)
  std::string group;       // the group granted, "" when none
  double rtt_us = 0;       // median one-packet round trip
};

struct NicCheck {
  std::string name;
  int ptr_support = 0;
  bool gdr = false;  // as NCCL computes it: device buffers for CollNet and the p2p net
};

struct CheckReport {
  std::vector<AggregatorCheck> aggregators;
  bool usable = false;  // a job would run CollNet over every aggregator
  std::string verdict;  // one line for the user
  std::string p2p_net;  // which net carries point-to-point traffic, or why NCCL's init would fail
  bool p2p_ok = true;   // false: the delegate cannot be loaded and there is no fallback
  std::vector<NicCheck> nics;  // the delegate's devices (empty: Conflux's TCP net, host only)
  bool cuda = false;           // the CUDA driver loads: CollNet stages device memory
  std::string device_memory;   // one line: what CollNet does with NCCL's buffers here
  bool device_ok = true;       // false: a NIC has gdr 1 but CollNet cannot take device memory
  std::string resolved;        // the list with its dns: entries resolved ("" without any)
};

CheckReport run_check(const CheckOptions& o);
std::string check_table(const CheckReport& r);
std::string check_json(const CheckReport& r);

}  // namespace conflux::cli
