// SPDX-License-Identifier: Apache-2.0
// Configuration of one worker-side client engine (see engine.h) and the aggregator
// endpoint list parser. Plain data; no global state.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "conflux/common/status.h"
#include "conflux/protocol/control.h"

namespace conflux::client {

enum class LogLevel : uint8_t { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Called from the thread that calls Engine::create (during create) and from the engine's
// progress thread afterwards. Must be thread-safe if several engines share it, must not
// block for long and must not call back into the engine.
using LogFn = std::function<void(LogLevel, std::string_view)>;

// host:port of an aggregator's TCP control listener. host is an IPv4 literal or a name
// that resolves to IPv4 (the data channel is IPv4, see protocol/SPEC.md).
struct Endpoint {
  std::string host;
  uint16_t port = 0;
  // A reduction tree deeper than 2 (protocol/SPEC.md §7): the aggregators above this one
  // that are not the root, nearest first, as written ("host:port"). Only counted, never
  // contacted: the ranks agree on how many of them each one serves.
  std::vector<std::string> above{};
  std::string to_string() const { return host + ":" + std::to_string(port); }
  bool operator==(const Endpoint&) const = default;
};

// Parses "h1:p1,h2:p2" (spaces around entries allowed, no empty entries, port 1..65535,
// no duplicates). An entry may name its chain up a reduction tree, "leaf>mid>...": the
// first endpoint is the one contacted, the rest go to Endpoint::above (at most
// proto::kMaxTreeLevelsUp). Returns false and a message naming the bad entry on error.
bool parse_endpoints(std::string_view list, std::vector<Endpoint>* out, std::string* error);

#ifdef CONFLUX_TEST_HOOKS
// Test builds only (CONFLUX_TEST_HOOKS): fault injection, applied independently to every
// datagram this engine sends and receives (src/fault.h). Probabilities in [0, 1]. A reordered
// datagram is held back and delivered after the next batch (or after ~1 ms when nothing follows
// it).
struct FaultInjection {
  double drop = 0;
  double dup = 0;
  double reorder = 0;
  uint64_t seed = 1;  // combined with the rank, so ranks draw different sequences
  // > 0: after this many received datagrams, every later one is dropped (a rank that stops
  // hearing results while the aggregator still takes its contributions).
  uint64_t rx_blackout_after = 0;
  // Share of the datagrams received on the aggregators' multicast groups that are dropped
  // (1: this rank hears nothing from the groups, probes included; protocol/SPEC.md §8).
  double multicast_drop = 0;
  bool enabled() const { return drop > 0 || dup > 0 || reorder > 0; }
};
#endif

// Per-aggregator congestion window (slow start + AIMD, see src/congestion.h): bounds the
// packets outstanding on one aggregator below the granted window W when the path to it
// drops or delays packets (incast on an aggregator link slower than the workers' sum).
struct CongestionConfig {
  bool enabled = true;           // false: always W outstanding (no congestion control)
  uint32_t initial_window = 16;  // packets at the start, then slow start up to W
  uint32_t min_window = 2;       // a decrease never goes below this (capped by W)
  double decrease = 0.5;         // factor of a decrease, in (0, 1); at most once per window
};

// Multicast result delivery (protocol/SPEC.md §8). kAuto: take an aggregator's group when
// every rank of the job received its probe; kOn: take it without a probe; kOff: never (the
// job is then unicast on every aggregator, since a group needs every rank).
enum class MulticastMode : uint8_t { kAuto, kOn, kOff };

struct ClientConfig {
  std::vector<Endpoint> aggregators;  // control endpoints; the job is striped over all of them
  uint64_t job_key = 0;               // identical on every rank of the job
  uint32_t n_workers = 0;             // 1..1024
  uint32_t rank = 0;                  // 0..n_workers-1
  uint32_t window_slots = 64;         // requested window W per aggregator
  uint32_t payload_bytes = 8192;      // requested payload per packet (<= 61440)
  bool deterministic = false;         // ask for contributor-order reduction (bitwise stable)
  bool capacity = true;  // ask each aggregator for its Capacity (SPEC.md §3; not with old daemons)
  // The protocol versions this worker speaks, offered at Join (SPEC.md §1 "Negotiation"); the
  // job speaks the highest one the aggregator speaks too. This build's range by default.
  uint8_t min_version = proto::kMinProtocolVersion;
  uint8_t max_version = proto::kMaxProtocolVersion;
  // Reduction tree (protocol/SPEC.md §7): for aggregator i, how many of the job's ranks join
  // it (this rank's leaf serves that many). Empty, or n_workers: every rank joins it (depth 1).
  std::vector<uint32_t> served_ranks;
  // Deeper trees: for aggregator i, how many of the job's ranks each aggregator above this
  // rank's leaf serves, nearest first (the leaf's parent, its parent, ...; the root, serving
  // every rank, may be left out). Empty: the leaf's parent is the root (depth 1 or 2).
  std::vector<std::vector<uint32_t>> served_up_ranks;
  // Weighted striping (protocol/SPEC.md §4): aggregator i carries stripe_weights[i] of every
  // sum(stripe_weights) packets, so unequal aggregators (or trees, or a direct-connect plan's
  // topologies) each take the share they can carry. Identical on every rank. Empty: equal.
  std::vector<uint32_t> stripe_weights;
  std::string secret;  // shared secret for the Join MAC; empty = none

