// SPDX-License-Identifier: Apache-2.0
#include "collnet/coll_comm.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "collnet/split.h"
#include "collnet/test_hooks.h"
#include "conflux/common/thread_name.h"
#include "net/log.h"

namespace conflux::collnet {
namespace {

// A request that test() completes (inline completion, coll_comm.h) becomes the completion
// thread's when it is still the oldest this long after iallreduce: NCCL's proxy thread is not
// polling it, or a failover holds it back.
constexpr std::chrono::milliseconds kInlineGrace{20};

// Enough of the result stream to cover what any rank can miss (result_tails.h), twice over:
// the packets of the stream that hold an aggregator's window, the most over the aggregators
// (A x W with equal weights; a lighter aggregator's window reaches further back).
size_t tail_window(const client::Engine* e) {
  if (e == nullptr) return 0;
  size_t slots = 0, reach = 0;
  const uint32_t period = e->stripe_period();
  for (const auto& a : e->aggregators()) {
    slots += a.granted_slots;
    reach = std::max<size_t>(reach, (a.granted_slots + a.weight - 1) / a.weight * size_t{period});
  }
  return 2 * std::max(slots, reach) * e->payload_bytes();
}

}  // namespace

CollComm::CollComm(int rank, int nranks, CollRings rings, std::unique_ptr<client::Engine> engine,
                   const CollOptions& opts)
    : rank_(rank),
      nranks_(nranks),
      opts_(opts),
      staging_(std::make_unique<Staging>(*this, opts.staging)),
      failover_(std::make_unique<Failover>(rank, nranks, std::move(rings.failover_next),
                                           std::move(rings.failover_prev), opts.ring,
                                           tail_window(engine.get()), stopping_)),
      aggs_(rank, std::move(engine), failover_->tails(), opts.rejoin, opts.probe,
            opts.probe_on_every_rank),
      // Without aggregators there is no split to measure.
      split_(rank, nranks, opts.ring_fraction,
             aggs_.live() ? opts.controller : std::optional<SplitController>(), &aggs_,
             std::move(rings.split_next), std::move(rings.split_prev)) {
  RingLanes lanes{std::move(rings.next), std::move(rings.prev)};
  ring_ =
      std::make_unique<RingWorker>(rank_, nranks_, std::move(lanes), opts_.ring, split_, stopping_);
  thread_ = std::thread([this] {
    name_this_thread("cfx-collnet");
    run_completion();
  });
}

CollComm::~CollComm() {
  stopping_.store(true, std::memory_order_release);
  bool pending;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    pending = !queue_.empty();
  }
  cv_.notify_all();
  // The engine may hold user buffers of unfinished requests; stop it touching them first.
  // (NCCL closes a communicator only once its requests are done; the queue is then empty.)
  // (The completion thread may still swap the engine: abort() takes the path's mutex.)
  if (pending) aggs_.abort("CollNet communicator closed with requests pending");
  ring_->stop();
  if (thread_.joinable()) thread_.join();
  aggs_.log_totals();
  log_small_times();
  for (CollRequest* r : queue_) delete r;
  ring_.reset();
  magic_ = 0;
  // Then the split ring closes and aggs_ releases the engine, before failover_ goes (member
  // order).
}

void CollComm::log_small_times() const {
  const SmallAllReduceTimes& t = small_times_;
  const uint64_t n = t.count.load(std::memory_order_relaxed);
  if (n == 0) return;
  const uint64_t gaps = t.gaps.load(std::memory_order_relaxed);
  const double gap_us =
      gaps == 0 ? 0.0 : static_cast<double>(t.gap_ns.load(std::memory_order_relaxed)) / gaps / 1e3;
  // NET, not COLL: NCCL logs every collective under COLL, which costs tens of microseconds each.
  CFX_INFO(net::kLogNet,
           "CollNet rank %d: %llu AllReduces of at most %zu bytes took on average %.1f us from "
           "iallreduce to the result, then %.1f us until NCCL's test() saw it; %.1f us between "
           "consecutive iallreduce calls; %llu of them completed inside NCCL's test()",
           rank_, static_cast<unsigned long long>(n), SmallAllReduceTimes::kMaxBytes,
           static_cast<double>(t.to_result_ns.load(std::memory_order_relaxed)) / n / 1e3,
           static_cast<double>(t.to_test_ns.load(std::memory_order_relaxed)) / n / 1e3, gap_us,
           static_cast<unsigned long long>(t.inline_done.load(std::memory_order_relaxed)));
}

