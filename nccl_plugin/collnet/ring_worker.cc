// SPDX-License-Identifier: Apache-2.0
#include "collnet/ring_worker.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "conflux/common/thread_name.h"

namespace conflux::collnet {
namespace {

bool any_running(const std::vector<std::unique_ptr<RingRun>>& active) {
  return std::any_of(active.begin(), active.end(), [](const auto& a) { return a != nullptr; });
}

}  // namespace

RingWorker::RingWorker(int rank, int nranks, RingLanes lanes, const RingSettings& settings,
                       MeasuredSplit& split, const std::atomic<bool>& closing)
    : rank_(rank),
      nranks_(nranks),
      lanes_(std::move(lanes)),
      settings_(settings),
      split_(split),
      closing_(closing),
      scratch_(lanes_.next.size(), std::vector<uint8_t>(settings.scratch_bytes())) {
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

Status RingWorker::wait_share(CollRequest& r) {
  // Sleeps: the ring thread is the one spinning on the transport.
  std::unique_lock<std::mutex> lk(done_mu_);
  for (;;) {
    const int s = r.ring_state.load(std::memory_order_acquire);
    if (s == 1) return Status();
    if (s == 2) return r.ring_error;
    if (closing_.load(std::memory_order_acquire)) return comm_closed();
    done_cv_.wait_for(lk, std::chrono::milliseconds(10));
  }
}

void RingWorker::share_done(CollRequest* r, Status result) {
  const bool ok = result.ok();
  if (!ok) r->ring_error = std::move(result);
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
    if (!split_.exchanging() && !any_running(active)) {
      wake_.wait(lk, [this] { return stop_ || !queue_.empty(); });
    }
    if (stop_) return false;
    // Start in request order: stop at the first request whose lane is still busy. A
    // request that ends a split period starts the period's exchange (after the previous
    // one's end) as it is taken.
    while (!queue_.empty()) {
      CollRequest* r = queue_.front();
      if (r->split_exchange) {
        if (split_.exchanging() || exchange_at != nullptr) break;
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
    split_.start_exchange(exchange_at->seq);
  }
  for (const auto& [r, lane] : taken) {
    if (lane < lanes) {
      const RingLinks links{rank_, nranks_, lanes_.next[lane].get(), lanes_.prev[lane].get()};
      active[lane] =
          std::make_unique<RingRun>(*r, links, r->send, r->agg_count, r->count, ring_tag(r->seq, 0),
                                    scratch_[lane].data(), settings_, "worker ring");
    } else if (failed_ && r->agg_count < r->count) {
      share_done(r, unavailable("the worker ring failed earlier"));
    } else {
      if (r->agg_count < r->count && r->send != r->recv) {  // one rank: the share is a copy
        const size_t esize = dtype_size(r->dtype);
        std::memmove(r->recv + r->agg_count * esize, r->send + r->agg_count * esize,
                     (r->count - r->agg_count) * esize);
      }
      share_done(r, Status());
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
      Status result;
      if (run->step(closing, &result)) {
        CollRequest& r = run->request();
        if (result.ok()) {
          split_.ring_carried((r.count - r.agg_count) * dtype_size(r.dtype));
        } else {
          failed_ = true;
        }
        share_done(&r, std::move(result));
        run.reset();
        progressed = true;
      } else {
        progressed |= run->progressed();
      }
    }
    if (split_.measured()) {
      split_.ring_busy(any_running(active));
      progressed |= split_.advance();
    }
    idle_pause(progressed, &idle);
  }
}

}  // namespace conflux::collnet
