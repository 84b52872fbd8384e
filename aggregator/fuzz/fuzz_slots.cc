// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: the aggregator slot state machine (SPEC.md §4) with a live job, driven
// through sequences of legitimate and hostile datagrams. The input is a program; any bytes
// are a valid one:
//
//   byte 0   the job: 1 + b % 4 ranks, 1 + (b >> 2) % 4 slots, bit 4 deterministic mode,
//            bit 5 owned results (slot s, generation g belongs to rank (s + g) % ranks),
//            bit 6 a batch that lends payloads (the kernel-UDP dataplane's): results pile up
//            in it, as they do until a receive batch is transmitted, while the ranks already
//            go on to the next generations; they are checked when the batch is sent
//   then     one operation per 2 bytes [op, arg]; op % 8 selects
//     0, 1   rank arg % n contributes its current generation of slot (arg >> 2) % slots
//     2      the same, as a resend (kFlagRetransmit)
//     3      a network duplicate: rank arg % n repeats an older generation (1–3 back)
//     4      a forger with the job's id and token, from a foreign source: contributor,
//            slot, generation and flags from the following bytes, garbage payload
//     5      raw bytes (the next arg bytes) from a foreign source
//     6      a spoofed rank source with a wrong token
//     7      arg bit 0: toggle loss of every result to rank arg >> 1; bit 1: end the job and
//            start another (the old job's packets keep coming and must be unknown); bit 2:
//            send the batch now (with bit 6)
//
// Legitimate ranks follow the protocol: a rank contributes generation g of a slot once it
// holds the result (or acknowledgement) of g - 1, values being a function of (rank, slot,
// generation). Invariants, each an abort when broken:
//   - every RESULT with a payload is the exact sum of the legitimate contributions of its
//     slot and generation, whatever the hostile traffic and the order of arrival, and still
//     is when its batch is sent (a payload lent from a bank that was written again since
//     would not be);
//   - a datagram from a source no rank registered is never taken (never DropReason::kOk);
//   - liveness: at the end, with loss off, every rank resending its current contribution
//     completes every slot within a few rounds (hostile packets cannot wedge a slot).
// Spoofing a rank's own source with the right token is not modelled: that is what a MAC is for
// (SPEC.md §4, threat model).
#include <arpa/inet.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "aggregator/engine/job_table.h"
#include "aggregator/engine/result_batch.h"
#include "aggregator/engine/slot_engine.h"
#include "aggregator/fuzz/fuzz_program.h"
#include "conflux/protocol/data.h"

namespace {

using conflux::DType;
using conflux::Op;
using conflux::agg::Job;
using conflux::agg::JobParams;
using conflux::agg::JobTable;
using conflux::agg::QueueCounters;
using conflux::agg::ResultBatch;
using conflux::agg::SlotEngine;
using conflux::agg::Source;
namespace proto = conflux::proto;

constexpr uint32_t kMaxCount = 8;  // elements per contribution
constexpr uint32_t kPayloadBytes = kMaxCount * sizeof(int32_t);

#define CHECK CONFLUX_FUZZ_CHECK

using Reader = conflux::fuzz::Program;

class Harness {
 public:
  explicit Harness(uint8_t shape)
      : n_(1 + shape % 4u),
        slots_(1 + (shape >> 2) % 4u),
        deterministic_((shape & 0x10) != 0),
        owned_((shape & 0x20) != 0),
        lend_((shape & 0x40) != 0) {
    if (lend_) out_.lend_payloads();
    start_job();
  }

  uint32_t ranks() const { return n_; }
  uint32_t slots() const { return slots_; }

  void contribute(uint32_t rank, uint32_t slot, bool resend) {
    send_legit(rank, slot, gen_[rank][slot], resend);
  }
  void duplicate(uint32_t rank, uint32_t slot, uint32_t back) {
    const uint32_t g = gen_[rank][slot];
    if (g >= back) send_legit(rank, slot, g - back, true);
  }

  void forge(Reader& in) {
    proto::DataHeader h = header(in.byte() % (n_ + 2), in.byte() % (slots_ + 1), 0);
    h.generation = gen_[0][h.slot % slots_] + (in.byte() % 4) - 1;
    h.flags = in.byte() & proto::kFlagKnownFlags;
    h.owner = static_cast<uint16_t>(in.byte() % (n_ + 1));
    std::vector<int32_t> garbage(h.count, -1000003);
    CHECK(feed(h, garbage, foreign(in.byte())) != proto::DropReason::kOk);
  }
  void raw(std::span<const uint8_t> bytes, uint8_t who) {
    CHECK(engine_.on_datagram(bytes, foreign(who), out_) != proto::DropReason::kOk);
    deliver();
  }
  void spoof(uint32_t rank, uint32_t slot) {
    proto::DataHeader h = header(rank, slot, gen_[rank][slot]);
    h.job_token ^= 1;
    std::vector<int32_t> garbage(h.count, 777);
    CHECK(feed(h, garbage, Source::of(worker(rank))) == proto::DropReason::kBadToken);
  }
  void toggle_loss(uint32_t rank) { lost_[rank] = !lost_[rank]; }

