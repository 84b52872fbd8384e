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

// Longest sleep between checks of a pending aggregator share (failover notice, close). The
// engine wakes its waiter when a request finishes; the slice only bounds how late a notice or
// a close is seen, so it is long: a bulk request takes many milliseconds, and each expiry costs
// a wake-up. After a failover the completion thread also feeds the engine, and new requests
// wait for it: then the slice is short.
constexpr std::chrono::microseconds kWaitSlice{20'000};
constexpr std::chrono::microseconds kFeedSlice{1'000};
// A request that test() completes (inline completion, coll_comm.h) becomes the completion
// thread's when it is still the oldest this long after iallreduce: NCCL's proxy thread is not
// polling it, or a failover holds it back.
constexpr std::chrono::milliseconds kInlineGrace{20};

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
    : rank_(rank), nranks_(nranks), engine_(std::move(engine)), opts_(opts) {
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
  failover_ = std::make_unique<Failover>(rank_, nranks_, std::move(rings.failover_next),
                                         std::move(rings.failover_prev), opts_.ring,
                                         tail_window(engine_.get()), stopping_);
  RingLanes lanes{std::move(rings.next), std::move(rings.prev), std::move(rings.split_next),
                  std::move(rings.split_prev)};
  // Without aggregators there is no split to measure.
  std::optional<SplitController> controller;
  if (engine_ != nullptr) controller = opts_.controller;
  ring_ = std::make_unique<RingWorker>(
      rank_, nranks_, std::move(lanes), opts_.ring, opts_.ring_fraction, std::move(controller),
      [this] { return sample_aggregators(); }, stopping_);
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
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (engine_ && pending) engine_->abort("CollNet communicator closed with requests pending");
  }
  ring_->stop();
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
  log_small_times();
  for (CollRequest* r : queue_) delete r;
  ring_.reset();
  engine_.reset();
  magic_ = 0;
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

AggregatorSample CollComm::sample_aggregators() {
  AggregatorSample a;
  {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (engine_ != nullptr) {
      const client::EngineStats st = engine_->stats();
      a.engine = engine_.get();
      a.bytes_sent = st.bytes_sent;
      a.busy_ns = st.busy_ns;
      a.window_full_ns = st.window_full_ns;
      a.grant_mbps = static_cast<double>(st.grant_mbps);
    }
  }
  a.epoch = epoch_seen_.load(std::memory_order_acquire);
  a.aggregators = aggs_in_epoch_.load(std::memory_order_acquire);
  return a;
}

bool CollComm::submit(CollRequest* r, bool agg_capable) {
  // The split depends only on values every rank shares (count, dtype, op, the fraction and
  // the aggregators' capabilities agreed at connect, or the measured split agreed for this
  // sequence number), so it is identical on every rank.
  const unsigned bit = static_cast<unsigned>(r->dtype) * kNumOps + static_cast<unsigned>(r->op);
  const bool agg_ok = agg_capable && ((support_mask_ >> bit) & 1) != 0;
  const uint32_t seq = next_seq_.load(std::memory_order_relaxed);
  double fraction = opts_.ring_fraction;
  size_t measured_min = 0;
  if (!ring_->split_for(*r, seq, agg_ok, &fraction, &measured_min)) return false;
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
  bool handed = false;
  if (r->agg_count > 0) {
    std::lock_guard<std::mutex> lk(engine_mu_);
    if (!degraded()) {  // after a failover the completion thread feeds the engine, if any
      if (r->send == r->recv) {
        r->staging.assign(r->send, r->send + r->agg_count * dtype_size(r->dtype));
      }
      hand_to_engine(*r);
      handed = true;
    }
  }
  // A test hook may abort the engine from the completion thread at a given request.
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
  // Still carried by the first engine, through its one engine request.
  if (!engine_live_ || epoch_ != 0 || r->agg_epoch != 0 || r->agg_handles.size() != 1 ||
      r->agg_waited != 0) {
    return;
  }
  const client::Status s = engine_->poll_done(r->agg_handles[0]);
  if (s == client::Status::kPending) return;
  if (s != client::Status::kDone) {
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
  finish(*r, true, "");
}

void CollComm::finish(CollRequest& r, bool ok, const std::string& error) {
  if (!ok) r.error = error;
  if (r.timed != nullptr) r.finished = SmallAllReduceTimes::Clock::now();
  r.state.store(ok ? 1 : 2, std::memory_order_release);
}

bool CollComm::idle_failover_due() {
  if (!engine_live_) return false;
  const bool notice = failover_->notice_arrived();
  // The previous rank closed the failover ring: ranks close their communicators one after
  // the other when a job ends, and with nothing in flight nothing is lost. A request that
  // comes after all the same finds the ring gone and fails with a warning.
  if (failover_->notice_closed()) return false;
  return notice || !engine_->healthy();
}

bool CollComm::wait_aggregators(CollRequest& r, std::string* why) {
  // Sleeps in the engine between checks: the engine's progress thread does the I/O, and on
  // a machine with fewer cores than busy threads a spinning waiter slows everyone down.
  while (r.agg_waited < r.agg_handles.size()) {
    const client::Status s =
        engine_->wait(r.agg_handles[r.agg_waited], epoch_ > 0 ? kFeedSlice : kWaitSlice, why);
    if (s == client::Status::kDone) {
      ++r.agg_waited;
      continue;
    }
    if (s == client::Status::kError) return false;
    if (epoch_ > 0) feed_engine();  // requests that arrived meanwhile: keep the pipeline full
    if (failover_->notice_arrived()) {
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

bool CollComm::aggregator_share(CollRequest& r, std::string* error) {
  for (;;) {
    if (failover_->broken()) {
      *error = "the failover ring failed earlier";
      return false;
    }
    if (failover_->handed_over(r)) {
      if (r.resolved == 1) return true;
      *error = r.resolved == 2 ? r.resolve_error : "no aggregator result was handed over";
      return false;
    }
    if (!engine_live_ || r.seq < engine_from_) break;  // redone over the failover ring
    if (epoch_ > 0) feed_engine();
    hooks::atRequest(opts_, epoch_, r.seq, *engine_);
    std::string why = "engine unavailable";
    if (!r.agg_handles.empty() && r.agg_epoch == epoch_) {
      if (wait_aggregators(r, &why)) {
        const size_t total = r.agg_count * dtype_size(r.dtype);
        if (r.kind == CollKind::kReduceScatter) {
          failover_->tails().keep_input(r.seq, r.send, total, r.dtype, r.op, r.owned);
        } else {
          failover_->tails().adopt(r.seq, total, std::move(r.result_end));
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
  return failover_->redo(r, error);
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
  const uint8_t* src = r.agg_input();
  r.agg_handles.clear();
  r.agg_waited = 0;
  if (r.kind != CollKind::kReduceScatter) {
    // The engine also writes the result's end where the failover keeps it (result_tails.h).
    const size_t total = r.agg_count * dtype_size(r.dtype);
    const size_t end = failover_->tails().end_bytes(total);
    if (end > 0 && r.result_end == nullptr) r.result_end.reset(new uint8_t[end]);
    r.agg_handles.push_back(engine_->allreduce(src, r.recv, r.agg_count, r.dtype, r.op,
                                               {r.result_end.get(), total - end}));
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

bool CollComm::fail_over(uint32_t first_incomplete, const std::string& why, std::string* error) {
  {
    std::lock_guard<std::mutex> lk(engine_mu_);  // submit() stops handing requests to engine_
    degraded_.store(true, std::memory_order_release);
  }
  engine_live_ = false;
  FailoverVote mine{first_incomplete, next_seq_.load(std::memory_order_relaxed), 0};
  if (engine_ != nullptr) {
    const int failed = engine_->failed_aggregator();
    if (failed >= 0 && static_cast<size_t>(failed) < aggs_.size() &&
        aggs_[static_cast<size_t>(failed)] < 64) {
      mine.dead_mask = uint64_t{1} << aggs_[static_cast<size_t>(failed)];
    }
    // No engine thread may write into a request's buffer once hand-overs start.
    engine_->abort("failing over to the worker ring");
  }
  CFX_WARN(net::kLogColl,
           "Conflux aggregators failed (%s); the worker ring takes over their share of this "
           "and every later collective of this communicator",
           why.c_str());
  FailoverAgreement a;
  if (!failover_->agree(mine, &a, error)) return false;
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
  if (!failover_->hand_over(
          a, [this](uint32_t seq) { return queued(seq); }, error))
    return false;
  return rejoin_survivors(a.dead | dead_mask_, std::max(a.hi, a.given), error);
}

CollRequest* CollComm::queued(uint32_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  for (CollRequest* p : queue_) {
    if (p->seq == seq) return p;
  }
  return nullptr;
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
  std::vector<uint32_t> joined;
  if (!failover_->all_say(fresh != nullptr ? 1 : 0, &joined, 2 * opts_.ring.timeout,
                          "re-join agreement", error)) {
    return false;
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
  CFX_WARN(net::kLogColl,
           "CollNet rank %d: re-striped over %zu surviving aggregator(s) from request #%u on",
           rank_, aggs_.size(), from);
  return true;
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
    if (engine_ != nullptr) failover_->arm_notice();
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
    if (!ring_->wait_share(*r, &ring_error) && ok) {
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
