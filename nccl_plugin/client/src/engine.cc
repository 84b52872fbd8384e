// SPDX-License-Identifier: Apache-2.0
#include "conflux/client/engine.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <thread>

#include "conflux/common/thread_name.h"
#include "fault.h"
#include "progress.h"

namespace conflux::client {

// Owns the shared state, the socket, the progress state and the thread.
class Engine::Impl {
 public:
  explicit Impl(const ClientConfig& cfg) : sh(cfg) {}
  ~Impl() {
    if (thread.joinable()) {
      sh.stop.store(true, std::memory_order_seq_cst);
      sh.wake();
      thread.join();
    }
    if (progress) {
      progress->leave();
    }
    if (sh.wake_fd >= 0) {
      ::close(sh.wake_fd);
    }
  }

  // Caller progress (ClientConfig::caller_progress): claims the I/O for this caller and runs
  // one step unless another thread is in one. Must not be called with sh.mu held.
  void caller_step() {
    if (!sh.cfg.caller_progress) {
      return;
    }
    const int64_t now = now_ns();  // one clock read per poll: this runs in NCCL's spin loop
    const int64_t hold =
        sh.bulk_in_flight.load(std::memory_order_relaxed) ? kCallerClaimBulkNs : kCallerClaimNs;
    sh.caller_claim_ns.store(now + hold, std::memory_order_release);
    std::unique_lock<std::mutex> lk(sh.progress_mu, std::try_to_lock);
    if (lk.owns_lock() && progress->step(now)) {
      Counters::add(sh.ctr.caller_steps);
    }
  }
  // A caller about to sleep gives the I/O back to the progress thread at once: a dozing
  // thread takes over, a sleeping one recomputes its deadline (the caller's steps may have
  // sent packets whose retransmission timers fall before it).
  void caller_leaves() {
    if (!sh.cfg.caller_progress) {
      return;
    }
    sh.caller_claim_ns.store(0, std::memory_order_seq_cst);
    if (sh.dozing.load(std::memory_order_seq_cst) || sh.sleeping.load(std::memory_order_seq_cst)) {
      sh.wake();
    }
  }

