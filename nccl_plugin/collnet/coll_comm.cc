#include "collnet/coll_comm.h"

#include <sched.h>

#include <algorithm>
#include <cstring>

#include "collnet/ring_exchange.h"
#include "collnet/split.h"
#include "net/log.h"

namespace conflux::collnet {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_live_comms{0};
std::atomic<int> g_usable_comms{0};

constexpr int kNoticeTag = 0x3ffffff2;

// Longest sleep between checks of a pending aggregator share (failover notice, close).
constexpr std::chrono::microseconds kWaitSlice{1000};
// The ring loop sleeps this long once it has polled this many times without progress: the
// transport's helper threads move the bytes, so the poller only needs to be timely.
constexpr std::chrono::microseconds kRingIdleSleep{20};
constexpr int kRingIdlePolls = 16;

// The measured split: a period ends after this many bytes or requests (every rank counts
// the same requests), and its decision applies this many requests after its end.
constexpr uint64_t kSplitPeriodBytes = 16u << 20;
constexpr uint32_t kSplitPeriodRequests = 64;
constexpr uint32_t kSplitLag = 16;

int ring_tag(uint32_t seq, int phase) {
  return static_cast<int>(((seq << 1) | phase) & 0x3fffffff);
}

// Enough of the result stream to cover what any rank can miss (result_tails.h), twice over.
size_t tail_window(const client::Engine* e) {
  if (e == nullptr) return 0;
  size_t slots = 0;
  for (const auto& a : e->aggregators()) slots += a.granted_slots;
  return 2 * slots * e->payload_bytes();
}

}  // namespace

CollComm::CollComm(int rank, int nranks, CollRings rings, std::unique_ptr<client::Engine> engine,
                   const CollOptions& opts)
    : rank_(rank),
      nranks_(nranks),
      rings_(std::move(rings)),
      engine_(std::move(engine)),
      opts_(opts),
      scratch_(rings_.next.size(), std::vector<uint8_t>(opts.ring_block_bytes *
                                                        static_cast<size_t>(opts.ring_inflight))),
      failover_scratch_(opts.ring_block_bytes * static_cast<size_t>(opts.ring_inflight)),
      tails_(tail_window(engine_.get())) {
  split_now_ = opts_.ring_fraction;
  if (opts_.controller && engine_ != nullptr && nranks_ > 1 && rings_.split_next) {
    controller_ = opts_.controller;
    split_round_ = std::make_unique<AsyncRingAllgather>(
        rings_.split_next.get(), rings_.split_prev.get(), rank_, nranks_, sizeof(PathSample));
  }
  if (engine_ != nullptr) {
    aggs_in_epoch_ = static_cast<uint32_t>(engine_->aggregators().size());
    engine_live_ = true;
    for (size_t i = 0; i < engine_->aggregators().size(); ++i) aggs_.push_back(i);
    // The split of a request must not depend on the engine of the moment (it may be
    // replaced on one rank before another): what the first engine reduces decides it.
    for (int d = 0; d < kNumDTypes; ++d) {
      for (int o = 0; o < kNumOps; ++o) {
        if (engine_->supports(static_cast<DType>(d), static_cast<Op>(o))) {
          support_mask_ |= uint64_t{1} << (d * kNumOps + o);
        }
      }
    }
  }
  ring_thread_ = std::thread([this] { run_ring(); });
  thread_ = std::thread([this] { run_completion(); });
  g_live_comms.fetch_add(1, std::memory_order_relaxed);
  if (engine_ != nullptr && opts_.ring_fraction < 1.0) {
    counted_usable_ = true;
    g_usable_comms.fetch_add(1, std::memory_order_relaxed);
  }
}

int CollComm::live_count() { return g_live_comms.load(std::memory_order_relaxed); }
int CollComm::usable_count() { return g_usable_comms.load(std::memory_order_relaxed); }

CollComm::~CollComm() {
  stopping_.store(true, std::memory_order_release);
  bool pending;
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
    pending = !queue_.empty();
  }
  cv_.notify_all();
  ring_wake_.notify_all();
  // The engine may hold user buffers of unfinished requests; stop it touching them first.
  // (NCCL closes a communicator only once its requests are done; the queue is then empty.)
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (engine_ && pending) engine_->abort("CollNet communicator closed with requests pending");
  }
  if (ring_thread_.joinable()) ring_thread_.join();
  if (thread_.joinable()) thread_.join();
  if (engine_) {
    const client::EngineStats st = engine_->stats();
    CFX_INFO(net::kLogColl,
             "CollNet rank %d closing: %llu packets sent, %llu retransmitted (%llu fast, %llu "
             "needless), %llu congestion-window decreases, %llu requests done, %llu failed",
             rank_, static_cast<unsigned long long>(st.packets_sent),
             static_cast<unsigned long long>(st.retransmits),
             static_cast<unsigned long long>(st.fast_retransmits),
             static_cast<unsigned long long>(st.spurious_retransmits),
             static_cast<unsigned long long>(st.cwnd_decreases),
             static_cast<unsigned long long>(st.requests_completed),
             static_cast<unsigned long long>(st.requests_failed));
  }
  for (CollRequest* r : queue_) delete r;
  engine_.reset();
  g_live_comms.fetch_sub(1, std::memory_order_relaxed);
  if (counted_usable_.exchange(false)) g_usable_comms.fetch_sub(1, std::memory_order_relaxed);
  magic_ = 0;
}

