// SPDX-License-Identifier: Apache-2.0
// The aggregation engine of one dataplane queue (thread): validates a datagram against the
// job table, runs the aggregator slot state machine of SPEC.md §4 and reduces payloads with
// conflux::reduce. Independent of packet I/O: every backend (kernel UDP, DPDK, verbs) owns one
// SlotEngine per queue, feeds it received datagrams and transmits what lands in the
// ResultBatch. Not thread-safe: one engine per thread; no locks and no virtual calls inside.
#pragma once

#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "aggregator/engine/counters.h"
#include "aggregator/engine/job_table.h"
#include "aggregator/engine/result_batch.h"
#include "conflux/protocol/data.h"
#include "conflux/protocol/data_mac.h"

namespace conflux::agg {

// Where a received datagram came from: IPv4 address and UDP port in network byte order (as in
// sockaddr_in). A contribution is taken only from the address its contributor registered at
// join (SPEC.md §4 "Source binding").
struct Source {
  uint32_t ip = 0;
  uint16_t port = 0;

  static Source of(const sockaddr_in& a) { return {a.sin_addr.s_addr, a.sin_port}; }
  bool is(const sockaddr_in& a) const {
    return a.sin_addr.s_addr == ip && a.sin_port == port && a.sin_family == AF_INET;
  }
};

class SlotEngine final {
 public:
  // RESULT datagrams one contribution can add to the batch: an owned result and the
  // acknowledgement for the other ranks, or one per child whose results go straight down
  // (SPEC.md §7) and one for the other members. (A CONTRIB going up counts as one.)
  static constexpr size_t kMaxResultsPerContrib = 1 + Job::kMaxDirectChildren;

  // `queue` of `n_queues`: this engine serves slots s with s % n_queues == queue.
  // `max_payload_bytes`: the daemon-wide payload limit used by the stateless parser.
  SlotEngine(JobTable& jobs, unsigned queue, unsigned n_queues, uint32_t max_payload_bytes,
             QueueCounters& counters);

  // Counts, parses and handles one datagram received from `src`; results to send are appended
  // to `out`. Returns kOk when the datagram was used, else the reason it was dropped (already
  // counted).
  proto::DropReason on_datagram(std::span<const uint8_t> datagram, Source src, ResultBatch& out);

  // Handles one datagram from `src` that passed proto::parse_data. Does not count anything but
  // the job's and the queue's result counters; the caller counts the drop reason it returns.
  proto::DropReason on_contrib(const proto::DataHeader& h, const uint8_t* payload, Source src,
                               ResultBatch& out);

  unsigned queue() const { return queue_; }
  QueueCounters& counters() { return counters_; }
  // Data MAC keys made on this queue (tests: each job is keyed once while a few interleave).
  uint64_t mac_rekeys() const { return mac_.rekeys + up_mac_.rekeys + direct_mac_.rekeys; }

 private:
  // on_contrib once the job, token, MAC and source are right (counted as the job's traffic).
  proto::DropReason on_job_contrib(Job& job, const proto::DataHeader& h, const uint8_t* payload,
                                   ResultBatch& out);
  // Before bank b is written again: the batch's entries that still read a payload lent from
  // it get their own copy (ResultBatch::take_back).
  void take_back(const Bank& b, ResultBatch& out);
  proto::DropReason start_bank(Job& job, Bank& b, const proto::DataHeader& h,
                               const uint8_t* payload, ResultBatch& out);
  void add(Job& job, Bank& b, const proto::DataHeader& h, const uint8_t* payload, ResultBatch& out);
  void complete(Job& job, Bank& b, const proto::DataHeader& h, ResultBatch& out);
  // Sends bank b's result to the members (an owned one to its owner, ACKs to the rest).
  void emit_result(Job& job, const Bank& b, const proto::DataHeader& h, ResultBatch& out);
  // A shared result of a job with children whose results go straight down (SPEC.md §7): one
  // datagram per such child, to its members' group with its job id and token, and one for
  // the other members.
  void emit_direct(Job& job, const Bank& b, const proto::DataHeader& h, ResultBatch& out);

  // Reduction tree, leaf side (aggregator/tree/leaf_path.cc, SPEC.md §7).
  // A RESULT from the parent aggregator for one of this leaf's forwarded banks.
  proto::DropReason on_parent_result(const proto::DataHeader& h, const uint8_t* payload, Source src,
                                     ResultBatch& out);
  // Appends bank b's partial result as a CONTRIB to the parent (`flags`: RETRANSMIT or 0).
  void forward_up(Job& job, const Bank& b, const proto::DataHeader& h, uint16_t flags,
                  ResultBatch& out);
  // Appends bank b's RESULT (or, with kFlagAck in `flags`, its payload-less acknowledgement)
  // for `rank` (kAllRanks: every rank but `except`).
  void emit(Job& job, const Bank& b, const proto::DataHeader& h, int32_t rank, uint16_t flags,
            ResultBatch& out, int32_t except = -1);
  // Data MAC contexts and the jobs they are keyed for (a job id, or for a child's key
  // job id << 32 | rank + 1; 0: none). Keying costs an AES key schedule and the GHASH key, so
  // the last kEntries keys stay: datagrams of a few jobs interleaved on one queue, or a parent
  // signing for several children, do not re-key per datagram. Replaced round-robin.
  struct KeyedMac {
    static constexpr size_t kEntries = 4;
    std::array<proto::DataMac, kEntries> macs;
    std::array<uint64_t, kEntries> jobs{};
    size_t next = 0;
    uint64_t rekeys = 0;  // set_key calls (tests)
    proto::DataMac& keyed(uint64_t job_id, const proto::DataKey& key);
  };
  // A contribution to a job with a data key: signed by its contributor with that key.
  bool mac_ok(const Job& job, const proto::DataHeader& h, const uint8_t* payload);
  // A RESULT from a leaf's parent whose JoinAck said DATA_MAC: signed by a parent thread.
  bool parent_mac_ok(const Job& job, const proto::DataHeader& h, const uint8_t* payload);
  // Appends a datagram with header `d` (type, flags, job, token, contributor as given; slot,
  // generation and shape from bank b) and b's result as payload (none for an ACK).
  void append(Job& job, const Bank& b, proto::DataHeader d, uint32_t slot, int32_t rank,
              int32_t except, ResultBatch& out, bool direct = false);

  JobTable& jobs_;
  unsigned queue_;
  unsigned n_queues_;
  uint32_t max_payload_bytes_;
  QueueCounters& counters_;
  std::vector<const void*> srcs_;  // deterministic mode: contributions in rank order
  KeyedMac mac_;                   // the job's own key: its members' contributions and its results
  KeyedMac up_mac_;      // a leaf's key at its parent: partials up, the parent's results down
  KeyedMac direct_mac_;  // a child's key: its results sent straight to its members (SPEC.md §7)
};

}  // namespace conflux::agg