  std::chrono::microseconds rto_initial{2000};  // first retransmission timeout
  std::chrono::microseconds rto_max{100000};    // backoff cap
  // Floor of the retransmission timeout and of its variance term: RTO = srtt +
  // max(4 rttvar, rto_min), at least rto_min (capped by rto_max). Absorbs scheduling
  // delays of busy hosts that would otherwise fire spurious retransmissions.
  std::chrono::microseconds rto_min{5000};
  CongestionConfig congestion;
  // An aggregator from which nothing (no result, no control message) arrives for this
  // long is dead; heartbeats keep a live one audible.
  std::chrono::milliseconds aggregator_timeout{5000};
  // A packet that waits this long for its result fails the engine even though the
  // aggregator still answers heartbeats (a stuck dataplane or a peer rank that never
  // contributes). 0 = off (the default: a slow rank must not look like a dead aggregator).
  std::chrono::milliseconds stall_timeout{0};
  // Control-channel heartbeat period; the engine uses at most aggregator_timeout / 2.
  std::chrono::milliseconds heartbeat_interval{1000};
  std::chrono::milliseconds join_timeout{30000};  // waiting for all ranks to join
  // TCP connect + ServerHello, each; also how long refused connects are tried again (a
  // connection dropped before an answer is tried again until the join timeout).
  std::chrono::milliseconds connect_timeout{5000};

  std::string bind_addr = "0.0.0.0";  // local IPv4 address of the UDP socket
  uint32_t spin_us = 50;              // busy-poll this long after the last activity
  // ... but only while the requests in flight total at most this many bytes. A bulk transfer
  // is paced by the link: spinning between its packets burns a core and buys nothing, so
  // the threads sleep until the next packet instead. Small requests, whose latency is the
  // whole cost, still get the spin.
  uint64_t spin_max_bytes = 64 << 10;
  // While more than spin_max_bytes are in flight, the progress thread takes results at most
  // once per bulk_wake (and at most four times per round trip to the aggregators): it sleeps
  // that long before it waits on the sockets, so that each wake-up takes a batch of results
  // instead of one GRO buffer (a wake-up costs more than the datagrams it takes). A
  // new request or abort() still wakes it at once. 0 = wake for every datagram.
  // 2 ms: the quarter round trip is then the bound wherever the round trip is under 8 ms.
  std::chrono::microseconds bulk_wake{2000};
  // Callers progress the engine (as NCCL's socket and IB transports do inside test()):
  // allreduce() sends the request's first packets from the calling thread, and test() and
  // wait() read results and send more while they poll, so a small AllReduce crosses no
  // thread. The progress thread stands back while a caller polls and takes over when the
  // callers go quiet (timers, heartbeats, a caller that sleeps). false: only the progress
  // thread does I/O.
  bool caller_progress = true;
  int socket_buffer_bytes = 8 << 20;  // SO_RCVBUF / SO_SNDBUF request
  // UDP segmentation offload: same-size datagrams to one aggregator leave as one GSO send
  // and coalesced receives (GRO) are taken, where the kernel has them; false: one datagram
  // per send and per receive. The wire format is the same either way.
  bool udp_offload = true;
  MulticastMode multicast = MulticastMode::kAuto;
  // A job striped over several aggregators may go on without those that refuse it (a draining
  // daemon, one without capacity, one that cannot be reached), provided every rank keeps the
  // same ones. With join_agree set, the join does not fail at the first aggregator that says
  // no: it waits for every answer (or gives an aggregator up, below), then calls join_agree
  // with the aggregators this rank joined (bit i: aggregators[i]) and, for those it did not,
  // why ("; "-joined). join_agree tells the other ranks and returns ok with the set every rank
  // keeps in *agreed (a subset of `joined`), or what failed. The engine then runs on that set
  // (AggregatorInfo::stripe says which entry each is); an empty set fails the engine. Empty:
  // any refusal fails the engine (the re-join after a failover, conflux check).
  std::function<Status(uint64_t joined, const std::string& why, uint64_t* agreed)> join_agree;
  // Polled (every 100 ms at most) while this rank waits for JoinAcks, when join_agree is set:
  // true once another rank's outcome is known, with *alive the aggregators that can still be
  // kept on every rank; the join stops waiting for the others (they would be left out anyway),
  // so a rank whose aggregator waits for ranks that were refused elsewhere (a tree whose other
  // leaf is draining) does not wait for the join timeout. May be empty.
  std::function<bool(uint64_t* alive)> join_peers;
#ifdef CONFLUX_TEST_HOOKS
  FaultInjection faults;  // test builds only
#endif
  LogFn log;  // may be empty (no logging)
};

// Checks ranges and consistency: ok, or invalid_argument saying what is wrong.
Status validate(const ClientConfig& c);

}  // namespace conflux::client
