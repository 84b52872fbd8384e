// SPDX-License-Identifier: Apache-2.0
// The worker-side client engine: runs AllReduce through one or more Conflux aggregators
// (protocol/SPEC.md). Used by the NCCL plugin (libnccl-net-conflux.so) and the tools.
//
// Threads and blocking:
//  * Engine::create blocks (TCP connect, ServerHello, Join, wait for JoinAck from every
//    aggregator; bounded by connect_timeout and join_timeout). Call it from any thread.
//  * Each Engine owns one progress thread for its network I/O: one UDP socket for every
//    aggregator, the control connections, retransmissions and heartbeats. With
//    ClientConfig::caller_progress (the default) the callers share that work, as NCCL's
//    own transports do it inside test(): allreduce() sends the first packets from the
//    calling thread, and test()/wait() receive results and send more while they poll. A
//    caller runs a progress step only when no other thread is in one (try_lock); while a
//    caller has polled in the last 200 us the progress thread dozes, and it takes over
//    when the callers go quiet.
//  * allreduce/test/stats/healthy/abort may be called from any thread (typically NCCL's
//    proxy thread), concurrently with each other. allreduce and test never wait for the
//    network: their progress step does non-blocking I/O only, and the mutexes they take
//    are held only briefly.
//  * The destructor stops the progress thread, sends Leave and closes the sockets. It
//    must not run concurrently with other calls on the same Engine.
//  * Several engines in one process are independent (no global state).
//  * Nothing here throws; errors are returned as RequestState::kError plus text.
//
// Failure model: when any aggregator of the engine dies (control connection closed,
// Shutdown, Error, nothing heard for aggregator_timeout, or a stalled packet when
// stall_timeout is set), the engine becomes *failed*: every incomplete request and every
// later one ends with kError and a message naming the aggregator, e.g.
// "aggregator 127.0.0.1:7470 stopped answering for 5000 ms". The engine stays failed;
// the caller moves the work elsewhere (the NCCL plugin: to its ring).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "conflux/client/config.h"
#include "conflux/common/dtype.h"
#include "conflux/protocol/data.h"

namespace conflux::client {

enum class RequestState : uint8_t { kPending = 0, kDone = 1, kError = 2 };

// What one aggregator granted this job (its JoinAck) and where it is.
struct AggregatorInfo {
  Endpoint endpoint;    // as configured
  size_t stripe = 0;    // its entry in ClientConfig::aggregators
  uint32_t weight = 1;  // its ClientConfig::stripe_weights entry (1 when they are empty)
  std::string address;  // resolved control address "ip:port"
  uint32_t job_id = 0;
  uint32_t granted_slots = 0;    // window W on this aggregator
  uint32_t payload_bytes = 0;    // granted payload per packet
  uint64_t support_mask = 0;     // bit dtype*4+op (ServerHello)
  bool deterministic = false;    // JoinAck flag
  bool data_mac = false;         // JoinAck flag: data packets carry a MAC (SPEC.md §6)
  uint8_t protocol_version = 1;  // agreed at Join (SPEC.md §1 "Negotiation")
  std::vector<uint16_t> data_ports;
  // Its Capacity message (ClientConfig::capacity), Mbit/s; 0 = unknown / no cap. As at join:
  // later grant updates show in Engine::grants() and EngineStats::grant_mbps.
  bool capacity_known = false;
  uint32_t line_mbps = 0;
  uint32_t max_mbps = 0;
  uint32_t share_mbps = 0;
  uint16_t threads = 0;
  bool multicast = false;  // results come by the job's multicast group (SPEC §8)
  std::string group;       // "group:port" granted in the JoinAck, or empty
};

// Counters, a consistent-enough snapshot (each field read atomically).
struct EngineStats {
  uint64_t packets_sent = 0;      // datagrams handed to the kernel (retransmits included)
  uint64_t packets_received = 0;  // datagrams read from the socket
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  uint64_t retransmits = 0;         // contributions resent (timeouts + fast retransmits)
  uint64_t fast_retransmits = 0;    // of which resent early because later results overtook them
  uint64_t results_accepted = 0;    // results (and acknowledgements) that completed a packet
  uint64_t results_duplicated = 0;  // == drops[kDuplicate]
  uint64_t send_errors = 0;         // sendmmsg failures (the packet is retransmitted later)
  uint64_t fault_dropped = 0;       // datagrams the fault injector discarded (both ways)
  uint64_t fault_duplicated = 0;
  uint64_t fault_reordered = 0;
  uint64_t requests_completed = 0;
  uint64_t requests_failed = 0;
  // Resent packets proven needless: after the aggregator's broadcast answered the
  // packet, a RETRANSMIT-flagged copy of the result came back (the resend found the bank
  // complete). A lower bound: a resend that reaches a bank still collecting is not seen.
  uint64_t spurious_retransmits = 0;
  uint64_t cwnd_decreases = 0;     // multiplicative decreases of the congestion window
  uint64_t congestion_window = 0;  // now: sum over aggregators of the window in packets
  uint64_t gso_sends = 0;          // sends of several datagrams as one (UDP GSO)
  uint64_t gso_fallbacks = 0;      // 1 when the route refused GSO and sends went plain
  uint64_t gro_receives = 0;       // receives that the kernel coalesced (UDP GRO)
  // Time with at least one request taken by the progress thread and not finished, the
  // current stretch included: with bytes_sent, the rate of the aggregation path.
  uint64_t busy_ns = 0;
  // Time with contributions waiting because every window slot (or the congestion window) was
  // in use: the aggregation path, not the caller, was the limit then.
  uint64_t window_full_ns = 0;
  uint64_t multicast_results = 0;  // results accepted from a multicast group
  // Progress rounds that a caller (allreduce, test, wait) ran itself and that moved a
  // packet or request (ClientConfig::caller_progress); 0 when off.
  uint64_t caller_steps = 0;
  // Times the progress thread slept in poll() for want of work: once the busy-poll time
  // (ClientConfig::spin_us) ran out, or at once while more than spin_max_bytes were in flight.
  uint64_t progress_sleeps = 0;
  // Of those, sleeps that began with a bulk pause (ClientConfig::bulk_wake).
  uint64_t bulk_pauses = 0;
  // Times the progress thread dozed because a caller's poll claimed the I/O; each doze ends
  // when the claim runs out (1 ms after the poll; 200 us while more than spin_max_bytes are
  // in flight) or at a wake().
  uint64_t dozes = 0;
  // Whether more than spin_max_bytes are in flight now, as the owner of the I/O last saw:
  // what decides a caller's claim (200 us when true, 1 ms when false).
  bool bulk_in_flight = false;
  // Sum over the aggregators of their current grant to this job (Capacity share_mbps),
  // Mbit/s, 0 = unknown; it moves when an aggregator sends a grant update (SPEC.md §3).
  uint64_t grant_mbps = 0;
  uint64_t grant_updates = 0;                            // grant updates received while running
  std::array<uint64_t, proto::kNumDropReasons> drops{};  // by proto::DropReason
};

// A second destination for the end of a result: bytes [from, count * esize) of the result
// also land at dst[0, count * esize - from), copied from each packet as it arrives, while the
// packet is still in cache (CollNet keeps these ends for a failover, result_tails.h). dst
// must stay valid as `recv` does; nullptr: none.
struct ResultCopy {
  uint8_t* dst = nullptr;
  size_t from = 0;
};

class Engine {
 public:
  // Joins the job on every aggregator of `cfg` (see the file comment). On failure returns
  // nullptr and sets *error (if non-null) to a message naming the aggregator and cause,
  // e.g. "aggregator 10.0.0.5:7470 refused Join: job_mismatch (...)".
  static std::unique_ptr<Engine> create(const ClientConfig& cfg, std::string* error);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Starts an AllReduce of `count` elements; returns a handle (never 0). Does not block.
  // `send` and `recv` must stay valid and `send` unchanged until test() returns kDone or
  // kError for the handle (or the engine is destroyed); send == recv (in place) is fine,
  // partial overlap is not. Requests go on the wire in submission order on every
  // aggregator, so every rank must submit the same sequence of (count, dtype, op).
  // Unsupported dtype/op or a failed engine gives a handle whose test() reports kError.
  uint64_t allreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                     ResultCopy tail = {});
  // Starts a Reduce to rank `root`: as allreduce, but the aggregators send the result to
  // `root` only and a payload-less acknowledgement to every other rank (SPEC.md §4, "Owned
  // results"). Only `root` writes `recv`; the other ranks may pass recv == nullptr. Every
  // rank must submit the same root. A root outside the job gives a kError handle.
  // `stripe_start`: packet k goes to aggregator (k + stripe_start) mod A instead of k mod A,
  // so that consecutive requests (a ReduceScatter's per-owner pieces) stripe as one; every
  // rank must pass the same value.
  uint64_t reduce(const void* send, void* recv, size_t count, DType dtype, Op op, uint32_t root,
                  uint32_t stripe_start = 0);

