#include "collnet/ring_worker.h"

#include <algorithm>
#include <cstring>

#include "conflux/common/thread_name.h"
#include "net/log.h"

namespace conflux::collnet {
namespace {

using Clock = std::chrono::steady_clock;

// The measured split: a period ends after this many bytes or requests (every rank counts
// the same requests), and its decision applies this many requests after its end.
constexpr uint64_t kSplitPeriodBytes = 16u << 20;
constexpr uint32_t kSplitPeriodRequests = 64;
constexpr uint32_t kSplitLag = 16;

bool any_running(const std::vector<std::unique_ptr<RingRun>>& active) {
  return std::any_of(active.begin(), active.end(), [](const auto& a) { return a != nullptr; });
}

}  // namespace

RingWorker::RingWorker(int rank, int nranks, RingLanes lanes, const RingSettings& settings,
                       double fraction, std::optional<SplitController> controller,
                       std::function<AggregatorSample()> probe, const std::atomic<bool>& closing)
    : rank_(rank),
      nranks_(nranks),
      lanes_(std::move(lanes)),
      settings_(settings),
      probe_(std::move(probe)),
      closing_(closing),
      scratch_(lanes_.next.size(), std::vector<uint8_t>(settings.scratch_bytes())),
      split_now_(fraction) {
  if (controller && nranks_ > 1 && lanes_.split_next && lanes_.split_prev) {
    controller_ = std::move(controller);
    split_min_now_ = controller_->min_ring_bytes();
    split_round_ = std::make_unique<AsyncRingAllgather>(
        lanes_.split_next.get(), lanes_.split_prev.get(), rank_, nranks_, sizeof(PathSample));
  }
  thread_ = std::thread([this] {
    name_this_thread("cfx-ring");
    run();
  });
}

RingWorker::~RingWorker() { stop(); }

void RingWorker::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool RingWorker::split_for(CollRequest& r, uint32_t seq, bool agg_ok, double* fraction,
                           size_t* min_ring_bytes) {
  *min_ring_bytes = 0;
  if (!controller_) {
    *fraction = split_now_;
    return true;
  }
  std::lock_guard<std::mutex> lk(split_mu_);
  if (agg_ok && !split_pending_.empty() && split_pending_.front() + kSplitLag <= seq) return false;
  while (!split_changes_.empty() && split_changes_.front().from <= seq) {
    split_now_ = split_changes_.front().fraction;
    split_min_now_ = split_changes_.front().min_ring_bytes;
    split_changes_.pop_front();
  }
  *fraction = split_now_;
  *min_ring_bytes = split_min_now_;
  period_bytes_ += r.bytes;
  if (period_bytes_ >= kSplitPeriodBytes || ++period_requests_ >= kSplitPeriodRequests) {
    r.split_exchange = true;
    split_pending_.push_back(seq);
    period_bytes_ = 0;
    period_requests_ = 0;
  }
  return true;
}

void RingWorker::enqueue(CollRequest* r) {
  // A request with nothing for the ring thread to do (no ring share, no split exchange to
  // start) has its ring share done here: waking the ring thread only to say so costs a
  // context switch per request, which is most of a small AllReduce on a busy host.
  if (r->agg_count >= r->count && !r->split_exchange) {
    r->ring_state.store(1, std::memory_order_release);
    return;
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(r);
  }
  wake_.notify_all();
}

bool RingWorker::wait_share(CollRequest& r, std::string* error) {
  // Sleeps: the ring thread is the one spinning on the transport.
  std::unique_lock<std::mutex> lk(done_mu_);
  for (;;) {
    const int s = r.ring_state.load(std::memory_order_acquire);
    if (s == 1) return true;
    if (s == 2) {
      *error = r.ring_error;
      return false;
    }
    if (closing_.load(std::memory_order_acquire)) {
      *error = "communicator closed";
      return false;
    }
    done_cv_.wait_for(lk, std::chrono::milliseconds(10));
  }
}

void RingWorker::share_done(CollRequest* r, bool ok, const std::string& error) {
  if (!ok) r->ring_error = error;
  {
    std::lock_guard<std::mutex> lk(done_mu_);
    r->ring_state.store(ok ? 1 : 2, std::memory_order_release);
  }
  done_cv_.notify_all();  // after this the completing thread may free r
}

bool RingWorker::start_taken(std::vector<std::unique_ptr<RingRun>>& active, bool* took) {
  const size_t lanes = lanes_.next.size();
  std::vector<std::pair<CollRequest*, size_t>> taken;  // request, lane (lanes: no ring op)
  std::vector<bool> claimed(lanes);                    // lanes given out by this pass
  CollRequest* exchange_at = nullptr;
  {
    std::unique_lock<std::mutex> lk(mu_);
    if (!split_running_ && !any_running(active)) {
      wake_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    }
    if (stop_) return false;
    // Start in request order: stop at the first request whose lane is still busy. A
    // request that ends a split period starts the period's exchange (after the previous
    // one's end) as it is taken.
    while (!queue_.empty()) {
      CollRequest* r = queue_.front();
      if (r->split_exchange) {
        if (split_running_ || exchange_at != nullptr) break;
        exchange_at = r;
      }
      const bool op = r->agg_count < r->count && nranks_ > 1 && lanes > 0 && !failed_;
      const size_t lane = op ? static_cast<size_t>(started_ % lanes) : lanes;
      if (op && (active[lane] || claimed[lane])) break;
      queue_.pop_front();
      if (op) {
        claimed[lane] = true;
        ++started_;
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
      const RingLinks links{rank_, nranks_, lanes_.next[lane].get(), lanes_.prev[lane].get()};
      active[lane] =
          std::make_unique<RingRun>(*r, links, r->send, r->agg_count, r->count, ring_tag(r->seq, 0),
                                    scratch_[lane].data(), settings_, "worker ring");
    } else if (failed_ && r->agg_count < r->count) {
      share_done(r, false, "the worker ring failed earlier");
    } else {
      if (r->agg_count < r->count && r->send != r->recv) {  // one rank: the share is a copy
        const size_t esize = dtype_size(r->dtype);
        std::memmove(r->recv + r->agg_count * esize, r->send + r->agg_count * esize,
                     (r->count - r->agg_count) * esize);
      }
      share_done(r, true, "");
    }
  }
  *took = !taken.empty();
  return true;
}

void RingWorker::run() {
  std::vector<std::unique_ptr<RingRun>> active(lanes_.next.size());
  for (int idle = 0;;) {
    bool progressed = false;
    if (!start_taken(active, &progressed)) return;
    const bool closing = closing_.load(std::memory_order_acquire);
    for (auto& run : active) {
      if (!run) continue;
      bool ok = false;
      std::string error;
      if (run->step(closing, &ok, &error)) {
        CollRequest& r = run->request();
        if (ok) {
          ring_bytes_ += static_cast<double>((r.count - r.agg_count) * dtype_size(r.dtype));
        } else {
          failed_ = true;
        }
        share_done(&r, ok, error);
        run.reset();
        progressed = true;
      } else {
        progressed |= run->progressed();
      }
    }
    if (controller_) {
      track_ring_busy(any_running(active));
      if (split_running_) progressed |= advance_split();
    }
    idle_pause(progressed, &idle);
  }
}

void RingWorker::track_ring_busy(bool running) {
  if (running == ring_running_) return;
  ring_running_ = running;
  const uint64_t sent = probe_().bytes_sent;
  if (running) {
    ring_since_ = Clock::now();
    sent_at_ring_start_ = sent;
    return;
  }
  ring_busy_s_ += std::chrono::duration<double>(Clock::now() - ring_since_).count();
  if (sent >= sent_at_ring_start_) agg_sent_with_ring_ += double(sent - sent_at_ring_start_);
}

void RingWorker::start_split_exchange(uint32_t seq) {
  PathSample mine;
  const AggregatorSample a = probe_();
  if (a.engine != nullptr) {
    if (a.engine != sample_engine_) {  // a re-joined engine counts from zero
      sample_engine_ = a.engine;
      sample_sent_ = sample_busy_ns_ = sample_full_ns_ = 0;
    }
    mine.agg_bytes = static_cast<double>(a.bytes_sent - sample_sent_);
    mine.agg_busy_s = static_cast<double>(a.busy_ns - sample_busy_ns_) * 1e-9;
    mine.agg_window_full_s = static_cast<double>(a.window_full_ns - sample_full_ns_) * 1e-9;
    mine.grant_mbps = a.grant_mbps;
    sample_sent_ = a.bytes_sent;
    sample_busy_ns_ = a.busy_ns;
    sample_full_ns_ = a.window_full_ns;
  }
  if (ring_running_) {  // the stretch running now counts up to here
    track_ring_busy(false);
    track_ring_busy(true);
  }
  mine.agg_bytes_with_ring = agg_sent_with_ring_;
  mine.ring_bytes = ring_bytes_;
  mine.ring_busy_s = ring_busy_s_;
  mine.epoch = a.epoch;
  mine.aggregators = a.aggregators;
  ring_bytes_ = ring_busy_s_ = agg_sent_with_ring_ = 0;
  split_seq_ = seq;
  if (split_broken_) {
    SplitDecision keep;
    keep.ring_fraction = controller_->ring_fraction();
    keep.min_ring_bytes = controller_->min_ring_bytes();
    publish_split(seq, keep);
    return;
  }
  split_round_->start(&mine);
  split_running_ = true;
  advance_split();
}

bool RingWorker::advance_split() {
  bool done = false;
  const net::Status st = split_round_->progress(&done);
  if (st == net::Status::kOk && !done) return false;
  split_running_ = false;
  SplitDecision d;
  d.ring_fraction = controller_->ring_fraction();
  d.min_ring_bytes = controller_->min_ring_bytes();
  if (st != net::Status::kOk) {
    split_broken_ = true;  // the ring shares do not depend on it: the split just stays
    CFX_WARN(net::kLogColl,
             "CollNet rank %d: the split exchange failed (%s); the ring fraction stays %.3f", rank_,
             net::toString(st), d.ring_fraction);
  } else {
    const auto* all = reinterpret_cast<const PathSample*>(split_round_->all());
    if (rank_ == 0) trace_samples(all);
    d = controller_->update({all, static_cast<size_t>(nranks_)});
  }
  publish_split(split_seq_, d);
  return true;
}

void RingWorker::trace_samples(const PathSample* all) const {
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
  CFX_TRACE(net::kLogColl, "CollNet split period ending at request #%u%s", split_seq_,
            line.c_str());
}

void RingWorker::publish_split(uint32_t seq, const SplitDecision& d) {
  if (d.changed) {
    const std::string floor = d.min_ring_bytes == 0
                                  ? ""
                                  : " (ring shares under " + std::to_string(d.min_ring_bytes) +
                                        " bytes, too small for the ring's hops, go through the "
                                        "aggregators)";
    CFX_INFO(net::kLogColl, "CollNet rank %d: ring fraction %.3f from request #%u on: %s%s", rank_,
             d.ring_fraction, seq + kSplitLag, d.reason.c_str(), floor.c_str());
  }
  std::lock_guard<std::mutex> lk(split_mu_);
  split_changes_.push_back({seq + kSplitLag, d.ring_fraction, d.min_ring_bytes});
  split_pending_.pop_front();
}

}  // namespace conflux::collnet