bool CollComm::stopped() { return stopping_.load(std::memory_order_acquire); }

std::vector<std::pair<size_t, size_t>> owned_ranges(const CollWindow& w, int nranks, size_t esize) {
  std::vector<std::pair<size_t, size_t>> owned(static_cast<size_t>(nranks), {0, 0});
  const size_t win_end = w.offset + w.bytes;
  for (int k = 0; k < nranks; ++k) {
    const size_t lo = std::max(w.offset, static_cast<size_t>(k) * w.bytes_per_rank);
    const size_t hi = std::min(win_end, static_cast<size_t>(k + 1) * w.bytes_per_rank);
    if (lo < hi) owned[static_cast<size_t>(k)] = {(lo - w.offset) / esize, (hi - w.offset) / esize};
  }
  return owned;
}

bool CollComm::measured_fraction(CollRequest& r, bool agg_ok, double* fraction) {
  const uint32_t seq = next_seq_.load(std::memory_order_relaxed);
  if (agg_ok && !split_pending_.empty() && split_pending_.front() + kSplitLag <= seq) return false;
  while (!split_changes_.empty() && split_changes_.front().first <= seq) {
    split_now_ = split_changes_.front().second;
    split_changes_.pop_front();
  }
  *fraction = split_now_;
  period_bytes_ += r.bytes;
  if (period_bytes_ >= kSplitPeriodBytes || ++period_requests_ >= kSplitPeriodRequests) {
    r.split_exchange = true;
    split_pending_.push_back(seq);
    period_bytes_ = 0;
    period_requests_ = 0;
  }
  return true;
}