  // Polls a request. kDone/kError are final and release the handle (a later test of the
  // same handle is kError "unknown request"). On kError, *error gets the reason.
  RequestState test(uint64_t request, std::string* error);
  // As test(), but releases the handle only when the request is done: kError leaves it for a
  // later test() or wait() to report and release. For a poller that completes the request
  // itself on success and hands anything else to another thread.
  RequestState poll_done(uint64_t request);
  // As test(), but sleeps up to `max_wait` for the request to finish first (instead of
  // spinning on test()); kPending only if it is still running after that.
  RequestState wait(uint64_t request, std::chrono::microseconds max_wait, std::string* error);

  // Fails every incomplete request and every later one with `reason`; returns once the
  // progress thread no longer touches any user buffer. Idempotent.
  void abort(std::string_view reason);

  // False once the engine has failed; *why (if non-null) gets the first error.
  bool healthy(std::string* why = nullptr) const;
  // Index into aggregators() of the aggregator whose loss failed the engine, or -1 (still
  // healthy, or failed for another reason such as abort()).
  int failed_aggregator() const;

  // True if every aggregator reduces this (dtype, op) pair (ServerHello support_mask)
  // and the effective payload holds at least one element of dtype.
  bool supports(DType dtype, Op op) const;

  const std::vector<AggregatorInfo>& aggregators() const;
  // Each aggregator's current grant to this job, Mbit/s, by index into aggregators(): its
  // share_mbps at join, then the latest grant update it sent (0 = unknown).
  std::vector<uint32_t> grants() const;
  // Payload per packet used for cutting: the smallest grant over the aggregators.
  uint32_t payload_bytes() const;
  // The period of the striping pattern: the sum of the aggregators' weights (their count when
  // the weights are equal). A request that continues another's striping starts at the
  // other's start plus its packets, modulo this.
  uint32_t stripe_period() const;
  uint16_t udp_port() const;  // local UDP port results arrive on
  EngineStats stats() const;

  class Impl;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  uint64_t submit(const void* send, void* recv, size_t count, DType dtype, Op op, int32_t root,
                  uint32_t stripe_start, ResultCopy tail);
  std::unique_ptr<Impl> impl_;
};

}  // namespace conflux::client