  Shared sh;
  UdpChannel udp;
  std::vector<AggregatorInfo> infos;
  uint32_t payload_bytes = 0;
  std::unique_ptr<Progress> progress;
  std::thread thread;
};

void Shared::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(wake_fd, &one, sizeof one);
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Engine::~Engine() = default;

namespace {

// Keeps the aggregators every rank joined (ClientConfig::join_agree); closing the others'
// control connections ends this rank's part of their jobs.
Status keep_agreed(const ClientConfig& cfg, const std::string& refused,
                   std::vector<JoinedAggregator>* joined) {
  uint64_t mine = 0;
  for (size_t i = 0; i < joined->size(); ++i) {
    if ((*joined)[i].ctl) {
      mine |= uint64_t{1} << i;
    }
  }
  uint64_t agreed = 0;
  CFX_TRY(cfg.join_agree(mine, refused, &agreed));
  std::vector<JoinedAggregator> kept;
  for (size_t i = 0; i < joined->size(); ++i) {
    if (((agreed & mine) >> i) & 1) {
      kept.push_back(std::move((*joined)[i]));
    }
  }
  *joined = std::move(kept);
  if (joined->empty()) {
    return unavailable("no aggregator joined on every rank" +
                       (refused.empty() ? "" : ": " + refused));
  }
  return {};
}

// The engine's INFO line on what it joined, and a warning when the UDP receive buffer cannot
// hold the whole window.
void log_joined(const ClientConfig& cfg, const std::vector<AggregatorInfo>& infos, int rcvbuf_bytes,
                bool gso, bool gro) {
  // Every outstanding packet may be answered at once: the socket must hold them all.
  size_t window_bytes = 0;
  for (const AggregatorInfo& a : infos) {
    window_bytes += size_t{a.granted_slots} * (proto::kDataHeaderSize + a.payload_bytes +
                                               (a.data_mac ? proto::kMacTrailerSize : 0));
  }
  if (cfg.log && static_cast<size_t>(rcvbuf_bytes) / 2 < window_bytes) {
    cfg.log(LogLevel::kWarn, "UDP receive buffer (" + std::to_string(rcvbuf_bytes / 2) +
                                 " B usable) is smaller than the window (" +
                                 std::to_string(window_bytes) +
                                 " B): results may be dropped; raise net.core.rmem_max");
  }
  if (cfg.log) {
    std::string msg = "joined job " + std::to_string(cfg.job_key) + " as rank " +
                      std::to_string(cfg.rank) + "/" + std::to_string(cfg.n_workers) + " on " +
                      std::to_string(infos.size()) + " aggregator(s):";
    for (const AggregatorInfo& a : infos) {
      msg += " " + a.address + " (job " + std::to_string(a.job_id) + ", " +
             std::to_string(a.granted_slots) + " slots, " + std::to_string(a.payload_bytes) + " B" +
             (a.deterministic ? ", deterministic" : "") + (a.data_mac ? ", data MAC" : "") +
             (cfg.stripe_weights.empty() ? "" : ", weight " + std::to_string(a.weight)) + ")";
    }
    msg += std::string("; UDP GSO ") + (gso ? "on" : "off") + ", GRO " + (gro ? "on" : "off");
    cfg.log(LogLevel::kInfo, msg);
  }
}

}  // namespace

std::unique_ptr<Engine> Engine::create(const ClientConfig& user_cfg, std::string* error) {
  auto fail = [&](const std::string& msg) -> std::unique_ptr<Engine> {
    if (error != nullptr) {
      *error = msg;
    }
    if (user_cfg.log) {
      user_cfg.log(LogLevel::kError, msg);
    }
    return nullptr;
  };
  try {
    ClientConfig cfg = user_cfg;
    // A live aggregator must be heard from well within aggregator_timeout.
    cfg.heartbeat_interval =
        std::min(cfg.heartbeat_interval,
                 std::chrono::duration_cast<std::chrono::milliseconds>(cfg.aggregator_timeout / 2));
    if (Status st = validate(cfg); !st.ok()) {
      return fail("invalid client config: " + st.message());
    }
    auto impl = std::make_unique<Impl>(cfg);
    impl->sh.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (impl->sh.wake_fd < 0) {
      return fail("eventfd failed");
    }
    if (Status st = impl->udp.open(cfg.bind_addr, cfg.socket_buffer_bytes,
                                   proto::kDataHeaderSize + cfg.payload_bytes, &impl->sh.ctr,
                                   cfg.udp_offload);
        !st.ok()) {
      return fail(st.message());
    }
    arm_faults(impl->udp, cfg);

    std::vector<JoinedAggregator> joined;
    std::string refused;
    Status st = join_all(cfg, impl->udp.port(), &joined, &refused);
    if (st.ok() && cfg.join_agree) st = keep_agreed(cfg, refused, &joined);
    if (st.ok()) st = agree_multicast(cfg, &impl->sh.ctr, &joined);
    if (!st.ok()) {
      return fail(st.message());
    }

    impl->payload_bytes = UINT32_MAX;
    uint64_t grant_sum = 0;
    for (const JoinedAggregator& j : joined) {
      impl->infos.push_back(j.info);
      impl->sh.grants.push_back(j.info.share_mbps);  // no other thread yet
      grant_sum += j.info.share_mbps;
      impl->payload_bytes = std::min(impl->payload_bytes, j.info.payload_bytes);
    }
    impl->sh.ctr.grant_mbps.store(grant_sum, std::memory_order_relaxed);
    impl->progress =
        std::make_unique<Progress>(&impl->sh, &impl->udp, std::move(joined), impl->payload_bytes);
    Progress* p = impl->progress.get();
    impl->thread = std::thread([p] {
      name_this_thread("cfx-engine");
      p->run();
    });

    log_joined(cfg, impl->infos, impl->udp.rcvbuf_bytes(), impl->udp.gso(), impl->udp.gro());
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  } catch (const std::exception& e) {
    return fail(std::string("engine creation failed: ") + e.what());
  } catch (...) {
    return fail("engine creation failed");
  }
}

uint64_t Engine::allreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                           ResultCopy tail) {
  return submit(send, recv, count, dtype, op, -1, 0, tail);
}

