#include "collnet/coll_comm.h"

#include <sched.h>

#include <cstring>

#include "net/log.h"

namespace conflux::collnet {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int> g_live_comms{0};

int ring_tag(uint32_t seq, int phase) { return static_cast<int>(((seq << 1) | phase) & 0x3fffffff); }

}  // namespace

CollComm::CollComm(int rank, int nranks, std::unique_ptr<net::SendComm> next,
                   std::unique_ptr<net::RecvComm> prev, std::unique_ptr<client::Engine> engine,
                   const CollOptions& opts)
    : rank_(rank),
      nranks_(nranks),
      next_(std::move(next)),
      prev_(std::move(prev)),
      engine_(std::move(engine)),
      opts_(opts),
      scratch_(opts.ring_block_bytes * static_cast<size_t>(opts.ring_inflight)) {
  thread_ = std::thread([this] { run(); });
  g_live_comms.fetch_add(1, std::memory_order_relaxed);
}

int CollComm::live_count() { return g_live_comms.load(std::memory_order_relaxed); }

CollComm::~CollComm() {
  stopping_.store(true, std::memory_order_release);
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  // The engine may hold user buffers of unfinished requests; stop it touching them first.
  // (NCCL closes a communicator only once its requests are done; the queue is then empty.)
  bool pending;
  {
    std::lock_guard<std::mutex> lk(mu_);
    pending = !queue_.empty();
  }
  if (engine_ && pending) engine_->abort("CollNet communicator closed with requests pending");
  if (thread_.joinable()) thread_.join();
  for (CollRequest* r : queue_) delete r;
  engine_.reset();
  g_live_comms.fetch_sub(1, std::memory_order_relaxed);
  magic_ = 0;
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
  r->seq = next_seq_++;
  // The split depends only on values every rank shares (count, dtype, op, the fraction and
  // the aggregators' capabilities agreed at connect), so it is identical on every rank.
  const bool agg_ok = engine_ != nullptr && engine_->supports(dtype, op);
  r->agg_count = agg_ok ? static_cast<size_t>(static_cast<double>(count) *
                                              (1.0 - opts_.ring_fraction))
                        : 0;
  if (r->agg_count > 0 && !degraded()) {
    const uint8_t* src = r->send;
    if (send == recv) {
      r->staging.assign(r->send, r->send + r->agg_count * dtype_size(dtype));
      src = r->staging.data();
    }
    r->agg_handle = engine_->allreduce(src, r->recv, r->agg_count, dtype, op);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(r);
  }
  cv_.notify_one();
  *out = r;
  return net::Status::kOk;
}

net::Status CollComm::test(CollRequest* req, bool* done, size_t* bytes) {
  const int s = req->state.load(std::memory_order_acquire);
  *done = s != 0;
  if (s == 0) return net::Status::kOk;
  if (bytes != nullptr) *bytes = req->bytes;
  const bool failed = s == 2;
  if (failed) {
    CFX_WARN(net::kLogColl, "CollNet AllReduce #%u (%zu elements) failed: %s", req->seq,
             req->count, req->error.c_str());
  }
  delete req;
  return failed ? net::Status::kRemoteError : net::Status::kOk;
}

void CollComm::finish(CollRequest& r, bool ok, const std::string& error) {
  if (!ok) r.error = error;
  r.state.store(ok ? 1 : 2, std::memory_order_release);
}

bool CollComm::ring(CollRequest& r, const uint8_t* send, uint8_t* recv, size_t count, int tag,
                    std::string* error) {
  if (count == 0) return true;
  if (ring_failed_.load(std::memory_order_relaxed)) {
    *error = "the worker ring failed earlier";
    return false;
  }
  if (nranks_ == 1) {
    if (send != recv) std::memmove(recv, send, count * dtype_size(r.dtype));
    return true;
  }
  RingLinks links{rank_, nranks_, next_.get(), prev_.get()};
  RingAllreduce op(links, send, recv, count, r.dtype, r.op, tag, opts_.ring_block_bytes,
                   opts_.ring_inflight, scratch_.data());
  auto last_progress = Clock::now();
  uint64_t last_blocks = 0;
  for (;;) {
    bool done = false;
    const net::Status st = op.progress(&done);
    if (st != net::Status::kOk) {
      *error = std::string("worker ring: ") + net::toString(st);
      ring_failed_ = true;
      return false;
    }
    if (done) return true;
    if (stopping_.load(std::memory_order_acquire)) {
      *error = "communicator closed";
      return false;
    }
    const auto now = Clock::now();
    if (op.completed_blocks() != last_blocks) {
      last_blocks = op.completed_blocks();
      last_progress = now;
    } else if (now - last_progress > opts_.ring_timeout) {
      *error = "worker ring made no progress for " +
               std::to_string(opts_.ring_timeout.count()) + " ms";
      ring_failed_ = true;
      return false;
    }
    // The transport's helper threads move the bytes; yield between checks.
    sched_yield();
  }
}

bool CollComm::wait_aggregators(CollRequest& r, std::string* why) {
  if (r.agg_handle == 0) return false;
  for (;;) {
    const client::Status s = engine_->test(r.agg_handle, why);
    if (s == client::Status::kDone) return true;
    if (s == client::Status::kError) return false;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (stop_) {
        *why = "communicator closed";
        return false;
      }
    }
    sched_yield();
  }
}

void CollComm::run() {
  for (;;) {
    CollRequest* r = nullptr;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
      if (stop_) return;
      r = queue_.front();
    }
    std::string error;
    const size_t esize = dtype_size(r->dtype);
    // 1. The ring share, while the aggregators work on theirs.
    bool ok = ring(*r, r->send + r->agg_count * esize, r->recv + r->agg_count * esize,
                   r->count - r->agg_count, ring_tag(r->seq, 0), &error);
    // 2. The aggregators' share; on failure, redo it over the ring.
    if (ok && r->agg_count > 0) {
      std::string why;
      if (!wait_aggregators(*r, &why)) {
        if (!degraded_.exchange(true)) {
          CFX_WARN(net::kLogColl,
                   "Conflux aggregators failed (%s); this and every later collective of "
                   "this communicator runs over the worker ring",
                   why.empty() ? "engine unavailable" : why.c_str());
        }
        const uint8_t* src = r->staging.empty() ? r->send : r->staging.data();
        ok = ring(*r, src, r->recv, r->agg_count, ring_tag(r->seq, 1), &error);
      }
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.pop_front();
    }
    finish(*r, ok, error);
  }
}

}  // namespace conflux::collnet
