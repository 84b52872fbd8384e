#include "collnet/coll_comm.h"

#include <sched.h>

#include <algorithm>
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

std::vector<std::pair<size_t, size_t>> owned_ranges(const CollWindow& w, int nranks,
                                                    size_t esize) {
  std::vector<std::pair<size_t, size_t>> owned(static_cast<size_t>(nranks), {0, 0});
  const size_t win_end = w.offset + w.bytes;
  for (int k = 0; k < nranks; ++k) {
    const size_t lo = std::max(w.offset, static_cast<size_t>(k) * w.bytes_per_rank);
    const size_t hi = std::min(win_end, static_cast<size_t>(k + 1) * w.bytes_per_rank);
    if (lo < hi) owned[static_cast<size_t>(k)] = {(lo - w.offset) / esize, (hi - w.offset) / esize};
  }
  return owned;
}

void CollComm::submit(CollRequest* r, bool agg_capable) {
  r->seq = next_seq_++;
  // The split depends only on values every rank shares (count, dtype, op, the fraction and
  // the aggregators' capabilities agreed at connect), so it is identical on every rank.
  const bool agg_ok = agg_capable && engine_ != nullptr && engine_->supports(r->dtype, r->op);
  r->agg_count = agg_ok ? static_cast<size_t>(static_cast<double>(r->count) *
                                              (1.0 - opts_.ring_fraction))
                        : 0;
  if (r->agg_count > 0 && !degraded()) {
    const uint8_t* src = r->send;
    if (r->send == r->recv) {
      r->staging.assign(r->send, r->send + r->agg_count * dtype_size(r->dtype));
      src = r->staging.data();
    }
    r->agg_handle = engine_->allreduce(src, r->recv, r->agg_count, r->dtype, r->op);
  }
  {
    std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(r);
  }
  cv_.notify_one();
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
  submit(r, /*agg_capable=*/true);
  *out = r;
  return net::Status::kOk;
}

net::Status CollComm::ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                                     const CollWindow& w, DType dtype, Op op,
                                     CollRequest** out) {
  auto* r = new CollRequest;
  r->kind = CollKind::kReduceScatter;
  r->dtype = dtype;
  r->op = op;
  r->bytes = w.bytes;
  r->count = w.bytes / dtype_size(dtype);
  // The input is gathered once into a contiguous copy: the engine and the ring read it,
  // and a failover redoes the aggregators' share from it.
  r->staging.reserve(w.bytes);
  for (const CollPart& p : send_parts) r->staging.insert(r->staging.end(), p.address, p.address + p.size);
  r->work.resize(w.bytes);
  r->send = r->staging.data();
  r->recv = r->work.data();
  r->owned = owned_ranges(w, nranks_, dtype_size(dtype));
  r->own_out = static_cast<uint8_t*>(recv);
  submit(r, /*agg_capable=*/true);
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
  submit(r, /*agg_capable=*/false);
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

RingPlan CollComm::ring_plan(const CollRequest& r, size_t lo, size_t hi) const {
  if (r.kind == CollKind::kAllReduce) return {};
  std::vector<std::pair<size_t, size_t>> clipped(r.owned.size(), {0, 0});
  for (size_t k = 0; k < r.owned.size(); ++k) {
    const size_t a = std::max(r.owned[k].first, lo), b = std::min(r.owned[k].second, hi);
    if (a < b) clipped[k] = {a - lo, b - lo};
  }
  const bool rs = r.kind == CollKind::kReduceScatter;
  return RingPlan::by_owner(clipped, /*reduce_scatter=*/rs, /*all_gather=*/!rs);
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

bool CollComm::ring(CollRequest& r, const uint8_t* send, size_t lo, size_t hi, int tag,
                    std::string* error) {
  if (hi <= lo) return true;
  const size_t esize = dtype_size(r.dtype), count = hi - lo;
  const uint8_t* src = send + lo * esize;
  uint8_t* dst = r.recv + lo * esize;
  if (ring_failed_.load(std::memory_order_relaxed)) {
    *error = "the worker ring failed earlier";
    return false;
  }
  if (nranks_ == 1) {
    if (src != dst) std::memmove(dst, src, count * esize);
    return true;
  }
  RingLinks links{rank_, nranks_, next_.get(), prev_.get()};
  RingAllreduce op(links, src, dst, count, r.dtype, r.op, tag, opts_.ring_block_bytes,
                   opts_.ring_inflight, scratch_.data(), ring_plan(r, lo, hi));
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
    // 1. The ring share, while the aggregators work on theirs.
    bool ok = ring(*r, r->send, r->agg_count, r->count, ring_tag(r->seq, 0), &error);
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
        ok = ring(*r, src, 0, r->agg_count, ring_tag(r->seq, 1), &error);
      }
    }
    if (ok) deliver(*r);
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.pop_front();
    }
    finish(*r, ok, error);
  }
}

}  // namespace conflux::collnet
