// SPDX-License-Identifier: Apache-2.0
#include "progress.h"

#include <arpa/inet.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <thread>
#include <variant>

namespace conflux::client {
namespace {

constexpr int64_t kReorderHoldNs = 1 * kMs;  // longest a fault-reordered datagram is held
constexpr int64_t kMaxSleepNs = 100 * kMs;

}  // namespace

Progress::Progress(Shared* shared, UdpChannel* udp, std::vector<JoinedAggregator> aggs,
                   uint32_t payload_bytes)
    : sh_(shared), udp_(udp), payload_bytes_(payload_bytes) {
  const int64_t now = now_ns();
  aggs_.reserve(aggs.size());
  for (JoinedAggregator& j : aggs) {
    const uint32_t w = j.info.granted_slots;
    Agg& g = aggs_.emplace_back(std::move(j), w, sh_->cfg.congestion);
    for (uint16_t p : g.j.info.data_ports) {
      sockaddr_in a = g.j.data_addr;
      a.sin_port = htons(p);
      g.port_addrs.push_back(a);
    }
    g.rto_us = static_cast<uint32_t>(sh_->cfg.rto_initial.count());
    const std::vector<uint32_t>& served = sh_->cfg.served_ranks;
    ResultFanout fanout;
    fanout.ranks = g.j.info.stripe < served.size() ? served[g.j.info.stripe] : sh_->cfg.n_workers;
    fanout.multicast = g.j.group_rx != nullptr;
    fanout.header_bytes = static_cast<uint32_t>(proto::kDataHeaderSize);
    fanout.trailer_bytes =
        g.j.mac_key.has_value() ? static_cast<uint32_t>(proto::kMacTrailerSize) : 0;
    g.pacing = GrantPacing(fanout, g.j.info.capacity_known ? g.j.info.share_mbps : 0);
    apply_grant_ceiling(g);
    g.delivered_tx.assign(g.port_addrs.size(), 0);
    g.last_heard_ns = now;
    g.next_heartbeat_ns = now + ns(sh_->cfg.heartbeat_interval);
    if (g.j.mac_key.has_value()) {
      g.mac = std::make_unique<proto::DataMac>();
      if (!g.mac->set_key(*g.j.mac_key)) g.mac.reset();  // every send then fails: see sign()
    }
  }
  std::vector<uint32_t> weights;
  for (const Agg& g : aggs_) weights.push_back(g.j.info.weight);
  striping_ = Striping(weights);
  tx_.reserve(256);
  next_timer_ns_ = INT64_MAX;
  publish_cwnd();
}

void Progress::run() {
  const int64_t spin_ns = int64_t{sh_->cfg.spin_us} * 1000;
  {
    std::lock_guard<std::mutex> lk(sh_->progress_mu);
    last_work_ns_ = now_ns();
  }
  while (!sh_->stop.load(std::memory_order_acquire)) {
    const int64_t claim = sh_->caller_claim_ns.load(std::memory_order_acquire);
    if (const int64_t t = now_ns();
        t < claim && !sh_->has_submissions.load(std::memory_order_acquire)) {
      doze(t);  // a caller polls: it does the I/O (submissions still come here: abort)
      continue;
    }
    std::unique_lock<std::mutex> lk(sh_->progress_mu);
    const int64_t now = now_ns();
    if (step(now)) {
      continue;
    }
    if (now - last_work_ns_ < spin_ns && unfinished_bytes_ <= sh_->cfg.spin_max_bytes) {
      // Spin, but give the core to whatever else is runnable on it (the other ranks, NCCL's
      // proxy thread, a daemon on the same host): a spinner that keeps its core delays the
      // very packets it waits for when threads outnumber cores (4 B at 2 ranks on 2 cores:
      // 2.1 ms with a 2 ms spin, 89 us with the yield).
      lk.unlock();
      std::this_thread::yield();
      continue;
    }
    next_control_ns_ = 0;  // look at the control channels after every sleep
    sleep(now, lk);
  }
}

bool Progress::step(int64_t now) {
  bool work = false;
  if (sh_->has_submissions.load(std::memory_order_acquire)) {
    work |= take_submissions();
  }
  if (!failed_) {
    work |= receive(now);
    if (now >= next_timer_ns_) {
      check_timers(now);
    }
    if (!failed_) {
      work |= send_new(now);
    }
    flush_tx();
    if (!failed_ && now >= next_control_ns_) {
      work |= poll_control(now);
      next_control_ns_ = now + kMs;
    }
  }
  if (work) {
    last_work_ns_ = now;
    return true;
  }
  if (udp_->has_held() && now - last_work_ns_ >= kReorderHoldNs) {
    udp_->release_held();
    last_work_ns_ = now;
    return true;
  }
  return false;
}

bool Progress::take_submissions() {
  std::vector<std::shared_ptr<Request>> batch;
  bool aborting = false;
  std::string abort_reason;
  {
    std::lock_guard<std::mutex> lk(sh_->mu);
    batch.swap(sh_->submitted);
    sh_->has_submissions.store(false, std::memory_order_relaxed);
    if (sh_->abort_requested > sh_->abort_done) {
      aborting = true;
      abort_reason = sh_->abort_reason;
    }
  }
  const uint32_t n_aggs = static_cast<uint32_t>(aggs_.size());
  for (auto& r : batch) {
    if (failed_) {
      std::string why;
      {
        std::lock_guard<std::mutex> lk(sh_->mu);
        why = sh_->fail_reason;
      }
      finish(r.get(), RequestState::kError, why);
      continue;
    }
    r->results_pending = r->plan.n_packets;
    r->next_j.assign(n_aggs, 0);
    for (uint32_t a = 0; a < n_aggs; ++a) {
      if (striping_.packets_on(a, r->plan.n_packets, r->stripe_start) > 0) {
        aggs_[a].send_queue.push_back(r.get());
      }
    }
    if (unfinished_++ == 0) {
      sh_->ctr.busy.begin(static_cast<uint64_t>(now_ns()));
    }
    r->counted_busy = true;
    unfinished_bytes_ += r->bytes();
    publish_bulk();
    active_.push_back(std::move(r));
  }
  if (aborting) {
    fail_engine(abort_reason);
    std::lock_guard<std::mutex> lk(sh_->mu);
    sh_->abort_done = sh_->abort_requested;
    sh_->abort_cv.notify_all();
  }
  return !batch.empty() || aborting;
}

void Progress::finish(Request* r, RequestState st, const std::string& error) {
  if (r->finished) {
    return;
  }
  r->finished = true;
  if (r->counted_busy) {
    unfinished_bytes_ -= r->bytes();
    publish_bulk();
    if (--unfinished_ == 0) {
      sh_->ctr.busy.end(static_cast<uint64_t>(now_ns()));
    }
  }
  r->error = error;
  r->state.store(st, std::memory_order_seq_cst);
  if (sh_->waiters.load(std::memory_order_seq_cst) > 0) {
    // Taking the mutex orders this notify after a waiter's check of the state.
    { std::lock_guard<std::mutex> lk(sh_->mu); }
    sh_->done_cv.notify_all();
  }
  Counters::add(st == RequestState::kDone ? sh_->ctr.requests_completed : sh_->ctr.requests_failed);
  // Drop finished requests from active_ once they are the majority.
  if (++finished_in_active_ > 64 && finished_in_active_ * 2 > active_.size()) {
    std::erase_if(active_, [](const std::shared_ptr<Request>& q) { return q->finished; });
    finished_in_active_ = 0;
  }
}

void Progress::fail_engine(const std::string& reason, int aggregator) {
  if (failed_) {
    return;
  }
  failed_ = true;
  sh_->failed_aggregator.store(aggregator, std::memory_order_relaxed);
  {
    std::lock_guard<std::mutex> lk(sh_->mu);
    if (sh_->fail_reason.empty()) {
      sh_->fail_reason = reason;
    }
  }
  sh_->failed.store(true, std::memory_order_release);
  sh_->log(LogLevel::kError, reason);
  std::vector<std::shared_ptr<Request>> doomed;
  doomed.swap(active_);
  finished_in_active_ = 0;
  for (auto& r : doomed) {
    finish(r.get(), RequestState::kError, reason);
  }
  for (Agg& g : aggs_) {
    g.window.clear();
    g.send_queue.clear();
  }
  tx_.clear();
  next_timer_ns_ = INT64_MAX;
}

int64_t Progress::next_wakeup(int64_t now) const {
  int64_t t = now + kMaxSleepNs;
  if (failed_) {
    return t;
  }
  t = std::min(t, next_timer_ns_);
  for (const Agg& g : aggs_) {
    t = std::min(t, g.next_heartbeat_ns);
    t = std::min(t, g.last_heard_ns + ns(sh_->cfg.aggregator_timeout) + kMs);
  }
  if (udp_->has_held()) {
    t = std::min(t, last_work_ns_ + kReorderHoldNs);
  }
  return t;
}

void Progress::publish_bulk() {
  const bool bulk = unfinished_bytes_ > sh_->cfg.spin_max_bytes;
  if (bulk == sh_->bulk_in_flight.load(std::memory_order_relaxed)) {
    return;
  }
  sh_->bulk_in_flight.store(bulk, std::memory_order_seq_cst);
  if (!bulk) {
    return;
  }
  // A caller's step took a bulk request under a small request's longer claim: cut the claim
  // to a bulk one, and wake a dozing thread to wait for that instead.
  int64_t claim = sh_->caller_claim_ns.load(std::memory_order_seq_cst);
  const int64_t cap = now_ns() + kCallerClaimBulkNs;
  if (claim > cap && sh_->caller_claim_ns.compare_exchange_strong(claim, cap) &&
      sh_->dozing.load(std::memory_order_seq_cst)) {
    sh_->wake();
  }
}

void Progress::doze(int64_t now) {
  Counters::add(sh_->ctr.dozes);
  sh_->dozing.store(true, std::memory_order_seq_cst);
  const int64_t wait = sh_->caller_claim_ns.load(std::memory_order_seq_cst) - now;
  if (wait > 0 && !sh_->has_submissions.load(std::memory_order_seq_cst) &&
      !sh_->stop.load(std::memory_order_seq_cst)) {
    pollfd fd{sh_->wake_fd, POLLIN, 0};
    timespec ts{0, static_cast<long>(wait)};
    if (::ppoll(&fd, 1, &ts, nullptr) > 0) {
      uint64_t v;
      [[maybe_unused]] ssize_t r = ::read(sh_->wake_fd, &v, sizeof v);
    }
  }
  sh_->dozing.store(false, std::memory_order_relaxed);
}

void Progress::sleep(int64_t now, std::unique_lock<std::mutex>& lk) {
  const int64_t wait = std::max<int64_t>(0, next_wakeup(now) - now);
  sh_->sleeping.store(true, std::memory_order_seq_cst);
  if (sh_->has_submissions.load(std::memory_order_seq_cst) ||
      sh_->stop.load(std::memory_order_seq_cst)) {
    sh_->sleeping.store(false, std::memory_order_relaxed);
    return;
  }
  Counters::add(sh_->ctr.progress_sleeps);
  pollfd fds[2 + 2 * 64];  // wake, unicast, per aggregator: control and multicast group
  nfds_t n = 0;
  fds[n++] = {sh_->wake_fd, POLLIN, 0};
  if (!failed_) {
    fds[n++] = {udp_->fd(), POLLIN, 0};
    for (const Agg& g : aggs_) {
      if (n == std::size(fds)) {
        break;
      }
      const short ev = static_cast<short>(POLLIN | (g.j.ctl->want_write() ? POLLOUT : 0));
      fds[n++] = {g.j.ctl->fd(), ev, 0};
      if (g.j.group_rx) {
        fds[n++] = {g.j.group_rx->fd(), POLLIN, 0};
      }
    }
  }
  const int64_t pause = std::min(bulk_pause_ns(), wait);
  lk.unlock();  // a caller may progress while this thread waits
  bool woken = false;
  if (pause > 0) {
    // Results come at the link's pace: let a batch of them gather, listening only for a wake().
    Counters::add(sh_->ctr.bulk_pauses);
    const timespec p{0, static_cast<long>(pause)};
    woken = ::ppoll(fds, 1, &p, nullptr) > 0;
  }
  if (!woken) {
    const int64_t rest = wait - pause;
    timespec ts{static_cast<time_t>(rest / 1'000'000'000), static_cast<long>(rest % 1'000'000'000)};
    ::ppoll(fds, n, &ts, nullptr);
  }
  sh_->sleeping.store(false, std::memory_order_relaxed);
  if (fds[0].revents & POLLIN) {
    uint64_t v;
    [[maybe_unused]] ssize_t r = ::read(sh_->wake_fd, &v, sizeof v);
  }
}

int64_t Progress::bulk_pause_ns() const {
  if (sh_->cfg.bulk_wake.count() <= 0 || unfinished_bytes_ <= sh_->cfg.spin_max_bytes || failed_) {
    return 0;
  }
  // A quarter of the shortest smoothed round trip: the window, sized for the round trip, keeps
  // the link busy while the results of a quarter of it wait. No sample yet: no pause.
  double srtt_us = 0;
  for (const Agg& g : aggs_) {
    if (g.alive && g.srtt_us > 0 && (srtt_us == 0 || g.srtt_us < srtt_us)) srtt_us = g.srtt_us;
  }
  const auto by_rtt = static_cast<int64_t>(srtt_us * 1000 / 4);
  return std::min({ns(sh_->cfg.bulk_wake), by_rtt, int64_t{999'999'999}});  // one timespec
}

void Progress::leave() {
  for (Agg& g : aggs_) {
    if (!g.alive || g.j.ctl == nullptr || g.j.ctl->fd() < 0) {
      continue;
    }
    std::string err;
    g.j.ctl->send(proto::Leave{}, &err);
    g.j.ctl->close();
  }
  for (Agg& g : aggs_) {
    g.j.group_rx.reset();  // leaves the multicast group
  }
  std::vector<std::shared_ptr<Request>> doomed;
  doomed.swap(active_);
  finished_in_active_ = 0;
  for (auto& r : doomed) {
    finish(r.get(), RequestState::kError, "engine destroyed");
  }
}

}  // namespace conflux::client
