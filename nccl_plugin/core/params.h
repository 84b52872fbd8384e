// SPDX-License-Identifier: Apache-2.0
// Every CONFLUX_* environment variable the plugin reads, declared in ONE table (params.cc)
// with name, type, default, range and documentation, and read once into a plain Config.
//
// Adding a variable (CollNet, tuner): add a field to Config and one row to the table in
// params.cc; nccl_plugin/README.md must list it (a test compares the README against
// formatParamRow() of every row).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <variant>

#include "net/status.h"
#include "net/transport.h"

namespace conflux::plugin {

// CONFLUX_RING_FRACTION=auto.
inline constexpr double kAutoFraction = -1.0;

using net::Status;

// Values of all CONFLUX_* variables after parsing; defaults come from the table.
struct Config {
  // Point-to-point TCP net.
  std::string socketIfname;
  int nthreads = 0;
  int nsocksPerThread = 0;
  size_t minChunkBytes = 0;
  size_t inlineBytes = 0;
  size_t socketBufBytes = 0;
  bool netCallerProgress = true;  // net::CommOptions::callerProgress
  int netStallWarnS = 60;         // net::CommOptions::stallWarnMs, in seconds
  int netProgressThreads = 4;     // net::CommOptions::progressThreads
  int netLatencyUs = 0;           // getProperties' latency
  int netMaxRecvs = 1;            // getProperties' maxRecvs; irecv refuses more parts
  std::string netDelegate;        // core/net_delegate.h; empty: Conflux's TCP net
  bool netDelegateFallback = false;
  // CollNet: aggregators, overflow ring and failover.
  std::string aggregators;
  std::string stripeWeights;  // CONFLUX_STRIPE_WEIGHTS, "3,1"; empty: equal
  bool requireAggregators = false;
  double ringFraction = kAutoFraction;  // kAutoFraction: collnet/split.h decides
  int ringMinUs = 0;  // ring shares shorter than this on the link go through the aggregators
  int aggregatorMbps = 0;
  int linkMbps = 0;  // the workers' link rate for the split; 0: the NIC's reported speed
  bool congestionControl = true;
  bool udpOffload = true;
  int busyPollUs = 50;
  size_t busyPollMaxBytes = 64 << 10;  // client::ClientConfig::spin_max_bytes
  int bulkWakeUs = 2000;               // client::ClientConfig::bulk_wake
  bool callerProgress = true;          // client::ClientConfig::caller_progress
  std::string multicast;               // auto, on or off (protocol/SPEC.md §8)
#ifdef CONFLUX_TEST_HOOKS
  // CONFLUX_FAULT_*: test builds only (collnet/test_hooks.h applies them).
  double faultDrop = 0;
  double faultMulticastDrop = 0;
  int faultRank = -1;
  int faultRxBlackout = 0;
  int faultAbortAt = 0;
  int faultProbeFail = 0;
#endif
  bool deterministic = false;
  std::string secret;
  int windowSlots = 0;
  size_t payloadBytes = 0;
  int aggregatorTimeoutMs = 0;
  int joinTimeoutMs = 0;
  size_t ringBlockBytes = 0;
  int ringInflight = 0;
  int ringLanes = 0;
  int ringTimeoutMs = 0;
  size_t stagingChunkBytes = 0;  // collnet/staging.h
  int stagingSlots = 0;
  // Tuner.
  size_t tunerCollnetMinBytes = 0;
  size_t tunerCollnetMaxBytes = 0;

  net::TransportConfig transportConfig() const;
};

enum class ParamType { kInt, kSize, kString, kBool, kFraction };

struct ParamSpec {
  const char* name;
  ParamType type;
  const char* defaultValue;  // parsed like a user value
  long long min;             // kInt/kSize only
  long long max;
  const char* doc;
  std::variant<int Config::*, size_t Config::*, std::string Config::*, bool Config::*,
               double Config::*>
      field;
};

// The table, in documentation order.
std::span<const ParamSpec> paramTable();

// Looks up an environment variable; returns nullptr when unset. Default: std::getenv.
using EnvLookup = std::function<const char*(const char* name)>;

// Fills *out from defaults and the environment. On an invalid value returns
// kInvalidArgument and puts a message naming the variable into *error.
Status loadConfig(Config* out, std::string* error, const EnvLookup& env = {});

// "| `NAME` | type | default | doc |" — the README row for one parameter.
std::string formatParamRow(const ParamSpec& p);

// Parses "123", "64K", "4M", "1G" (binary multiples); false if malformed or negative.
bool parseSize(const char* text, long long* out);

}  // namespace conflux::plugin