bool CollComm::submit(CollRequest* r, bool agg_capable) {
  // The split depends only on values every rank shares (count, dtype, op, the fraction and
  // the aggregators' capabilities agreed at connect, or the measured split agreed for this
  // sequence number), so it is identical on every rank.
  const unsigned bit = static_cast<unsigned>(r->dtype) * kNumOps + static_cast<unsigned>(r->op);
  const bool agg_ok = agg_capable && ((support_mask_ >> bit) & 1) != 0;
  double fraction = opts_.ring_fraction;
  if (controller_) {
    std::lock_guard<std::mutex> lk(split_mu_);
    if (!measured_fraction(*r, agg_ok, &fraction)) return false;
  }
  r->seq = next_seq_.load(std::memory_order_relaxed);
  next_seq_.store(r->seq + 1, std::memory_order_relaxed);
  r->agg_count =
      agg_ok ? aggregator_elements(r->count, dtype_size(r->dtype), fraction, opts_.ring_min_bytes)
             : 0;
  if (r->agg_count > 0) {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (!degraded()) {  // after a failover the completion thread feeds the engine, if any
      if (r->send == r->recv) {
        r->staging.assign(r->send, r->send + r->agg_count * dtype_size(r->dtype));
      }
      hand_to_engine(*r);
    }
  }
  // A request with nothing for the ring thread to do (no ring share, no split exchange to
  // start) has its ring share done here: waking the ring thread only to say so costs a
  // context switch per request, which is most of a small AllReduce on a busy host.
  const bool ring_work = r->agg_count < r->count || r->split_exchange;
  if (!ring_work) r->ring_state.store(1, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(r);
    if (ring_work) ring_queue_.push_back(r);
  }
  cv_.notify_all();
  if (ring_work) ring_wake_.notify_all();
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

std::vector<std::pair<size_t, size_t>> clip_ranges(
    const std::vector<std::pair<size_t, size_t>>& ranges, size_t lo, size_t hi) {
  std::vector<std::pair<size_t, size_t>> clipped(ranges.size(), {0, 0});
  for (size_t k = 0; k < ranges.size(); ++k) {
    const size_t a = std::max(ranges[k].first, lo), b = std::min(ranges[k].second, hi);
    if (a < b) clipped[k] = {a - lo, b - lo};
  }
  return clipped;
}

RingPlan CollComm::ring_plan(const CollRequest& r, size_t lo, size_t hi) const {
  if (r.kind == CollKind::kAllReduce) return {};
  const bool rs = r.kind == CollKind::kReduceScatter;
  return RingPlan::by_owner(clip_ranges(r.owned, lo, hi), /*reduce_scatter=*/rs,
                            /*all_gather=*/!rs);
}

net::Status CollComm::test(CollRequest* req, bool* done, size_t* bytes) {
  const int s = req->state.load(std::memory_order_acquire);
  *done = s != 0;
  if (s == 0) return net::Status::kOk;
  if (bytes != nullptr) *bytes = req->bytes;
  const bool failed = s == 2;
  if (failed) {
    CFX_WARN(net::kLogColl, "CollNet AllReduce #%u (%zu elements) failed: %s", req->seq, req->count,
             req->error.c_str());
  }
  delete req;
  return failed ? net::Status::kRemoteError : net::Status::kOk;
}

void CollComm::finish(CollRequest& r, bool ok, const std::string& error) {
  if (!ok) r.error = error;
  r.state.store(ok ? 1 : 2, std::memory_order_release);
}

struct CollComm::RingRun {
  CollRequest* r = nullptr;
  std::unique_ptr<RingAllreduce> op;
  const char* what = "";
  Clock::time_point last_progress;
  uint64_t last_blocks = 0;
  bool progressed = false;  // by the last step_ring
};

std::unique_ptr<CollComm::RingRun> CollComm::start_ring(CollRequest& r, const RingLinks& links,
                                                        const uint8_t* send, size_t lo, size_t hi,
                                                        int tag, uint8_t* scratch,
                                                        const char* what) const {
  const size_t esize = dtype_size(r.dtype);
  auto run = std::make_unique<RingRun>();
  run->r = &r;
  run->what = what;
  run->last_progress = Clock::now();
  run->op = std::make_unique<RingAllreduce>(links, send + lo * esize, r.recv + lo * esize, hi - lo,
                                            r.dtype, r.op, tag, opts_.ring_block_bytes,
                                            opts_.ring_inflight, scratch, ring_plan(r, lo, hi));
  return run;
}

bool CollComm::step_ring(RingRun& run, bool* ok, std::string* error) {
  bool done = false;
  const net::Status st = run.op->progress(&done);
  *ok = false;
  if (st != net::Status::kOk) {
    *error = std::string(run.what) + ": " + net::toString(st);
    return true;
  }
  if (done) {
    *ok = true;
    return true;
  }
  if (stopped()) {
    *error = "communicator closed";
    return true;
  }
  const auto now = Clock::now();
  run.progressed = run.op->completed_blocks() != run.last_blocks;
  if (run.progressed) {
    run.last_blocks = run.op->completed_blocks();
    run.last_progress = now;
  } else if (now - run.last_progress > opts_.ring_timeout) {
    *error = std::string(run.what) + " made no progress for " +
             std::to_string(opts_.ring_timeout.count()) + " ms";
    return true;
  }
  return false;
}

namespace {

// Between polls that found nothing to do: yield a few times, then sleep.
void idle_pause(bool progressed, int* idle_polls) {
  if (progressed) {
    *idle_polls = 0;
  } else if (++*idle_polls > kRingIdlePolls) {
    std::this_thread::sleep_for(kRingIdleSleep);
  } else {
    sched_yield();
  }
}

}  // namespace

bool CollComm::failover_ring(CollRequest& r, const uint8_t* send, size_t lo, size_t hi, int tag,
                             std::string* error) {
  if (hi <= lo) return true;
  if (nranks_ == 1) {
    const size_t esize = dtype_size(r.dtype);
    if (send != r.recv) std::memmove(r.recv + lo * esize, send + lo * esize, (hi - lo) * esize);
    return true;
  }
  const RingLinks links{rank_, nranks_, rings_.failover_next.get(), rings_.failover_prev.get()};
  auto run = start_ring(r, links, send, lo, hi, tag, failover_scratch_.data(), "failover ring");
  for (int idle = 0;;) {
    bool ok = false;
    if (step_ring(*run, &ok, error)) return ok;
    idle_pause(run->progressed, &idle);
  }
}

bool CollComm::notice_arrived() {
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

bool CollComm::idle_failover_due() {
  if (!engine_live_) return false;
  const bool notice = notice_arrived();
  // The previous rank closed the failover ring: ranks close their communicators one after
  // the other when a job ends, and with nothing in flight nothing is lost. A request that
  // comes after all the same finds the ring gone and fails with a warning.
  if (notice_closed_) return false;
  return notice || !engine_->healthy();
}

bool CollComm::wait_aggregators(CollRequest& r, std::string* why) {
  // Sleeps in the engine between checks: the engine's progress thread does the I/O, and on
  // a machine with fewer cores than busy threads a spinning waiter slows everyone down.
  while (r.agg_waited < r.agg_handles.size()) {
    const client::Status s = engine_->wait(r.agg_handles[r.agg_waited], kWaitSlice, why);
    if (s == client::Status::kDone) {
      ++r.agg_waited;
      continue;
    }
    if (s == client::Status::kError) return false;
    if (epoch_ > 0) feed_engine();  // requests that arrived meanwhile: keep the pipeline full
    if (notice_arrived()) {
      *why = "another rank failed over";
      return false;
    }
    if (stopped()) {
      *why = "communicator closed";
      return false;
    }
  }
  return true;
}

void CollComm::ring_share_done(CollRequest* r, bool ok, const std::string& error) {
  if (!ok) r->ring_error = error;
  {
    std::lock_guard<std::mutex> lk(ring_mu_);
    r->ring_state.store(ok ? 1 : 2, std::memory_order_release);
  }
  ring_cv_.notify_all();  // after this the completion thread may free r
}

void CollComm::run_ring() {
  const size_t lanes = rings_.next.size();
  std::vector<std::unique_ptr<RingRun>> active(lanes);
  std::vector<std::pair<CollRequest*, size_t>> taken;  // request, lane (lanes: no ring op)
  std::vector<bool> claimed(lanes);                    // lanes given out by this pass
  uint64_t started = 0;  // ring operations started: the next one goes to lane started % lanes
  int idle = 0;
  for (;;) {
    taken.clear();
    CollRequest* exchange_at = nullptr;
    {
      std::unique_lock<std::mutex> lk(mu_);
      const bool busy = split_running_ || std::any_of(active.begin(), active.end(),
                                                      [](const auto& a) { return a != nullptr; });
      if (!busy) ring_wake_.wait(lk, [this] { return stop_ || !ring_queue_.empty(); });
      if (stop_) return;
      // Start in request order: stop at the first request whose lane is still busy. A
      // request that ends a split period starts the period's exchange (after the previous
      // one's end) as it is taken.
      std::fill(claimed.begin(), claimed.end(), false);
      while (!ring_queue_.empty()) {
        CollRequest* r = ring_queue_.front();
        if (r->split_exchange) {
          if (split_running_ || exchange_at != nullptr) break;
          exchange_at = r;
        }
        const bool op = r->agg_count < r->count && nranks_ > 1 && lanes > 0 &&
                        !ring_failed_.load(std::memory_order_relaxed);
        const size_t lane = op ? static_cast<size_t>(started % lanes) : lanes;
        if (op && (active[lane] || claimed[lane])) break;
        ring_queue_.pop_front();
        if (op) {
          claimed[lane] = true;
          ++started;
        }
        taken.emplace_back(r, lane);
      }
    }
    if (exchange_at != nullptr) {  // still queued here (its share has not started): alive
      exchange_at->split_exchange = false;
      start_split_exchange(exchange_at->seq);
    }
    for (const auto& [r, lane] : taken) {
      if (lane < lanes) {
        const RingLinks links{rank_, nranks_, rings_.next[lane].get(), rings_.prev[lane].get()};
        active[lane] = start_ring(*r, links, r->send, r->agg_count, r->count, ring_tag(r->seq, 0),
                                  scratch_[lane].data(), "worker ring");
      } else if (ring_failed_.load(std::memory_order_relaxed) && r->agg_count < r->count) {
        ring_share_done(r, false, "the worker ring failed earlier");
      } else {
        if (r->agg_count < r->count && r->send != r->recv) {  // one rank: the share is a copy
          const size_t esize = dtype_size(r->dtype);
          std::memmove(r->recv + r->agg_count * esize, r->send + r->agg_count * esize,
                       (r->count - r->agg_count) * esize);
        }
        ring_share_done(r, true, "");
      }
    }
    bool progressed = !taken.empty();
    for (auto& run : active) {
      if (!run) continue;
      bool ok = false;
      std::string error;
      if (step_ring(*run, &ok, &error)) {
        if (!ok) ring_failed_ = true;
        if (ok)
          ring_bytes_ +=
              static_cast<double>((run->r->count - run->r->agg_count) * dtype_size(run->r->dtype));
        ring_share_done(run->r, ok, error);
        run.reset();
        progressed = true;
      } else {
        progressed |= run->progressed;
      }
    }
    if (controller_) {
      track_ring_busy(
          std::any_of(active.begin(), active.end(), [](const auto& a) { return a != nullptr; }));
      if (split_running_) progressed |= advance_split();
    }
    idle_pause(progressed, &idle);
  }
}

uint64_t CollComm::engine_bytes_sent() {
  std::lock_guard<std::mutex> lk(engine_mu_);
  return engine_ != nullptr ? engine_->stats().bytes_sent : 0;
}

void CollComm::track_ring_busy(bool running) {
  if (running == ring_running_) return;
  ring_running_ = running;
  const uint64_t sent = engine_bytes_sent();
  if (running) {
    ring_since_ = Clock::now();
    sent_at_ring_start_ = sent;
    return;
  }
  ring_busy_s_ += std::chrono::duration<double>(Clock::now() - ring_since_).count();
  if (sent >= sent_at_ring_start_) agg_sent_with_ring_ += double(sent - sent_at_ring_start_);
}

void CollComm::start_split_exchange(uint32_t seq) {
  PathSample mine;
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (engine_ != nullptr) {
      const client::EngineStats st = engine_->stats();
      if (engine_.get() != sample_engine_) {  // a re-joined engine counts from zero
        sample_engine_ = engine_.get();
        sample_sent_ = sample_busy_ns_ = 0;
      }
      mine.agg_bytes = static_cast<double>(st.bytes_sent - sample_sent_);
      mine.agg_busy_s = static_cast<double>(st.busy_ns - sample_busy_ns_) * 1e-9;
      mine.grant_mbps = static_cast<double>(st.grant_mbps);
      sample_sent_ = st.bytes_sent;
      sample_busy_ns_ = st.busy_ns;
    }
  }
  if (ring_running_) {  // the stretch running now counts up to here
    track_ring_busy(false);
    track_ring_busy(true);
  }
  mine.agg_bytes_with_ring = agg_sent_with_ring_;
  mine.ring_bytes = ring_bytes_;
  mine.ring_busy_s = ring_busy_s_;
  mine.epoch = epoch_seen_.load(std::memory_order_acquire);
  mine.aggregators = aggs_in_epoch_.load(std::memory_order_acquire);
  ring_bytes_ = ring_busy_s_ = agg_sent_with_ring_ = 0;
  split_seq_ = seq;
  if (split_broken_) {
    SplitDecision keep;
    keep.ring_fraction = controller_->ring_fraction();
    publish_split(seq, keep);
    return;
  }
  split_round_->start(&mine);
  split_running_ = true;
  advance_split();
}

bool CollComm::advance_split() {
  bool done = false;
  const net::Status st = split_round_->progress(&done);
  if (st == net::Status::kOk && !done) return false;
  split_running_ = false;
  SplitDecision d;
  d.ring_fraction = controller_->ring_fraction();
  if (st != net::Status::kOk) {
    split_broken_ = true;  // the ring shares do not depend on it: the split just stays
    CFX_WARN(net::kLogColl,
             "CollNet rank %d: the split exchange failed (%s); the ring fraction stays %.3f", rank_,
             net::toString(st), d.ring_fraction);
  } else {
    const auto* all = reinterpret_cast<const PathSample*>(split_round_->all());
    d = controller_->update({all, static_cast<size_t>(nranks_)});
  }
  publish_split(split_seq_, d);
  return true;
}

void CollComm::publish_split(uint32_t seq, const SplitDecision& d) {
  if (d.changed) {
    CFX_INFO(net::kLogColl, "CollNet rank %d: ring fraction %.3f from request #%u on: %s", rank_,
             d.ring_fraction, seq + kSplitLag, d.reason.c_str());
  }
  std::lock_guard<std::mutex> lk(split_mu_);
  split_changes_.emplace_back(seq + kSplitLag, d.ring_fraction);
  split_pending_.pop_front();
}

bool CollComm::wait_ring_share(CollRequest& r, std::string* error) {
  // Sleeps: the ring thread is the one spinning on the transport.
  std::unique_lock<std::mutex> lk(ring_mu_);
  for (;;) {
    const int s = r.ring_state.load(std::memory_order_acquire);
    if (s == 1) return true;
    if (s == 2) {
      *error = r.ring_error;
      return false;
    }
    if (stopped()) {
      *error = "communicator closed";
      return false;
    }
    ring_cv_.wait_for(lk, std::chrono::milliseconds(10));
  }
}

bool CollComm::aggregator_share(CollRequest& r, std::string* error) {
  for (;;) {
    if (failover_broken_) {
      *error = "the failover ring failed earlier";
      return false;
    }
    if (failed_over_ && r.seq < handover_end_) {
      if (r.resolved == 1) return true;
      *error = r.resolved == 2 ? r.resolve_error : "no aggregator result was handed over";
      return false;
    }
    if (!engine_live_ || r.seq < engine_from_) break;  // redone over the failover ring
    if (epoch_ > 0) feed_engine();
    if (epoch_ == 0 && opts_.fault_abort_at != 0 && r.seq == opts_.fault_abort_at) {
      engine_->abort("fault injection (CONFLUX_FAULT_ABORT_AT)");
    }
    std::string why = "engine unavailable";
    if (!r.agg_handles.empty() && r.agg_epoch == epoch_) {
      if (wait_aggregators(r, &why)) {
        const size_t total = r.agg_count * dtype_size(r.dtype);
        if (r.kind == CollKind::kReduceScatter) {
          tails_.keep_input(r.seq, r.send, total, r.dtype, r.op, r.owned);
        } else {
          tails_.keep(r.seq, r.recv, total);
        }
        return true;
      }
      if (stopped()) {
        *error = why;
        return false;
      }
    }
    if (!fail_over(r.seq, why, error)) return false;
  }
  const uint8_t* src = r.staging.empty() ? r.send : r.staging.data();
  return failover_ring(r, src, 0, r.agg_count, ring_tag(r.seq, 1), error);
}

void CollComm::feed_engine() {
  std::lock_guard<std::mutex> lk(mu_);
  for (CollRequest* p : queue_) {
    if (p->seq < restripe_next_) continue;
    restripe_next_ = p->seq + 1;
    if (p->agg_count == 0) continue;
    hand_to_engine(*p);
    p->agg_epoch = epoch_;
  }
}

void CollComm::hand_to_engine(CollRequest& r) {
  // In-place AllReduce and every ReduceScatter read their input from the staging copy.
  const uint8_t* src = r.staging.empty() ? r.send : r.staging.data();
  r.agg_handles.clear();
  r.agg_waited = 0;
  if (r.kind != CollKind::kReduceScatter) {
    r.agg_handles.push_back(engine_->allreduce(src, r.recv, r.agg_count, r.dtype, r.op));
    return;
  }
  // One Reduce per owner, in rank order on every rank; only this rank's lands in r.recv.
  // Each piece's striping starts where the previous one's stopped, so the pieces alternate
  // over the aggregators as one request would: what a rank can miss is then still in the
  // request's last A x W packets (result_tails.h), which a failover relies on.
  const size_t esize = dtype_size(r.dtype);
  const size_t per_packet = std::max<size_t>(1, engine_->payload_bytes() / esize);
  const auto n_aggs = std::max<uint32_t>(1, static_cast<uint32_t>(engine_->aggregators().size()));
  uint64_t packets = 0;
  for (size_t k = 0; k < r.owned.size(); ++k) {
    const size_t lo = r.owned[k].first, hi = std::min(r.owned[k].second, r.agg_count);
    if (lo >= hi) continue;
    uint8_t* dst = k == static_cast<size_t>(rank_) ? r.recv + lo * esize : nullptr;
    const auto start = static_cast<uint32_t>(packets % n_aggs);
    r.agg_handles.push_back(engine_->reduce(src + lo * esize, dst, hi - lo, r.dtype, r.op,
                                            static_cast<uint32_t>(k), start));
    packets += (hi - lo + per_packet - 1) / per_packet;
  }
}

void CollComm::arm_notice() {
  notice_req_ = nullptr;
  notice_done_ = false;
  notice_closed_ = false;
  if (nranks_ < 2) return;
  void* dst = &notice_buf_;
  size_t size = sizeof notice_buf_;
  const int tag = kNoticeTag;
  if (rings_.failover_prev->irecv(1, &dst, &size, &tag, &notice_req_) != net::Status::kOk) {
    notice_req_ = nullptr;
    notice_done_ = true;  // the failover ring is unusable: failing over will say so
  }
}

namespace {

// What each rank says in the failover agreement.
struct Vote {
  uint32_t first_incomplete = 0;
  uint32_t next_seq = 0;   // requests this rank has been given so far
  uint64_t dead_mask = 0;  // original aggregator indices this rank's engine saw fail
};

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

bool CollComm::fail_over(uint32_t first_incomplete, const std::string& why, std::string* error) {
  failed_over_ = true;
  {
    std::lock_guard<std::mutex> lk(engine_mu_);  // submit() stops handing requests to engine_
    degraded_.store(true, std::memory_order_release);
  }
  engine_live_ = false;
  if (counted_usable_.exchange(false)) g_usable_comms.fetch_sub(1, std::memory_order_relaxed);
  uint64_t my_dead = 0;
  if (engine_ != nullptr) {
    const int failed = engine_->failed_aggregator();
    if (failed >= 0 && static_cast<size_t>(failed) < aggs_.size() &&
        aggs_[static_cast<size_t>(failed)] < 64) {
      my_dead = uint64_t{1} << aggs_[static_cast<size_t>(failed)];
    }
    // No engine thread may write into a request's buffer once hand-overs start.
    engine_->abort("failing over to the worker ring");
  }
  CFX_WARN(net::kLogColl,
           "Conflux aggregators failed (%s); the worker ring takes over their share of this "
           "and every later collective of this communicator",
           why.c_str());
  const auto fail = [&](const std::string& what) {
    failover_broken_ = true;
    *error = what;
    return false;
  };
  std::vector<Vote> all(static_cast<size_t>(nranks_));
  const Vote mine{first_incomplete, next_seq_.load(std::memory_order_relaxed), my_dead};
  if (nranks_ > 1) {
    // Tell the next rank, then wait for the previous rank's notice: every rank sends and
    // takes exactly one, so the failover ring's messages line up on every link.
    const auto deadline = Clock::now() + opts_.ring_timeout;
    net::Request* sreq = nullptr;
    static const uint64_t kNotice = 1;
    if (rings_.failover_next->isend(&kNotice, sizeof kNotice, kNoticeTag, &sreq) !=
            net::Status::kOk ||
        sreq == nullptr) {
      return fail("failover notice could not be sent");
    }
    for (bool sent = false; !sent || !notice_arrived();) {
      if (!sent) {
        size_t size = 0;
        const net::Status st = net::test(sreq, &sent, &size);
        if (st != net::Status::kOk)
          return fail(std::string("failover notice: ") + net::toString(st));
      }
      if (stopped()) return fail("communicator closed");
      if (Clock::now() > deadline) return fail("no failover notice from the previous rank");
      sched_yield();
    }
    arm_notice();  // for the failover of a re-joined engine
    const net::Status st =
        ring_allgather(rings_.failover_next.get(), rings_.failover_prev.get(), rank_, nranks_,
                       &mine, all.data(), sizeof(Vote), opts_.ring_timeout);
    if (st != net::Status::kOk) {
      return fail(std::string("failover agreement over the worker ring: ") + net::toString(st));
    }
  } else {
    all[0] = mine;
  }
  // Sequence numbers only grow within a communicator's life (2^32 requests).
  uint32_t lo = all[0].first_incomplete, hi = lo, given = 0;
  int holder = 0;
  uint64_t dead = dead_mask_;
  for (int i = 0; i < nranks_; ++i) {
    const uint32_t fi = all[static_cast<size_t>(i)].first_incomplete;
    given = std::max(given, all[static_cast<size_t>(i)].next_seq);
    dead |= all[static_cast<size_t>(i)].dead_mask;
    lo = std::min(lo, fi);
    if (fi > hi) {
      hi = fi;
      holder = i;
    }
  }
  handover_end_ = hi;
  CFX_INFO(net::kLogColl,
           "CollNet failover: rank %d's first unfinished request is #%u; over all ranks #%u..#%u",
           rank_, first_incomplete, lo, hi);
  if (hi > lo) {
    CFX_WARN(net::kLogColl,
             "CollNet failover: rank %d completed requests #%u..#%u that other ranks did not; "
             "it hands their results over the ring (for a ReduceScatter, every rank "
             "reduce-scatters its input's end over it)",
             holder, lo, hi - 1);
  }
  const size_t max_msg = sizeof(TailHeader) + tails_.window_bytes();
  for (uint32_t q = lo; q < hi; ++q) {
    std::vector<uint8_t> msg;
    if (rank_ == holder) {
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
      if (t != nullptr && !t->input) msg.insert(msg.end(), t->bytes.begin(), t->bytes.end());
    }
    const net::Status st =
        ring_broadcast(rings_.failover_next.get(), rings_.failover_prev.get(), rank_, nranks_,
                       holder, &msg, max_msg, opts_.ring_timeout);
    if (st != net::Status::kOk) {
      return fail(std::string("failover hand-over over the worker ring: ") + net::toString(st));
    }
    TailHeader h;
    if (msg.size() < sizeof h) return fail("failover hand-over: malformed message");
    std::memcpy(&h, msg.data(), sizeof h);
    if (h.seq == q && h.kept != 0 && h.input != 0) {
      if (!reduce_input_tails(q, h.total, h.offset, error)) return false;
      continue;
    }
    CollRequest* r = queued(q);
    if (r == nullptr || r->agg_count == 0 || rank_ == holder) continue;  // done here, or none
    const size_t total = r->agg_count * dtype_size(r->dtype);
    const size_t n = msg.size() - sizeof h;
    if (h.seq != q || h.kept == 0 || h.total != total || h.offset + n != total) {
      r->resolved = 2;
      r->resolve_error = "rank " + std::to_string(holder) +
                         " no longer holds the results of "
                         "request #" +
                         std::to_string(q) + " that this rank lacks";
      continue;
    }
    std::memcpy(r->recv + h.offset, msg.data() + sizeof h, n);
    r->resolved = 1;
  }
  return rejoin_survivors(dead, std::max(hi, given), error);
}

CollRequest* CollComm::queued(uint32_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  for (CollRequest* p : queue_) {
    if (p->seq == seq) return p;
  }
  return nullptr;
}

bool CollComm::reduce_input_tails(uint32_t q, size_t total, size_t offset, std::string* error) {
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
    src = t->bytes.data();
    sink.resize(total - offset);
    tmp.recv = sink.data();
  }
  const uint32_t have = src != nullptr ? 1 : 0;
  std::vector<uint32_t> all(static_cast<size_t>(nranks_), have);
  if (nranks_ > 1) {
    const net::Status st =
        ring_allgather(rings_.failover_next.get(), rings_.failover_prev.get(), rank_, nranks_,
                       &have, all.data(), sizeof have, opts_.ring_timeout);
    if (st != net::Status::kOk) {
      failover_broken_ = true;
      *error = std::string("failover hand-over over the worker ring: ") + net::toString(st);
      return false;
    }
  }
  for (int i = 0; i < nranks_; ++i) {
    if (all[static_cast<size_t>(i)] != 0) continue;
    if (r != nullptr) {
      r->resolved = 2;
      r->resolve_error = "rank " + std::to_string(i) +
                         " no longer holds its input of "
                         "ReduceScatter #" +
                         std::to_string(q) + ", whose shard this rank lacks";
    }
    return true;
  }
  // Every rank has its input end [offset, total): reduce-scatter it by owner.
  const size_t esize = dtype_size(tmp.dtype);
  const size_t e0 = offset / esize;
  tmp.count = (total - offset) / esize;
  tmp.owned = clip_ranges(*owned, e0, e0 + tmp.count);
  std::string why;
  if (!failover_ring(tmp, src, 0, tmp.count, ring_tag(q, 1), &why)) {
    failover_broken_ = true;
    *error =
        "failover reduce-scatter of ReduceScatter #" + std::to_string(q) + "'s input ends: " + why;
    return false;
  }
  if (r != nullptr) {
    r->resolved = 1;
    CFX_WARN(net::kLogColl,
             "CollNet failover: rank %d took its shard of ReduceScatter #%u from the ranks' input "
             "ends, reduced over the ring",
             rank_, q);
  }
  return true;
}

bool CollComm::rejoin_survivors(uint64_t dead, uint32_t from, std::string* error) {
  const uint64_t newly_dead = dead & ~dead_mask_;
  dead_mask_ = dead;
  std::vector<size_t> survivors;
  for (size_t i : aggs_) {
    if (i >= 64 || ((dead >> i) & 1) == 0) survivors.push_back(i);
  }
  // Only when some rank named a failed aggregator of this engine and others are left; the
  // decision uses agreed values only, so every rank takes the same branch.
  if (!opts_.rejoin || newly_dead == 0 || survivors.empty() || survivors.size() == aggs_.size()) {
    return true;
  }
  std::unique_ptr<client::Engine> old;
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    old = std::move(engine_);
  }
  old.reset();  // leaves the old job, which frees its slots on the survivors
  ++epoch_;
  std::string why;
  std::unique_ptr<client::Engine> fresh = opts_.rejoin(survivors, epoch_, &why);
  std::vector<uint32_t> joined(static_cast<size_t>(nranks_), 0);
  const uint32_t ok = fresh != nullptr ? 1 : 0;
  if (nranks_ > 1) {
    const net::Status st =
        ring_allgather(rings_.failover_next.get(), rings_.failover_prev.get(), rank_, nranks_, &ok,
                       joined.data(), sizeof ok, 2 * opts_.ring_timeout);
    if (st != net::Status::kOk) {
      failover_broken_ = true;
      *error = std::string("re-join agreement over the worker ring: ") + net::toString(st);
      return false;
    }
  } else {
    joined[0] = ok;
  }
  for (int i = 0; i < nranks_; ++i) {
    if (joined[static_cast<size_t>(i)] != 0) continue;
    CFX_WARN(net::kLogColl,
             "CollNet: rank %d could not join the %zu surviving aggregator(s)%s%s; the worker "
             "ring keeps every aggregator share",
             i, survivors.size(), i == rank_ ? ": " : "", i == rank_ ? why.c_str() : "");
    return true;
  }
  {
    std::lock_guard<std::mutex> lk(engine_mu_);  // the ring thread reads its counters
    engine_ = std::move(fresh);
  }
  aggs_ = std::move(survivors);
  aggs_in_epoch_.store(static_cast<uint32_t>(aggs_.size()), std::memory_order_release);
  epoch_seen_.store(epoch_, std::memory_order_release);  // the measured split re-splits
  engine_live_ = true;
  engine_from_ = from;
  restripe_next_ = from;
  if (!counted_usable_.exchange(true)) g_usable_comms.fetch_add(1, std::memory_order_relaxed);
  CFX_WARN(net::kLogColl,
           "CollNet rank %d: re-striped over %zu surviving aggregator(s) from request #%u on",
           rank_, aggs_.size(), from);
  return true;
}