bool CollComm::submit(CollRequest* r, bool agg_capable) {
  // The split depends only on values every rank shares (count, dtype, op, the fraction and
  // the aggregators' capabilities agreed at connect, or the measured split agreed for this
  // sequence number), so it is identical on every rank.
  const bool agg_ok = agg_capable && aggs_.reduces(r->dtype, r->op);
  const uint32_t seq = next_seq_.load(std::memory_order_relaxed);
  double fraction = opts_.ring_fraction;
  size_t measured_min = 0;
  if (!split_.fraction_for(*r, seq, agg_ok, &fraction, &measured_min)) return false;
  r->seq = seq;
  next_seq_.store(seq + 1, std::memory_order_relaxed);
  if (r->kind == CollKind::kAllReduce && r->bytes <= SmallAllReduceTimes::kMaxBytes) {
    r->timed = &small_times_;
    r->posted = SmallAllReduceTimes::Clock::now();
    small_times_.posted(r->posted);
  }
  r->agg_count = agg_ok ? aggregator_elements(r->count, dtype_size(r->dtype), fraction,
                                              std::max(opts_.ring_min_bytes, measured_min))
                        : 0;
  // After a failover the completion thread feeds the engine, if any (AggregatorPath::feed).
  const bool handed = r->agg_count > 0 && aggs_.submit(*r);
  // A test hook may abort the engine from the completion thread at a given request
  // (aggregator_share()).
  r->inline_ok = opts_.inline_completion && handed && r->kind == CollKind::kAllReduce &&
                 r->agg_count == r->count && !r->split_exchange &&
                 r->bytes <= SmallAllReduceTimes::kMaxBytes && hooks::allowsInline(opts_);
  r->comm = this;
  // test() completes an inline request: the completion thread stays asleep (its idle poll
  // watches queued_), and takes it only if it is still queued when the thread next wakes.
  const bool to_thread = !r->inline_ok;
  ring_->enqueue(r);  // first: a request without ring work is then already done there
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(r);
    if (to_thread) queued_.fetch_add(1, std::memory_order_release);
  }
  if (to_thread) cv_.notify_all();
  return true;
}

net::Status CollComm::iallreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                                 CollRequest** out) {
  auto* r = new CollRequest;
  r->send = static_cast<const uint8_t*>(send);
  r->recv = static_cast<uint8_t*>(recv);
  r->count = count;
  r->dtype = dtype;
  r->op = op;
  r->bytes = count * dtype_size(dtype);
  if (!submit(r, /*agg_capable=*/true)) {
    delete r;
    r = nullptr;  // the split is not decided yet: NCCL posts it again
  }
  *out = r;
  return net::Status::kOk;
}

net::Status CollComm::ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                                     const CollWindow& w, DType dtype, Op op, CollRequest** out) {
  auto* r = new CollRequest;
  r->kind = CollKind::kReduceScatter;
  r->dtype = dtype;
  r->op = op;
  r->bytes = w.bytes;
  r->count = w.bytes / dtype_size(dtype);
  // The input is gathered once into a contiguous copy: the engine and the ring read it,
  // and a failover redoes the aggregators' share from it.
  r->staging.reserve(w.bytes);
  for (const CollPart& p : send_parts)
    r->staging.insert(r->staging.end(), p.address, p.address + p.size);
  r->work.resize(w.bytes);
  r->send = r->staging.data();
  r->recv = r->work.data();
  r->owned = owned_ranges(w, nranks_, dtype_size(dtype));
  r->own_out = static_cast<uint8_t*>(recv);
  if (!submit(r, /*agg_capable=*/true)) {
    delete r;
    r = nullptr;  // as iallreduce
  }
  *out = r;
  return net::Status::kOk;
}

net::Status CollComm::iallgather(const void* send, const std::vector<CollPart>& recv_parts,
                                 const CollWindow& w, CollRequest** out) {
  auto* r = new CollRequest;
  r->kind = CollKind::kAllGather;
  r->dtype = DType::kUint8;
  r->op = Op::kSum;  // unused: the all-gather phase only forwards
  r->bytes = w.bytes;
  r->count = w.bytes;
  r->owned = owned_ranges(w, nranks_, 1);
  if (recv_parts.size() == 1) {
    r->recv = recv_parts[0].address;
  } else {
    r->work.resize(w.bytes);
    r->recv = r->work.data();
    r->out_parts = recv_parts;
  }
  const auto [lo, hi] = r->owned[static_cast<size_t>(rank_)];
  if (hi > lo) std::memmove(r->recv + lo, send, hi - lo);
  r->send = r->recv;
  submit(r, /*agg_capable=*/false);  // never refused: it has no aggregator share
  *out = r;
  return net::Status::kOk;
}

