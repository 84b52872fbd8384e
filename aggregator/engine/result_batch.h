// SPDX-License-Identifier: Apache-2.0
// RESULT datagrams produced by the SlotEngine while it handles one receive batch, handed to
// the backend to transmit (sendmmsg, DPDK tx burst, ...). Owned by one dataplane thread.
// Each entry is a complete datagram (48-byte header + payload) in the batch's arena plus its
// destination, or, in a batch that lends payloads (lend_payloads(): a backend that gathers its
// sends, kernel UDP), the header and MAC trailer in the arena and the payload left where the
// engine reduced it (a slot's bank), which the kernel then reads once for the send instead of
// twice (the copy into the arena, then the send). Destinations: every member of the job (fan-out,
// or the job's multicast group once its ranks agreed on it), every member but one (acknowledgements
// of an owned result), one rank (a re-served result, an owned result), or, on a leaf of a reduction
// tree, the parent aggregator (a partial result going up as a CONTRIB). Job pointers stay valid
// until the owning thread's next JobTable::quiescent(), so the backend must transmit and clear()
// the batch before calling it.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "aggregator/engine/job.h"
#include "conflux/protocol/data.h"

namespace conflux::agg {

// Where a ResultBatch's datagrams are written: by default an arena of the batch's own. A backend
// that transmits from buffers of its own (DPDK: an mbuf's data room) hands them out instead, so a
// result is written once, straight into what the NIC reads. `take` returns a buffer of at
// least max_datagram bytes and its handle (nullptr: none left); `give_back` returns one that
// was taken but never committed. A committed entry's handle belongs to whoever transmits it.
struct DatagramSpace {
  void* ctx = nullptr;
  uint8_t* (*take)(void* ctx, void** handle) = nullptr;
  void (*give_back)(void* ctx, void* handle) = nullptr;
};

class ResultBatch final {
 public:
  static constexpr int32_t kAllRanks = -1;
  static constexpr int32_t kParent = -2;  // the job's parent aggregator (SPEC.md §7)

  using Space = DatagramSpace;

  struct Entry {
    const uint8_t* data;
    uint32_t len;
    int32_t rank;  // kAllRanks, kParent or a single rank
    Job* job;
    int32_t except;  // with kAllRanks: this rank is skipped (-1: none)
    uint32_t slot;   // a child aggregator (or the parent) is reached on the slot's port
    bool direct;     // rank is a child aggregator whose results go to its members' group
    // With kAllRanks: children that have their own (direct) entry for this result; -1 unused.
    std::array<int32_t, Job::kMaxDirectChildren> skip;
    void* handle;  // the Space's handle of `data`; nullptr with the batch's own arena
    // A lent payload: the datagram is data[0, 48), then body[0, body_len), then
    // data[48, len - body_len) (the MAC trailer, if any). nullptr: `data` holds all of it.
    const uint8_t* body;
    uint32_t body_len;

    // Calls f(const uint8_t* bytes, size_t n) for each piece of the datagram in wire order:
    // all of `data`, or, lent, its header, the body and the trailer (if any).
    template <class F>
    void for_each_part(F&& f) const {
      if (body == nullptr) {
        f(data, size_t{len});
        return;
      }
      f(data, proto::kDataHeaderSize);
      f(body, size_t{body_len});
      const size_t tail = len - proto::kDataHeaderSize - body_len;
      if (tail > 0) f(data + proto::kDataHeaderSize, tail);
    }

    // Calls f(const sockaddr_in&) with the address of every destination of the entry. The
    // references stay valid as long as the job.
    template <class F>
    void for_each_destination(F&& f) const {
      const JobParams& p = job->params();
      if (rank == kParent) {
        f(p.uplink->ports[slot % p.uplink->ports.size()]);
      } else if (direct) {
        f(job->direct(static_cast<uint32_t>(rank))->group);  // SPEC.md §7, straight down
      } else if (rank != kAllRanks) {
        f(p.addr(static_cast<uint32_t>(rank), slot));
      } else if (except < 0 && job->multicast()) {
        f(p.group);  // one send reaches every worker (SPEC §8)
      } else {
        for (uint32_t w : p.members) {
          const auto r = static_cast<int32_t>(w);
          if (r == except || std::find(skip.begin(), skip.end(), r) != skip.end()) continue;
          f(p.addr(w, slot));
        }
      }
    }
  };

