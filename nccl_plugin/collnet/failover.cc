// SPDX-License-Identifier: Apache-2.0
#include "collnet/failover.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "collnet/ring_exchange.h"
#include "net/comm.h"
#include "net/log.h"

namespace conflux::collnet {
namespace {

constexpr int kNoticeTag = 0x3ffffff2;

// A handed-over result end: header, then the bytes.
struct TailHeader {
  uint32_t seq = 0;
  uint32_t kept = 0;  // 0: the holder no longer has it
  uint64_t total = 0;
  uint64_t offset = 0;
  uint32_t input = 0;  // 1: a ReduceScatter, whose input ends are reduced again (no bytes)
  uint32_t pad = 0;
};

}  // namespace

Failover::Failover(int rank, int nranks, std::unique_ptr<net::SendComm> next,
                   std::unique_ptr<net::RecvComm> prev, const RingSettings& settings,
                   size_t tail_window, const std::atomic<bool>& closing)
    : rank_(rank),
      nranks_(nranks),
      next_(std::move(next)),
      prev_(std::move(prev)),
      settings_(settings),
      closing_(closing),
      scratch_(settings.scratch_bytes()),
      tails_(tail_window) {}

Status Failover::fail(Status error) {
  broken_ = true;
  return error;
}

void Failover::arm_notice() {
  notice_req_ = nullptr;
  notice_done_ = false;
  notice_closed_ = false;
  if (nranks_ < 2) return;
  void* dst = &notice_buf_;
  size_t size = sizeof notice_buf_;
  const int tag = kNoticeTag;
  if (prev_->irecv(1, &dst, &size, &tag, &notice_req_) != net::Status::kOk) {
    notice_req_ = nullptr;
    notice_done_ = true;  // the failover ring is unusable: failing over will say so
  }
}

bool Failover::notice_arrived() {
  if (notice_done_ || notice_req_ == nullptr) return notice_done_;
  bool done = false;
  size_t size = 0;
  if (net::test(notice_req_, &done, &size) != net::Status::kOk) {
    notice_req_ = nullptr;  // a failed request is released by test()
    notice_done_ = true;
    notice_closed_ = true;
    CFX_INFO(net::kLogColl,
             "CollNet rank %d: the failover ring's previous rank closed its connection (it "
             "finished and closed its communicator, or died)",
             rank_);
  } else if (done) {
    notice_req_ = nullptr;
    notice_done_ = true;
  }
  return notice_done_;
}

Status Failover::agree(const FailoverVote& mine, FailoverAgreement* out) {
  std::vector<FailoverVote> all(static_cast<size_t>(nranks_));
  if (nranks_ > 1) {
    // Tell the next rank, then wait for the previous rank's notice: every rank sends and
    // takes exactly one, so the failover ring's messages line up on every link.
    const auto deadline = std::chrono::steady_clock::now() + settings_.timeout;
    net::Request* sreq = nullptr;
    static const uint64_t kNotice = 1;
    if (next_->isend(&kNotice, sizeof kNotice, kNoticeTag, &sreq) != net::Status::kOk ||
        sreq == nullptr) {
      return fail(unavailable("failover notice could not be sent"));
    }
    for (bool sent = false; !sent || !notice_arrived();) {
      if (!sent) {
        size_t size = 0;
        const net::Status st = net::test(sreq, &sent, &size);
        if (st != net::Status::kOk) return fail(ring_failure("failover notice", st));
      }
      if (closing_.load(std::memory_order_acquire)) return fail(comm_closed());
      if (std::chrono::steady_clock::now() > deadline) {
        return fail(timed_out("no failover notice from the previous rank"));
      }
      sched_yield();
    }
    arm_notice();  // for the failover of a re-joined engine
    const net::Status st = ring_allgather(next_.get(), prev_.get(), rank_, nranks_, &mine,
                                          all.data(), sizeof(FailoverVote), settings_.timeout);
    if (st != net::Status::kOk) {
      return fail(ring_failure("failover agreement over the worker ring", st));
    }
  } else {
    all[0] = mine;
  }
  // Sequence numbers only grow within a communicator's life (2^32 requests).
  FailoverAgreement a;
  a.lo = a.hi = all[0].first_incomplete;
  for (int i = 0; i < nranks_; ++i) {
    const FailoverVote& v = all[static_cast<size_t>(i)];
    a.given = std::max(a.given, v.next_seq);
    a.dead |= v.dead_mask;
    a.back |= v.back;
    a.lo = std::min(a.lo, v.first_incomplete);
    if (v.first_incomplete > a.hi) {
      a.hi = v.first_incomplete;
      a.holder = i;
    }
  }
  agreed_ = true;
  handover_end_ = a.hi;
  *out = a;
  return Status();
}

Status Failover::hand_over(const FailoverAgreement& a,
                           const std::function<CollRequest*(uint32_t)>& queued) {
  const size_t max_msg = sizeof(TailHeader) + tails_.window_bytes();
  for (uint32_t q = a.lo; q < a.hi; ++q) {
    std::vector<uint8_t> msg;
    if (rank_ == a.holder) {
      TailHeader h;
      h.seq = q;
      const ResultTails::Tail* t = tails_.find(q);
      if (t != nullptr) {
        h.kept = 1;
        h.total = t->total;
        h.offset = t->offset;
        h.input = t->input ? 1 : 0;
      }
      msg.resize(sizeof h);
      std::memcpy(msg.data(), &h, sizeof h);
      if (t != nullptr && !t->input) msg.insert(msg.end(), t->bytes().begin(), t->bytes().end());
    }
    const net::Status st = ring_broadcast(next_.get(), prev_.get(), rank_, nranks_, a.holder, &msg,
                                          max_msg, settings_.timeout);
    if (st != net::Status::kOk) {
      return fail(ring_failure("failover hand-over over the worker ring", st));
    }
    TailHeader h;
    if (msg.size() < sizeof h) return fail(unavailable("failover hand-over: malformed message"));
    std::memcpy(&h, msg.data(), sizeof h);
    if (h.seq == q && h.kept != 0 && h.input != 0) {
      CFX_TRY(reduce_input_tails(q, h.total, h.offset, queued));
      continue;
    }
    CollRequest* r = queued(q);
    if (r == nullptr || r->agg_count == 0 || rank_ == a.holder) continue;  // done here, or none
    const size_t total = r->agg_count * dtype_size(r->dtype);
    const size_t n = msg.size() - sizeof h;
    if (h.seq != q || h.kept == 0 || h.total != total || h.offset + n != total) {
      r->resolved = 2;
      r->resolve_error = unavailable("rank " + std::to_string(a.holder) +
                                     " no longer holds the results of request #" +
                                     std::to_string(q) + " that this rank lacks");
      continue;
    }
    std::memcpy(r->recv + h.offset, msg.data() + sizeof h, n);
    r->resolved = 1;
  }
  return Status();
}

Status Failover::reduce_input_tails(uint32_t q, size_t total, size_t offset,
                                    const std::function<CollRequest*(uint32_t)>& queued) {
  CollRequest* r = queued(q);
  // This rank's input end and where its reduction goes: the request itself while it is
  // queued here, else the kept input end (the result is then not needed here).
  CollRequest tmp;
  tmp.kind = CollKind::kReduceScatter;
  const uint8_t* src = nullptr;
  const std::vector<std::pair<size_t, size_t>>* owned = nullptr;
  std::vector<uint8_t> sink;
  const ResultTails::Tail* t = r == nullptr ? tails_.find(q) : nullptr;
  if (r != nullptr && r->kind == CollKind::kReduceScatter &&
      r->agg_count * dtype_size(r->dtype) == total && offset <= total) {
    tmp.dtype = r->dtype;
    tmp.op = r->op;
    owned = &r->owned;
    src = r->send + offset;
    tmp.recv = r->recv + offset;
  } else if (t != nullptr && t->input && t->total == total && t->offset == offset) {
    tmp.dtype = t->dtype;
    tmp.op = t->op;
    owned = &t->owned;
    src = t->bytes().data();
    sink.resize(total - offset);
    tmp.recv = sink.data();
  }
  std::vector<uint32_t> all;
  CFX_TRY(all_say(src != nullptr ? 1 : 0, &all, settings_.timeout, "failover hand-over"));
  for (int i = 0; i < nranks_; ++i) {
    if (all[static_cast<size_t>(i)] != 0) continue;
    if (r != nullptr) {
      r->resolved = 2;
      r->resolve_error =
          unavailable("rank " + std::to_string(i) + " no longer holds its input of " +
                      "ReduceScatter #" + std::to_string(q) + ", whose shard this rank lacks");
    }
    return Status();
  }
  // Every rank has its input end [offset, total): reduce-scatter it by owner.
  const size_t esize = dtype_size(tmp.dtype);
  const size_t e0 = offset / esize;
  tmp.count = (total - offset) / esize;
  tmp.owned = clip_ranges(*owned, e0, e0 + tmp.count);
  const Status st = run_ring_to_end(tmp, links(), src, 0, tmp.count, ring_tag(q, 1),
                                    scratch_.data(), settings_, closing_, "failover ring");
  if (!st.ok()) {
    return fail(st.prefixed("failover reduce-scatter of ReduceScatter #" + std::to_string(q) +
                            "'s input ends: "));
  }
  if (r != nullptr) {
    r->resolved = 1;
    CFX_WARN(net::kLogColl,
             "CollNet failover: rank %d took its shard of ReduceScatter #%u from the ranks' input "
             "ends, reduced over the ring",
             rank_, q);
  }
  return Status();
}

Status Failover::redo(CollRequest& r) {
  return run_ring_to_end(r, links(), r.agg_input(), 0, r.agg_count, ring_tag(r.seq, 1),
                         scratch_.data(), settings_, closing_, "failover ring");
}

Status Failover::all_say(uint32_t mine, std::vector<uint32_t>* all,
                         std::chrono::milliseconds timeout, const char* what) {
  all->assign(static_cast<size_t>(nranks_), mine);
  if (nranks_ < 2) return Status();
  const net::Status st = ring_allgather(next_.get(), prev_.get(), rank_, nranks_, &mine,
                                        all->data(), sizeof mine, timeout);
  if (st != net::Status::kOk) {
    return fail(ring_failure(std::string(what) + " over the worker ring", st));
  }
  return Status();
}

}  // namespace conflux::collnet