uint64_t Engine::reduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                        uint32_t root, uint32_t stripe_start) {
  return submit(send, recv, count, dtype, op, root > INT32_MAX ? INT32_MAX : int32_t(root),
                stripe_start, {});
}

uint64_t Engine::submit(const void* send, void* recv, size_t count, DType dtype, Op op,
                        int32_t root, uint32_t stripe_start, ResultCopy tail) {
  try {
    Shared& sh = impl_->sh;
    auto r = std::make_shared<Request>();
    r->send = static_cast<const uint8_t*>(send);
    r->recv = static_cast<uint8_t*>(recv);
    r->dtype = dtype;
    r->op = op;
    r->root = root;
    r->stripe_start = stripe_start;
    r->tail = tail;
    if (!valid_dtype(static_cast<uint32_t>(dtype)) || !valid_op(static_cast<uint32_t>(op))) {
      r->early_error = "invalid dtype or op";
    } else if (root >= 0 && static_cast<uint32_t>(root) >= sh.cfg.n_workers) {
      r->early_error = "reduce root " + std::to_string(root) + " is not a rank of the " +
                       std::to_string(sh.cfg.n_workers) + "-rank job";
    } else if (count > 0 &&
               (send == nullptr || (r->receives_result(sh.cfg.rank) && recv == nullptr))) {
      r->early_error = "null buffer";
    } else if (!supports(dtype, op)) {
      r->early_error = "the aggregators do not support " + std::string(dtype_name(dtype)) + " " +
                       std::string(op_name(op));
    } else {
      r->plan = plan_packets(count, dtype, impl_->payload_bytes);
    }
    uint64_t id = 0;
    bool queued = false;
    {
      std::lock_guard<std::mutex> lk(sh.mu);
      id = sh.next_id++;
      r->id = id;
      if (r->early_error.empty() && sh.failed.load(std::memory_order_acquire)) {
        r->early_error = sh.fail_reason;
      }
      if (!r->early_error.empty()) {
        r->error = r->early_error;
        r->state.store(RequestState::kError, std::memory_order_release);
      } else if (r->plan.n_packets == 0) {
        r->state.store(RequestState::kDone, std::memory_order_release);  // count == 0
      } else {
        sh.submitted.push_back(r);
        sh.has_submissions.store(true, std::memory_order_seq_cst);
        queued = true;
      }
      sh.requests.emplace(id, std::move(r));
    }
    if (queued) {
      impl_->caller_step();  // the first packets leave from this thread
    }
    // A sleeping progress thread learns of the new timers (a dozing one follows the caller).
    if (sh.sleeping.load(std::memory_order_seq_cst)) {
      sh.wake();
    }
    return id;
  } catch (...) {
    return 0;  // out of memory; test(0) reports kError
  }
}

RequestState Engine::test(uint64_t request, std::string* error) {
  return wait(request, std::chrono::microseconds(0), error);
}

RequestState Engine::poll_done(uint64_t request) {
  Shared& sh = impl_->sh;
  try {
    impl_->caller_step();
    std::lock_guard<std::mutex> lk(sh.mu);
    const auto it = sh.requests.find(request);
    if (it == sh.requests.end()) {
      return RequestState::kError;
    }
    const RequestState st = it->second->state.load(std::memory_order_acquire);
    if (st == RequestState::kDone) {
      sh.requests.erase(it);
    }
    return st;
  } catch (...) {
    return RequestState::kError;  // the handle stays for wait() to report
  }
}