void CollComm::deliver(CollRequest& r) const {
  if (r.kind == CollKind::kReduceScatter) {
    const size_t esize = dtype_size(r.dtype);
    const auto [lo, hi] = r.owned[static_cast<size_t>(rank_)];
    if (hi > lo) std::memcpy(r.own_out, r.recv + lo * esize, (hi - lo) * esize);
  } else if (r.kind == CollKind::kAllGather && !r.out_parts.empty()) {
    size_t off = 0;
    for (const CollPart& p : r.out_parts) {
      std::memcpy(p.address, r.recv + off, p.size);
      off += p.size;
    }
  }
}

net::Status CollComm::test(CollRequest* req, bool* done, size_t* bytes) {
  int s = req->state.load(std::memory_order_acquire);
  if (s == 0 && req->inline_ok) {
    req->comm->complete_inline(req);
    s = req->state.load(std::memory_order_acquire);
  }
  *done = s != 0;
  if (s == 0) return net::Status::kOk;
  if (bytes != nullptr) *bytes = req->bytes;
  const bool failed = s == 2;
  if (!failed && req->timed != nullptr) {
    req->timed->tested(req->posted, req->finished, SmallAllReduceTimes::Clock::now());
  }
  if (failed) {
    CFX_WARN(net::kLogColl, "CollNet AllReduce #%u (%zu elements) failed: %s", req->seq, req->count,
             req->error.c_str());
  }
  delete req;
  return failed ? net::Status::kRemoteError : net::Status::kOk;
}

void CollComm::complete_inline(CollRequest* r) {
  std::unique_lock<std::mutex> completer(complete_mu_, std::try_to_lock);
  if (!completer.owns_lock()) return;  // the completion thread is at work: it completes r
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (stop_ || queue_.empty() || queue_.front() != r) return;  // in order only
  }
  // Still carried by the first engine, through its one engine request (else kPending).
  const client::RequestState s = aggs_.poll_inline(*r);
  if (s == client::RequestState::kPending) return;
  if (s != client::RequestState::kDone) {
    // The completion thread reports the engine's error and fails over, at once.
    completer.unlock();
    {
      std::lock_guard<std::mutex> lk(mu_);
      r->inline_ok = false;
      queued_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_all();
    return;
  }
  r->agg_waited = 1;
  failover_->tails().adopt(r->seq, r->agg_count * dtype_size(r->dtype), std::move(r->result_end));
  bool wake = false;
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.pop_front();
    // A request behind this one that is the completion thread's (queued while this one was
    // pending, when its wake-up found this one first): it may start on it now.
    wake = has_work_locked();
  }
  if (wake) cv_.notify_all();
  next_unfinished_ = r->seq + 1;
  small_times_.inline_done.fetch_add(1, std::memory_order_relaxed);
  finish(*r, Status());
}

void CollComm::finish(CollRequest& r, const Status& result) {
  if (!result.ok()) r.error = result.message();
  if (r.timed != nullptr) r.finished = SmallAllReduceTimes::Clock::now();
  r.state.store(result.ok() ? 1 : 2, std::memory_order_release);
}

bool CollComm::idle_failover_due() {
  // Without a live engine a notice can only be another rank returning to the aggregators
  // ("Returning"): take part at once rather than when the next request comes.
  if (!aggs_.live() && aggs_.missing() == 0) return false;
  const bool notice = failover_->notice_arrived();
  // The previous rank closed the failover ring: ranks close their communicators one after
  // the other when a job ends, and with nothing in flight nothing is lost. A request that
  // comes after all the same finds the ring gone and fails with a warning.
  if (failover_->notice_closed()) return false;
  return notice || (aggs_.live() && !aggs_.health().ok());
}

void CollComm::fail_over_idle() {
  Status why = unavailable(aggs_.live() ? "another rank failed over"
                                        : "another rank returns to the aggregators");
  if (aggs_.live()) {
    Status health = aggs_.health();
    if (!health.ok()) why = std::move(health);
  }
  const Status st = fail_over(next_unfinished_, why);
  if (!st.ok()) CFX_WARN(net::kLogColl, "CollNet failover (idle) failed: %s", st.message().c_str());
}

Status CollComm::wait_aggregators(CollRequest& r) {
  for (;;) {
    bool done = false;
    CFX_TRY(aggs_.wait(r, &done));  // sleeps in the engine for a slice at most
    if (done) return Status();
    if (aggs_.epoch() > 0)
      feed_engine();  // requests that arrived meanwhile: keep the pipeline full
    if (failover_->notice_arrived()) return unavailable("another rank failed over");
    if (stopped()) return comm_closed();
  }
}

