// SPDX-License-Identifier: Apache-2.0
#include "collnet/measured_split.h"

#include <cstdio>
#include <string>

#include "net/log.h"

namespace conflux::collnet {
namespace {

using Clock = std::chrono::steady_clock;

// A period ends after this many bytes or requests (every rank counts the same requests), and
// its decision applies this many requests after its end.
constexpr uint64_t kPeriodBytes = 16u << 20;
constexpr uint32_t kPeriodRequests = 64;
constexpr uint32_t kLag = 16;

}  // namespace

MeasuredSplit::MeasuredSplit(int rank, int nranks, double fraction,
                             std::optional<SplitController> controller,
                             const AggregatorPath* aggregators, std::unique_ptr<net::SendComm> next,
                             std::unique_ptr<net::RecvComm> prev)
    : rank_(rank),
      nranks_(nranks),
      aggregators_(aggregators),
      next_(std::move(next)),
      prev_(std::move(prev)),
      now_(fraction) {
  if (controller && nranks_ > 1 && aggregators_ != nullptr && next_ && prev_) {
    controller_ = std::move(controller);
    min_now_ = controller_->min_ring_bytes();
    round_ = std::make_unique<AsyncRingAllgather>(next_.get(), prev_.get(), rank_, nranks_,
                                                  sizeof(PathSample));
  }
}

bool MeasuredSplit::fraction_for(CollRequest& r, uint32_t seq, bool agg_ok, double* fraction,
                                 size_t* min_ring_bytes) {
  *min_ring_bytes = 0;
  if (!controller_) {
    *fraction = now_;
    return true;
  }
  std::lock_guard<std::mutex> lk(mu_);
  if (agg_ok && !pending_.empty() && pending_.front() + kLag <= seq) return false;
  while (!changes_.empty() && changes_.front().from <= seq) {
    now_ = changes_.front().fraction;
    min_now_ = changes_.front().min_ring_bytes;
    changes_.pop_front();
  }
  *fraction = now_;
  *min_ring_bytes = min_now_;
  period_bytes_ += r.bytes;
  if (period_bytes_ >= kPeriodBytes || ++period_requests_ >= kPeriodRequests) {
    r.split_exchange = true;
    ++periods_ended_;
    pending_.push_back(seq);
    period_bytes_ = 0;
    period_requests_ = 0;
  }
  return true;
}

bool MeasuredSplit::take_connect_probe(double delivered_bps, double* fraction) {
  std::lock_guard<std::mutex> lk(mu_);
  *fraction = now_;
  // After a period's end the controller is the ring thread's (and the probe too old to count).
  // Whether one ended depends only on the requests' sizes: the same on every rank.
  if (!controller_ || periods_ended_ > 0) return false;
  if (!controller_->take_connect_probe(delivered_bps)) return false;
  now_ = controller_->ring_fraction();
  min_now_ = controller_->min_ring_bytes();
  *fraction = now_;
  return true;
}

void MeasuredSplit::ring_busy(bool running) {
  if (running == ring_running_) return;
  ring_running_ = running;
  const uint64_t sent = aggregators_->sample().bytes_sent;
  if (running) {
    ring_since_ = Clock::now();
    sent_at_ring_start_ = sent;
    return;
  }
  ring_busy_s_ += std::chrono::duration<double>(Clock::now() - ring_since_).count();
  if (sent >= sent_at_ring_start_) agg_sent_with_ring_ += double(sent - sent_at_ring_start_);
}

void MeasuredSplit::start_exchange(uint32_t seq) {
  PathSample mine;
  const AggregatorSample a = aggregators_->sample();
  if (a.engine != nullptr) {
    if (a.engine != baseline_.engine) {  // a re-joined engine counts from zero
      baseline_ = AggregatorSample{};
      baseline_.engine = a.engine;
    }
    mine.agg_bytes = static_cast<double>(a.bytes_sent - baseline_.bytes_sent);
    mine.agg_busy_s = static_cast<double>(a.busy_ns - baseline_.busy_ns) * 1e-9;
    mine.agg_window_full_s =
        static_cast<double>(a.window_full_ns - baseline_.window_full_ns) * 1e-9;
    mine.grant_mbps = a.grant_mbps;
    baseline_.bytes_sent = a.bytes_sent;
    baseline_.busy_ns = a.busy_ns;
    baseline_.window_full_ns = a.window_full_ns;
  }
  if (ring_running_) {  // the stretch running now counts up to here
    ring_busy(false);
    ring_busy(true);
  }
  mine.agg_bytes_with_ring = agg_sent_with_ring_;
  mine.ring_bytes = ring_bytes_;
  mine.ring_busy_s = ring_busy_s_;
  mine.epoch = a.epoch;
  mine.aggregators = a.aggregators;
  mine.answered = a.answered;
  mine.asked = a.asked;
  ring_bytes_ = ring_busy_s_ = agg_sent_with_ring_ = 0;
  seq_ = seq;
  if (broken_) {
    SplitDecision keep;
    keep.ring_fraction = controller_->ring_fraction();
    keep.min_ring_bytes = controller_->min_ring_bytes();
    publish(seq, keep, 0);
    return;
  }
  round_->start(&mine);
  running_ = true;
  advance();
}

bool MeasuredSplit::advance() {
  if (!running_) return false;
  bool done = false;
  const net::Status st = round_->progress(&done);
  if (st == net::Status::kOk && !done) return false;
  running_ = false;
  SplitDecision d;
  d.ring_fraction = controller_->ring_fraction();
  d.min_ring_bytes = controller_->min_ring_bytes();
  uint64_t answered = 0;
  if (st != net::Status::kOk) {
    broken_ = true;  // the ring shares do not depend on it: the split just stays
    CFX_WARN(net::kLogColl,
             "CollNet rank %d: the split exchange failed (%s); the ring fraction stays %.3f", rank_,
             net::toString(st), d.ring_fraction);
  } else {
    const auto* all = reinterpret_cast<const PathSample*>(round_->all());
    if (rank_ == 0) trace_samples(all);
    d = controller_->update({all, static_cast<size_t>(nranks_)});
    answered = returns_agreed(all, static_cast<size_t>(nranks_));
  }
  publish(seq_, d, answered);
  return true;
}

void MeasuredSplit::trace_samples(const PathSample* all) const {
  std::string line;
  char buf[192];
  for (int i = 0; i < nranks_; ++i) {
    const PathSample& p = all[i];
    std::snprintf(buf, sizeof buf,
                  " | r%d agg %.2f MB in %.1f ms (%.2f MB beside the ring, window full %.1f ms), "
                  "ring %.2f MB in %.1f ms",
                  i, p.agg_bytes / 1e6, p.agg_busy_s * 1e3, p.agg_bytes_with_ring / 1e6,
                  p.agg_window_full_s * 1e3, p.ring_bytes / 1e6, p.ring_busy_s * 1e3);
    line += buf;
  }
  CFX_TRACE(net::kLogColl, "CollNet split period ending at request #%u%s", seq_, line.c_str());
}

uint64_t MeasuredSplit::returning_at(uint32_t seq) {
  std::lock_guard<std::mutex> lk(mu_);
  uint64_t back = 0;
  while (!returns_.empty() && returns_.front().from <= seq) {
    back |= returns_.front().aggregators;
    returns_.pop_front();
  }
  return back;
}

void MeasuredSplit::publish(uint32_t seq, const SplitDecision& d, uint64_t answered) {
  if (d.changed) {
    const std::string floor = d.min_ring_bytes == 0
                                  ? ""
                                  : " (ring shares under " + std::to_string(d.min_ring_bytes) +
                                        " bytes, too small for the ring's hops, go through the "
                                        "aggregators)";
    CFX_INFO(net::kLogColl, "CollNet rank %d: ring fraction %.3f from request #%u on: %s%s", rank_,
             d.ring_fraction, seq + kLag, d.reason.c_str(), floor.c_str());
  }
  std::lock_guard<std::mutex> lk(mu_);
  changes_.push_back({seq + kLag, d.ring_fraction, d.min_ring_bytes});
  if (answered != 0) returns_.push_back({seq + kLag, answered});
  pending_.pop_front();
}

}  // namespace conflux::collnet