RequestState Engine::wait(uint64_t request, std::chrono::microseconds max_wait,
                          std::string* error) {
  Shared& sh = impl_->sh;
  try {
    const auto deadline = std::chrono::steady_clock::now() + max_wait;  // polling counts too
    impl_->caller_step();
    std::unique_lock<std::mutex> lk(sh.mu);
    auto it = sh.requests.find(request);
    if (it == sh.requests.end()) {
      if (error != nullptr) {
        *error = "unknown request " + std::to_string(request);
      }
      return RequestState::kError;
    }
    const std::shared_ptr<Request> r = it->second;
    if (max_wait.count() > 0 && sh.cfg.caller_progress &&
        r->state.load(std::memory_order_acquire) == RequestState::kPending) {
      // Poll for up to the spin time (a small request's result is a round trip away), then
      // hand the I/O back and sleep. A bulk request's packets are paced by the link: its
      // waiter sleeps at once, and the progress thread wakes for each packet.
      lk.unlock();
      if (r->bytes() <= sh.cfg.spin_max_bytes) {
        const auto until = std::min(
            deadline, std::chrono::steady_clock::now() + std::chrono::microseconds(sh.cfg.spin_us));
        while (r->state.load(std::memory_order_acquire) == RequestState::kPending &&
               std::chrono::steady_clock::now() < until) {
          std::this_thread::yield();
          impl_->caller_step();
        }
      }
      if (r->state.load(std::memory_order_acquire) == RequestState::kPending) {
        impl_->caller_leaves();
      }
      lk.lock();
    }
    if (max_wait.count() > 0 &&
        r->state.load(std::memory_order_seq_cst) == RequestState::kPending) {
      sh.waiters.fetch_add(1, std::memory_order_seq_cst);
      sh.done_cv.wait_until(lk, deadline, [&] {
        return r->state.load(std::memory_order_seq_cst) != RequestState::kPending;
      });
      sh.waiters.fetch_sub(1, std::memory_order_seq_cst);
    }
    const RequestState st = r->state.load(std::memory_order_acquire);
    if (st == RequestState::kPending) {
      return st;
    }
    if (st == RequestState::kError && error != nullptr) {
      *error = r->error;
    }
    sh.requests.erase(request);
    return st;
  } catch (...) {
    return RequestState::kError;  // out of memory copying the message
  }
}

void Engine::abort(std::string_view reason) {
  Shared& sh = impl_->sh;
  try {
    std::unique_lock<std::mutex> lk(sh.mu);
    sh.abort_reason = reason.empty() ? "aborted" : std::string(reason);
    const uint64_t ticket = ++sh.abort_requested;
    sh.has_submissions.store(true, std::memory_order_seq_cst);
    sh.wake();
    sh.abort_cv.wait(lk, [&] { return sh.abort_done >= ticket; });
  } catch (...) {
  }
}

bool Engine::healthy(std::string* why) const {
  Shared& sh = impl_->sh;
  if (!sh.failed.load(std::memory_order_acquire)) {
    return true;
  }
  if (why != nullptr) {
    try {
      std::lock_guard<std::mutex> lk(sh.mu);
      *why = sh.fail_reason;
    } catch (...) {
    }
  }
  return false;
}

int Engine::failed_aggregator() const {
  return impl_->sh.failed_aggregator.load(std::memory_order_relaxed);
}

bool Engine::supports(DType dtype, Op op) const {
  if (!valid_dtype(static_cast<uint32_t>(dtype)) || !valid_op(static_cast<uint32_t>(op))) {
    return false;
  }
  if (impl_->payload_bytes < dtype_size(dtype)) {
    return false;
  }
  const unsigned bit = static_cast<unsigned>(dtype) * 4 + static_cast<unsigned>(op);
  for (const AggregatorInfo& a : impl_->infos) {
    if (((a.support_mask >> bit) & 1) == 0) {
      return false;
    }
  }
  return true;
}

const std::vector<AggregatorInfo>& Engine::aggregators() const { return impl_->infos; }

std::vector<uint32_t> Engine::grants() const {
  std::lock_guard<std::mutex> lk(impl_->sh.mu);
  return impl_->sh.grants;
}
uint32_t Engine::payload_bytes() const { return impl_->payload_bytes; }
uint32_t Engine::stripe_period() const {
  uint32_t period = 0;
  for (const AggregatorInfo& a : impl_->infos) period += a.weight;
  return std::max<uint32_t>(1, period);
}
uint16_t Engine::udp_port() const { return impl_->udp.port(); }
EngineStats Engine::stats() const {
  EngineStats s = impl_->sh.ctr.snapshot();
  s.bulk_in_flight = impl_->sh.bulk_in_flight.load(std::memory_order_relaxed);
  return s;
}

}  // namespace conflux::client