Status CollComm::aggregator_share(CollRequest& r) {
  for (;;) {
    if (failover_->broken()) return unavailable("the failover ring failed earlier");
    if (failover_->handed_over(r)) {
      if (r.resolved == 1) return Status();
      return r.resolved == 2 ? r.resolve_error
                             : internal_error("no aggregator result was handed over");
    }
    if (!aggs_.carries(r.seq)) break;  // redone over the failover ring
    if (aggs_.epoch() > 0) feed_engine();
    hooks::atRequest(opts_, aggs_.epoch(), r.seq, aggs_);
    Status why = unavailable("engine unavailable");
    if (!r.agg_handles.empty() && r.agg_epoch == aggs_.epoch()) {
      why = wait_aggregators(r);
      if (why.ok()) {
        const size_t total = r.agg_count * dtype_size(r.dtype);
        if (r.kind == CollKind::kReduceScatter) {
          failover_->tails().keep_input(r.seq, r.send, total, r.dtype, r.op, r.owned);
        } else {
          failover_->tails().adopt(r.seq, total, std::move(r.result_end));
        }
        return Status();
      }
      if (stopped()) return why;
    }
    CFX_TRY(fail_over(r.seq, why));
  }
  return failover_->redo(r);
}

void CollComm::feed_engine() {
  std::lock_guard<std::mutex> lk(mu_);
  for (CollRequest* p : queue_) aggs_.feed(*p);
}

Status CollComm::fail_over(uint32_t first_incomplete, const Status& cause, uint64_t back) {
  const std::vector<size_t> before = aggs_.members();
  // submit() stops handing requests to the engine, which is aborted.
  const uint64_t dead = aggs_.fail_over();
  const FailoverVote mine{first_incomplete, next_seq_.load(std::memory_order_relaxed), dead, back};
  if (back == 0 && !before.empty()) {  // else a planned failover: returning
    CFX_WARN(net::kLogColl,
             "Conflux aggregators failed (%s); the worker ring takes over their share of this "
             "and every later collective of this communicator",
             cause.message().c_str());
  }
  FailoverAgreement a;
  CFX_TRY(failover_->agree(mine, &a));
  CFX_INFO(net::kLogColl,
           "CollNet failover: rank %d's first unfinished request is #%u; over all ranks #%u..#%u",
           rank_, first_incomplete, a.lo, a.hi);
  if (a.hi > a.lo) {
    CFX_WARN(net::kLogColl,
             "CollNet failover: rank %d completed requests #%u..#%u that other ranks did not; "
             "it hands their results over the ring (for a ReduceScatter, every rank "
             "reduce-scatters its input's end over it)",
             a.holder, a.lo, a.hi - 1);
  }
  CFX_TRY(failover_->hand_over(a, [this](uint32_t seq) { return queued(seq); }));
  const uint32_t from = std::max(a.hi, a.given);
  Status st = a.back != 0 ? return_to(a, before, from) : rejoin_survivors(a.dead, from);
  aggs_.watch_missing();
  return st;
}

void CollComm::return_if_agreed(const CollRequest& r) {
  const uint64_t back = split_.returning_at(r.seq) & aggs_.missing();
  if (back == 0) return;
  CFX_INFO(net::kLogColl,
           "CollNet rank %d: aggregator(s) 0x%llx answer again; returning at request #%u", rank_,
           static_cast<unsigned long long>(back), r.seq);
  const Status st = fail_over(r.seq, unavailable("returning"), back);
  if (!st.ok()) {
    CFX_WARN(net::kLogColl, "CollNet: returning to the aggregators failed: %s",
             st.message().c_str());
  }
}

Status CollComm::return_to(const FailoverAgreement& a, const std::vector<size_t>& before,
                           uint32_t from) {
  std::vector<size_t> target;
  if (!aggs_.return_due(a.dead, a.back, &target)) return Status();
  bool joined = false;
  CFX_TRY(join_everywhere(target, from, "returned to", "aggregator(s)", &joined));
  if (joined) return Status();
  aggs_.still_dead(a.back);
  std::vector<size_t> survivors;
  for (size_t i : before) {
    if (i >= 64 || ((a.dead >> i) & 1) == 0) survivors.push_back(i);
  }
  if (survivors.empty()) return Status();  // the ring, as before
  return join_everywhere(survivors, from, "went back to", "aggregator(s) it had", &joined);
}

