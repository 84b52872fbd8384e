// SPDX-License-Identifier: Apache-2.0
#include "collnet/aggregator_path.h"

#include <algorithm>

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

}  // namespace

AggregatorPath::AggregatorPath(int rank, std::unique_ptr<client::Engine> engine,
                               const ResultTails& tails, Rejoin rejoin, ReturnProber::Probe probe,
                               bool probe_on_every_rank)
    : rank_(rank), tails_(tails), rejoin_(std::move(rejoin)), engine_(std::move(engine)) {
  if (engine_ == nullptr) return;
  sampled_aggregators_ = static_cast<uint32_t>(engine_->aggregators().size());
  original_ = engine_->aggregators().size();
  if ((rank_ == 0 || probe_on_every_rank) && probe && rejoin_)
    prober_ = std::make_unique<ReturnProber>(std::move(probe));
  live_ = true;
  for (size_t i = 0; i < engine_->aggregators().size(); ++i) aggs_.push_back(i);
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int o = 0; o < kNumOps; ++o) {
      if (engine_->supports(static_cast<DType>(d), static_cast<Op>(o))) {
        support_mask_ |= uint64_t{1} << (d * kNumOps + o);
      }
    }
  }
}

bool AggregatorPath::reduces(DType dtype, Op op) const {
  const unsigned bit = static_cast<unsigned>(dtype) * kNumOps + static_cast<unsigned>(op);
  return ((support_mask_ >> bit) & 1) != 0;
}

bool AggregatorPath::submit(CollRequest& r) {
  std::lock_guard<std::mutex> lk(mu_);
  if (stopped_) return false;
  if (r.send == r.recv) r.staging.assign(r.send, r.send + r.agg_count * dtype_size(r.dtype));
  hand(r);
  return true;
}