  // Room for `max_results` datagrams of up to `max_datagram` bytes each, in the batch's own
  // arena, or (with a Space) in the backend's buffers.
  ResultBatch(size_t max_results, size_t max_datagram, Space space = {})
      : max_datagram_(max_datagram),
        space_(space),
        arena_(space.take == nullptr ? std::make_unique<uint8_t[]>(max_results * max_datagram)
                                     : nullptr) {
    entries_.reserve(max_results);
    capacity_ = max_results;
  }
  ~ResultBatch() {
    if (pending_ != nullptr) space_.give_back(space_.ctx, pending_handle_);
  }
  ResultBatch(const ResultBatch&) = delete;
  ResultBatch& operator=(const ResultBatch&) = delete;

  // Space for the next datagram (max_datagram bytes), or nullptr when the batch is full (or
  // the Space has none). Until the next commit() it is the same space.
  uint8_t* reserve() {
    if (entries_.size() >= capacity_) return nullptr;
    if (space_.take == nullptr) return arena_.get() + entries_.size() * max_datagram_;
    if (pending_ == nullptr) pending_ = space_.take(space_.ctx, &pending_handle_);
    return pending_;
  }
  // Appends the datagram written at the last reserve(): `len` bytes in all, of which, with
  // `body`, the body_len bytes behind the header are lent from there (see Entry::body).
  void commit(uint32_t len, Job* job, uint32_t slot, int32_t rank, int32_t except = -1,
              bool direct = false, const uint8_t* body = nullptr, uint32_t body_len = 0) {
    entries_.push_back({reserve(), len, rank, job, except, slot, direct, kNoSkip, pending_handle_,
                        body, body_len});
    pending_ = nullptr;
    pending_handle_ = nullptr;
  }

  // Lent payloads (see the file comment); only with the batch's own arena.
  void lend_payloads() { lends_ = space_.take == nullptr; }
  bool lends() const { return lends_; }
  // Changes at every clear(): a payload lent while epoch() had this value may still be read
  // by an entry (SlotEngine notes it on the bank it lent from).
  uint64_t epoch() const { return epoch_; }
  // Copies every lent payload that lies in [from, from + n) into its entry, which then holds
  // the whole datagram: for the lender, before it writes there again.
  void take_back(const uint8_t* from, size_t n) {
    for (size_t i = 0; i < entries_.size(); ++i) {
      Entry& e = entries_[i];
      if (e.body == nullptr || e.body < from || e.body >= from + n) continue;
      uint8_t* d = arena_.get() + i * max_datagram_;  // where e.data points
      const size_t head = proto::kDataHeaderSize, tail = e.len - head - e.body_len;
      std::memmove(d + head + e.body_len, d + head, tail);
      std::memcpy(d + head, e.body, e.body_len);
      e.body = nullptr;
      e.body_len = 0;
    }
  }
  // The last entry (kAllRanks) leaves out these ranks: they have direct entries of their own.
  void skip_in_last(const std::array<int32_t, Job::kMaxDirectChildren>& ranks) {
    entries_.back().skip = ranks;
  }
  static constexpr std::array<int32_t, Job::kMaxDirectChildren> kNoSkip = [] {
    std::array<int32_t, Job::kMaxDirectChildren> a{};
    a.fill(-1);
    return a;
  }();

  size_t size() const { return entries_.size(); }
  size_t room() const { return capacity_ - entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const Entry& operator[](size_t i) const { return entries_[i]; }
  void clear() {
    entries_.clear();
    ++epoch_;
  }

 private:
  size_t max_datagram_;
  size_t capacity_ = 0;
  Space space_;
  std::unique_ptr<uint8_t[]> arena_;
  uint8_t* pending_ = nullptr;  // with a Space: taken by reserve(), not yet committed
  void* pending_handle_ = nullptr;
  bool lends_ = false;
  uint64_t epoch_ = 1;
  std::vector<Entry> entries_;
};

}  // namespace conflux::agg