  // Ends the job; the next gets a new id and token, and the old one's packets are unknown.
  void restart() {
    const proto::DataHeader old = header(0, 0, gen_[0][0]);
    send_batch();  // as a dataplane does before quiescent(): the batch reads the job's banks
    jobs_.retire(job_id_);
    jobs_.quiescent(0);
    jobs_.reclaim();
    start_job();
    std::vector<int32_t> v(old.count, 1);
    CHECK(feed(old, v, Source::of(worker(0))) == proto::DropReason::kUnknownJob);
  }

  // Every slot completes once more with loss off: at most 3 rounds of everyone resending.
  void check_liveness() {
    std::fill(lost_.begin(), lost_.end(), false);
    for (uint32_t s = 0; s < slots_; ++s) {
      uint32_t target = 0;
      for (uint32_t r = 0; r < n_; ++r) target = std::max(target, gen_[r][s] + 1);
      for (int round = 0; round < 3; ++round) {
        for (uint32_t r = 0; r < n_; ++r) {
          if (gen_[r][s] < target) contribute(r, s, true);
        }
      }
      for (uint32_t r = 0; r < n_; ++r) CHECK(gen_[r][s] == target);
    }
    send_batch();
  }

  // Checks every result still in the batch as it goes out, and empties it.
  void send_batch() {
    for (size_t i = 0; i < out_.size(); ++i) check(out_[i]);
    out_.clear();
    delivered_ = 0;
  }