void AggregatorPath::hand(CollRequest& r) {
  // In-place AllReduce and every ReduceScatter read their input from the staging copy.
  const uint8_t* src = r.agg_input();
  r.agg_handles.clear();
  r.agg_waited = 0;
  if (r.kind != CollKind::kReduceScatter) {
    // The engine also writes the result's end where the failover keeps it (result_tails.h).
    const size_t total = r.agg_count * dtype_size(r.dtype);
    const size_t end = tails_.end_bytes(total);
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
  const uint32_t period = engine_->stripe_period();
  uint64_t packets = 0;
  for (size_t k = 0; k < r.owned.size(); ++k) {
    const size_t lo = r.owned[k].first, hi = std::min(r.owned[k].second, r.agg_count);
    if (lo >= hi) continue;
    uint8_t* dst = k == static_cast<size_t>(rank_) ? r.recv + lo * esize : nullptr;
    const auto start = static_cast<uint32_t>(packets % period);
    r.agg_handles.push_back(engine_->reduce(src + lo * esize, dst, hi - lo, r.dtype, r.op,
                                            static_cast<uint32_t>(k), start));
    packets += (hi - lo + per_packet - 1) / per_packet;
  }
}

AggregatorSample AggregatorPath::sample() const {
  AggregatorSample a;
  std::lock_guard<std::mutex> lk(mu_);
  if (engine_ != nullptr) {
    const client::EngineStats st = engine_->stats();
    a.engine = engine_.get();
    a.bytes_sent = st.bytes_sent;
    a.busy_ns = st.busy_ns;
    a.window_full_ns = st.window_full_ns;
    a.grant_mbps = static_cast<double>(st.grant_mbps);
  }
  a.epoch = sampled_epoch_;
  a.aggregators = sampled_aggregators_;
  if (prober_ != nullptr) {
    a.answered = prober_->answered();
    a.asked = prober_->asking();
  }
  return a;
}

Status AggregatorPath::health() const {
  if (engine_ == nullptr) return unavailable("engine unavailable");
  std::string why;
  if (!engine_->healthy(&why)) return unavailable(std::move(why));
  return Status();
}

void AggregatorPath::abort(std::string_view why) {
  std::lock_guard<std::mutex> lk(mu_);
  if (engine_ != nullptr) engine_->abort(why);
}

void AggregatorPath::feed(CollRequest& r) {
  if (r.seq < restripe_next_) return;
  restripe_next_ = r.seq + 1;
  if (r.agg_count == 0) return;
  hand(r);
  r.agg_epoch = epoch_;
}

Status AggregatorPath::wait(CollRequest& r, bool* done) {
  // Sleeps in the engine between checks: the engine's progress thread does the I/O, and on
  // a machine with fewer cores than busy threads a spinning waiter slows everyone down.
  *done = false;
  while (r.agg_waited < r.agg_handles.size()) {
    std::string why;
    const client::RequestState s =
        engine_->wait(r.agg_handles[r.agg_waited], epoch_ > 0 ? kFeedSlice : kWaitSlice, &why);
    if (s == client::RequestState::kError) return unavailable(std::move(why));
    if (s != client::RequestState::kDone) return Status();  // the slice ran out
    ++r.agg_waited;
  }
  *done = true;
  return Status();
}

client::RequestState AggregatorPath::poll_inline(const CollRequest& r) {
  // Still carried by the first engine, through its one engine request.
  if (!live_ || epoch_ != 0 || r.agg_epoch != 0 || r.agg_handles.size() != 1 || r.agg_waited != 0) {
    return client::RequestState::kPending;
  }
  return engine_->poll_done(r.agg_handles[0]);
}

uint64_t AggregatorPath::fail_over() {
  {
    std::lock_guard<std::mutex> lk(mu_);  // submit() stops handing requests to engine_
    stopped_ = true;
  }
  const bool was_live = live_;
  live_ = false;
  // Not live: the engine is one an earlier failover aborted, whose failure is counted.
  if (engine_ == nullptr || !was_live) return 0;
  uint64_t dead = 0;
  const int failed = engine_->failed_aggregator();
  if (failed >= 0 && static_cast<size_t>(failed) < aggs_.size() &&
      aggs_[static_cast<size_t>(failed)] < 64) {
    dead = uint64_t{1} << aggs_[static_cast<size_t>(failed)];
  }
  // No engine thread may write into a request's buffer once hand-overs start.
  engine_->abort("failing over to the worker ring");
  return dead;
}

bool AggregatorPath::restripe_due(uint64_t dead, std::vector<size_t>* survivors) {
  dead |= dead_mask_;
  const uint64_t newly_dead = dead & ~dead_mask_;
  dead_mask_ = dead;
  survivors->clear();
  for (size_t i : aggs_) {
    if (i >= 64 || ((dead >> i) & 1) == 0) survivors->push_back(i);
  }
  return rejoin_ && newly_dead != 0 && !survivors->empty() && survivors->size() != aggs_.size();
}

Status AggregatorPath::rejoin(const std::vector<size_t>& survivors,
                              std::unique_ptr<client::Engine>* fresh) {
  std::unique_ptr<client::Engine> old;
  {
    std::lock_guard<std::mutex> lk(mu_);
    old = std::move(engine_);
  }
  old.reset();  // leaves the old job, which frees its slots on the survivors
  ++epoch_;
  return rejoin_(survivors, epoch_, fresh);
}

void AggregatorPath::adopt(std::unique_ptr<client::Engine> fresh, std::vector<size_t> survivors,
                           uint32_t from) {
  aggs_ = std::move(survivors);
  {
    std::lock_guard<std::mutex> lk(mu_);  // the ring thread reads its counters
    engine_ = std::move(fresh);
    sampled_aggregators_ = static_cast<uint32_t>(aggs_.size());
    sampled_epoch_ = epoch_;  // the measured split re-splits
  }
  live_ = true;
  from_ = from;
  restripe_next_ = from;
}

uint64_t AggregatorPath::missing() const {
  uint64_t all = 0;
  for (size_t i = 0; i < std::min<size_t>(original_, 64); ++i) all |= uint64_t{1} << i;
  if (!live_) return all;
  for (size_t i : aggs_) {
    if (i < 64) all &= ~(uint64_t{1} << i);
  }
  return all;
}

bool AggregatorPath::return_due(uint64_t dead, uint64_t back, std::vector<size_t>* target) {
  dead_mask_ = (dead_mask_ & ~back) | dead;
  target->clear();
  for (size_t i = 0; i < original_; ++i) {
    if (i >= 64 || ((dead_mask_ >> i) & 1) == 0) target->push_back(i);
  }
  return rejoin_ && !target->empty();
}

void AggregatorPath::watch_missing() {
  if (prober_ != nullptr) prober_->watch(missing());
}

void AggregatorPath::log_totals() const {
  if (engine_ == nullptr) return;
  const client::EngineStats st = engine_->stats();
  CFX_INFO(net::kLogColl,
           "CollNet rank %d closing: %llu packets sent, %llu retransmitted (%llu fast, %llu "
           "needless), %llu congestion-window decreases, %llu requests done, %llu failed; the "
           "progress thread slept %llu times (%llu after a bulk pause), dozed %llu",
           rank_, static_cast<unsigned long long>(st.packets_sent),
           static_cast<unsigned long long>(st.retransmits),
           static_cast<unsigned long long>(st.fast_retransmits),
           static_cast<unsigned long long>(st.spurious_retransmits),
           static_cast<unsigned long long>(st.cwnd_decreases),
           static_cast<unsigned long long>(st.requests_completed),
           static_cast<unsigned long long>(st.requests_failed),
           static_cast<unsigned long long>(st.progress_sleeps),
           static_cast<unsigned long long>(st.bulk_pauses),
           static_cast<unsigned long long>(st.dozes));
}

}  // namespace conflux::collnet