void CollComm::run_completion() {
  if (engine_ != nullptr) arm_notice();
  for (;;) {
    CollRequest* r = nullptr;
    {
      std::unique_lock<std::mutex> lk(mu_);
      // Idle, the engine may still fail (an aggregator dies between collectives): take part
      // in the failover at once, since ranks with work pending wait for this one.
      while (!stop_ && queue_.empty()) {
        cv_.wait_for(lk, std::chrono::milliseconds(20));
        if (!stop_ && queue_.empty() && idle_failover_due()) break;
      }
      if (stop_) return;
      if (!queue_.empty()) r = queue_.front();
    }
    if (r == nullptr) {
      std::string why = "another rank failed over", error;
      engine_->healthy(&why);
      if (!fail_over(next_unfinished_, why, &error)) {
        CFX_WARN(net::kLogColl, "CollNet failover (idle) failed: %s", error.c_str());
      }
      continue;
    }
    std::string error;
    bool ok = r->agg_count == 0 || aggregator_share(*r, &error);
    std::string ring_error;
    if (!wait_ring_share(*r, &ring_error) && ok) {
      ok = false;
      error = ring_error;
    }
    if (ok) deliver(*r);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.pop_front();
    }
    next_unfinished_ = r->seq + 1;
    finish(*r, ok, error);
  }
}

}  // namespace conflux::collnet
