// SPDX-License-Identifier: Apache-2.0
// A small in-process stand-in for confluxd, for the engine's unit tests: speaks the
// control protocol and reduces float32/int32 sums per SPEC.md §4 (two banks per slot,
// contributor bitmap, resend of a complete result), with switches to misbehave
// (refuse joins, stay silent, shut down, close). One thread; 127.0.0.1 only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "conflux/protocol/control.h"

namespace conflux::client::testing {

struct FakeOptions {
  uint32_t max_slots = 8;
  uint32_t max_payload = 64;
  uint32_t n_ports = 2;
  uint64_t support_mask = (uint64_t{1} << 48) - 1;
  proto::Status join_status = proto::Status::kOk;
  bool auth_required = false;
  std::string secret;
  // Owned contributions (Reduce): the owner gets the result and the other ranks an ACK,
  // as SPEC.md says; or every rank gets the full result (an aggregator that ignores owners);
  // or every rank, the owner too, gets an ACK (a broken aggregator).
  enum class Owned : uint8_t { kSpec, kFullToAll, kAckToAll };
  Owned owned = Owned::kSpec;
  // Sent after JoinAck to workers that ask for it (Join flag capacity).
  proto::Capacity capacity{0, 0, 0, 1};
  // An aggregator older than multicast (SPEC §8): a Join with a multicast flag is malformed
  // to it (Error{bad_message} and the connection closed).
  bool predates_multicast = false;
  // Older than version negotiation (SPEC §1): a Join offering versions is a bad message.
  bool predates_versions = false;
  // A bottleneck in front of the workers: results leave one after another at this many bytes
  // per second, queued in arrival order (0: at once).
  uint64_t result_bytes_per_s = 0;
  // A busy aggregator shedding connections: the first `close_before_hello`
  // connections are closed at accept, before the ServerHello; the first `close_on_join`
  // Joins are answered by closing the connection (shed before it read the Join).
  uint32_t close_before_hello = 0;
  uint32_t close_on_join = 0;
  // An aggregator that says no at once: this Error instead of the ServerHello, then a close.
  std::optional<proto::Error> hello_error;
  uint16_t control_port = 0;  // 0: an ephemeral port
};

class FakeAggregator {
 public:
  explicit FakeAggregator(FakeOptions opt);
  ~FakeAggregator();

  uint16_t control_port() const { return control_port_; }
  std::string endpoint() const { return "127.0.0.1:" + std::to_string(control_port_); }

  // Behaviour switches, any thread.
  void set_silent(bool v) { silent_ = v; }     // ignore everything, answer nothing
  void send_shutdown() { shutdown_ = true; }   // Shutdown{0} on every connection
  void close_connections() { close_ = true; }  // close every control connection
  // A grant update (SPEC §3): options().capacity with this share and reason, to every
  // connection of a job that asked for Capacity messages.
  void send_grant(uint32_t share_mbps, proto::CapacityReason why) {
    grant_why_ = why;
    grant_ = share_mbps + 1;  // 0: none pending
  }

  uint64_t contributions() const { return contributions_; }
  uint64_t retransmitted_contributions() const { return retransmitted_; }
  uint64_t duplicates() const { return duplicates_; }
  uint64_t results_resent() const { return resent_; }
  uint64_t leaves() const { return leaves_; }
  uint64_t refused_joins() const { return refused_joins_; }  // predates_multicast refusals
  uint64_t connections() const { return connections_; }      // control connections accepted

 private:
  struct State;
  void run();

  FakeOptions opt_;
  uint16_t control_port_ = 0;
  std::unique_ptr<State> st_;
  std::atomic<bool> stop_{false}, silent_{false}, shutdown_{false}, close_{false};
  std::atomic<uint64_t> grant_{0};
  std::atomic<proto::CapacityReason> grant_why_{proto::CapacityReason::kJobJoined};
  std::atomic<uint64_t> contributions_{0}, retransmitted_{0}, duplicates_{0}, resent_{0},
      leaves_{0}, refused_joins_{0}, connections_{0};
  std::thread thread_;
};

}  // namespace conflux::client::testing