 private:
  static sockaddr_in worker(uint32_t r) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x0a000001);
    a.sin_port = htons(static_cast<uint16_t>(5000 + r));
    return a;
  }
  // No rank registered it: another host, or another port of the ranks' host.
  static Source foreign(uint8_t who) {
    Source s = Source::of(worker(0));
    if (who & 1) {
      s.ip = htonl(0x0a000002 + (who >> 1));
    } else {
      s.port = htons(static_cast<uint16_t>(6000 + who));
    }
    return s;
  }

  void start_job() {
    job_id_ = jobs_.allocate_id();
    CHECK(job_id_ != 0);
    token_ = 0x5eed0000ULL + ++jobs_started_;
    JobParams p;
    p.id = job_id_;
    p.token = token_;
    p.n_workers = n_;
    p.slots = slots_;
    p.payload_bytes = kPayloadBytes;
    p.deterministic = deterministic_;
    for (uint32_t r = 0; r < n_; ++r) p.workers.push_back(worker(r));
    jobs_.publish(std::make_unique<Job>(std::move(p), 1));
    gen_.assign(n_, std::vector<uint32_t>(slots_, 0));
    lost_.assign(n_, false);
  }

  // The shape every rank agrees on for (slot, generation).
  proto::DataHeader header(uint32_t rank, uint32_t slot, uint32_t gen) const {
    proto::DataHeader h;
    h.job_id = job_id_;
    h.job_token = token_;
    h.contributor = static_cast<uint16_t>(rank);
    h.slot = slot;
    h.generation = gen;
    h.offset = uint64_t{gen} * 64;
    h.count = 1 + (slot + gen) % kMaxCount;
    h.dtype = DType::kInt32;
    h.op = Op::kSum;
    if (owned_) {
      h.flags = proto::kFlagOwned;
      h.owner = static_cast<uint16_t>((slot + gen) % n_);
    }
    return h;
  }
  static int32_t value(uint32_t rank, uint32_t slot, uint32_t gen, uint32_t i) {
    return static_cast<int32_t>((rank + 1) * 1000 + slot * 100 + (gen % 97) * 10 + i);
  }

  void send_legit(uint32_t rank, uint32_t slot, uint32_t gen, bool resend) {
    proto::DataHeader h = header(rank, slot, gen);
    if (resend) h.flags |= proto::kFlagRetransmit;
    std::vector<int32_t> v(h.count);
    for (uint32_t i = 0; i < h.count; ++i) v[i] = value(rank, slot, gen, i);
    (void)feed(h, v, Source::of(worker(rank)));
  }

  proto::DropReason feed(const proto::DataHeader& h, const std::vector<int32_t>& payload,
                         Source from) {
    std::vector<uint8_t> d(proto::kDataHeaderSize + payload.size() * sizeof(int32_t));
    proto::encode_data_header(h, d.data());
    std::memcpy(d.data() + proto::kDataHeaderSize, payload.data(), payload.size() * 4);
    const proto::DropReason r = engine_.on_datagram(d, from, out_);
    deliver();
    return r;
  }

  // Entry e as it goes on the wire, checked: a RESULT of this job whose payload is the sum.
  proto::DataHeader check(const ResultBatch::Entry& e) const {
    std::vector<uint8_t> w;
    e.for_each_part([&](const uint8_t* p, size_t n) { w.insert(w.end(), p, p + n); });
    proto::DataHeader h;
    const uint8_t* payload = nullptr;
    CHECK(proto::parse_data(w, kPayloadBytes, &h, &payload) == proto::DropReason::kOk);
    CHECK(h.type == proto::PacketType::kResult && h.job_id == job_id_ && h.slot < slots_);
    const proto::DataHeader want = header(0, h.slot, h.generation);
    CHECK(h.count == want.count && h.offset == want.offset);
    if (!h.ack()) {
      for (uint32_t i2 = 0; i2 < h.count; ++i2) {
        int32_t sum = 0;
        for (uint32_t r = 0; r < n_; ++r) sum += value(r, h.slot, h.generation, i2);
        int32_t got = 0;
        std::memcpy(&got, payload + i2 * sizeof(int32_t), sizeof got);
        CHECK(got == sum);
      }
    }
    return h;
  }

  // Hands the results the engine produced to the ranks they go to (checked). Without lending
  // the batch is sent at once; with it, when it runs short of room, as a dataplane sends it.
  void deliver() {
    for (size_t i = delivered_; i < out_.size(); ++i) {
      const ResultBatch::Entry& e = out_[i];
      const proto::DataHeader h = check(e);
      const proto::DataHeader want = header(0, h.slot, h.generation);
      for (uint32_t r = 0; r < n_; ++r) {
        const bool to_r =
            e.rank == ResultBatch::kAllRanks ? int32_t(r) != e.except : e.rank == int32_t(r);
        // The owner of an owned result must get the payload, everyone else an acknowledgement.
        if (to_r && owned_) CHECK(h.ack() == (want.owner != r));
        if (to_r && !lost_[r] && gen_[r][h.slot] == h.generation) ++gen_[r][h.slot];
      }
    }
    delivered_ = out_.size();
    if (!lend_ || out_.room() < 2 * SlotEngine::kMaxResultsPerContrib) send_batch();
  }

  uint32_t n_, slots_;
  bool deterministic_, owned_, lend_;
  size_t delivered_ = 0;  // entries of out_ already handed to the ranks
  JobTable jobs_{2, 1};
  QueueCounters counters_;
  SlotEngine engine_{jobs_, 0, 1, 65536, counters_};
  ResultBatch out_{16 * SlotEngine::kMaxResultsPerContrib, proto::kDataHeaderSize + kPayloadBytes};
  uint32_t job_id_ = 0;
  uint64_t token_ = 0;
  uint32_t jobs_started_ = 0;
  std::vector<std::vector<uint32_t>> gen_;  // [rank][slot]: the generation it works on
  std::vector<bool> lost_;                  // results to this rank are lost
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  Reader in(data, size);
  Harness h(in.byte());
  while (in.more()) {
    const uint8_t op = in.byte();
    const uint8_t arg = in.byte();
    const uint32_t rank = arg % 4, slot = (arg >> 2) % 4;
    switch (op % 8) {
      case 0:
      case 1:
      case 2:
        h.contribute(rank % h.ranks(), slot % h.slots(), op % 8 == 2);
        break;
      case 3:
        h.duplicate(rank % h.ranks(), slot % h.slots(), 1 + (arg >> 4) % 3);
        break;
      case 4:
        h.forge(in);
        break;
      case 5:
        h.raw(in.bytes(arg), static_cast<uint8_t>(op >> 3));
        break;
      case 6:
        h.spoof(rank % h.ranks(), slot % h.slots());
        break;
      default:
        if (arg & 1) h.toggle_loss((arg >> 1) % h.ranks());
        if (arg & 2) h.restart();
        if (arg & 4) h.send_batch();
        break;
    }
  }
  h.check_liveness();
  return 0;
}