CollRequest* CollComm::queued(uint32_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  for (CollRequest* p : queue_) {
    if (p->seq == seq) return p;
  }
  return nullptr;
}

Status CollComm::rejoin_survivors(uint64_t dead, uint32_t from) {
  // Only when some rank named a failed aggregator of this engine and others are left; the
  // decision uses agreed values only, so every rank takes the same branch.
  std::vector<size_t> survivors;
  if (!aggs_.restripe_due(dead, &survivors)) return Status();
  bool joined = false;
  return join_everywhere(std::move(survivors), from, "re-striped over", "surviving aggregator(s)",
                         &joined);
}

Status CollComm::join_everywhere(std::vector<size_t> target, uint32_t from, const char* what,
                                 const char* noun, bool* joined) {
  *joined = false;
  std::unique_ptr<client::Engine> fresh;
  const Status why = aggs_.rejoin(target, &fresh);
  if (!why.ok()) fresh.reset();
  std::vector<uint32_t> all;
  CFX_TRY(failover_->all_say(fresh != nullptr ? 1 : 0, &all, 2 * opts_.ring.timeout,
                             "re-join agreement"));
  for (int i = 0; i < nranks_; ++i) {
    if (all[static_cast<size_t>(i)] != 0) continue;
    CFX_WARN(net::kLogColl,
             "CollNet: rank %d could not join the %zu %s%s%s; the worker ring keeps every "
             "aggregator share",
             i, target.size(), noun, i == rank_ ? ": " : "",
             i == rank_ ? why.message().c_str() : "");
    return Status();
  }
  const size_t n = target.size();
  aggs_.adopt(std::move(fresh), std::move(target), from);
  *joined = true;
  CFX_WARN(net::kLogColl, "CollNet rank %d: %s %zu %s from request #%u on", rank_, what, n, noun,
           from);
  return Status();
}

bool CollComm::has_work_locked() const {
  if (queue_.empty()) return false;
  const CollRequest* head = queue_.front();
  return !head->inline_ok || SmallAllReduceTimes::Clock::now() - head->posted >= kInlineGrace;
}

bool CollComm::poll_for_request(uint64_t seen) {
  const auto until = std::chrono::steady_clock::now() + opts_.idle_poll;
  while (queued_.load(std::memory_order_acquire) == seen) {
    if (stopped() || std::chrono::steady_clock::now() >= until) return false;
    sched_yield();  // a rank's threads may outnumber the cores: let the others run
  }
  return true;
}

void CollComm::run_completion() {
  {
    std::lock_guard<std::mutex> completer(complete_mu_);
    if (aggs_.live()) failover_->arm_notice();
  }
  for (;;) {
    {
      std::unique_lock<std::mutex> lk(mu_);
      if (!stop_ && queue_.empty() && opts_.idle_poll.count() > 0) {
        // Poll a while before sleeping: waking this thread would cost the next request a
        // scheduler round trip (tens of microseconds on a busy host).
        const uint64_t seen = queued_.load(std::memory_order_relaxed);
        lk.unlock();
        poll_for_request(seen);
        lk.lock();
      }
      // Idle, the engine may still fail (an aggregator dies between collectives): take part
      // in the failover at once, since ranks with work pending wait for this one.
      while (!stop_ && !has_work_locked()) {
        cv_.wait_for(lk, kInlineGrace);
        if (stop_ || !queue_.empty()) continue;  // the loop's condition decides
        lk.unlock();
        bool due = false;
        {
          std::lock_guard<std::mutex> completer(complete_mu_);
          due = idle_failover_due();
        }
        lk.lock();
        if (due && queue_.empty()) break;
      }
      if (stop_) return;
    }
    // From here this thread is the completer: test() leaves the requests to it.
    std::unique_lock<std::mutex> completer(complete_mu_);
    CollRequest* r = nullptr;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) return;
      if (!queue_.empty()) r = queue_.front();
    }
    if (r == nullptr && !idle_failover_due()) continue;  // test() completed what was queued
    if (r == nullptr) {
      fail_over_idle();
      continue;
    }
    if (r->agg_count > 0) return_if_agreed(*r);
    Status result = r->agg_count == 0 ? Status() : aggregator_share(*r);
    Status ring_result = ring_->wait_share(*r);
    if (result.ok()) result = std::move(ring_result);
    if (result.ok()) deliver(*r);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.pop_front();
    }
    next_unfinished_ = r->seq + 1;
    finish(*r, result);
  }
}

}  // namespace conflux::collnet
