// SPDX-License-Identifier: Apache-2.0
#include "collnet/staging.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <tuple>
#include <unordered_set>

#include "collnet/coll_comm.h"
#include "net/log.h"

namespace conflux::collnet {
namespace {

using net::kLogColl;

cuda::CUdeviceptr dptr(const void* p) {
  return static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

// [lo, hi) of the nranks * bytes_per_rank buffer that `rank` owns inside [from, to).
std::pair<size_t, size_t> owned_in(const CollWindow& w, int rank, size_t from, size_t to) {
  const size_t lo = std::max(from, static_cast<size_t>(rank) * w.bytes_per_rank);
  const size_t hi = std::min(to, static_cast<size_t>(rank + 1) * w.bytes_per_rank);
  return {lo, std::max(lo, hi)};
}

}  // namespace

Staging::Staging(CollComm& comm, const StagingOptions& opts) : comm_(comm), opts_(opts) {}

Staging::~Staging() {
  // NCCL closes a communicator once its requests are done; whatever is left is freed here.
  std::unordered_set<StagedRequest*> left;
  for (Chunk& c : queue_) left.insert(c.req);
  for (StagedRequest* r : left) {
    r->magic = 0;
    delete r;
  }
  if (cuda_ == nullptr || ctx_ == nullptr) return;
  cuda::ScopedContext scope(*cuda_, ctx_);
  if (scope.rc != cuda::CUDA_SUCCESS) return;  // the context is gone: nothing to free in it
  if (to_host_ != nullptr) cuda_->cuStreamSynchronize(to_host_);
  if (to_device_ != nullptr) cuda_->cuStreamSynchronize(to_device_);
  for (Slot& s : slots_) {
    if (s.copied_in != nullptr) cuda_->cuEventDestroy(s.copied_in);
    if (s.copied_out != nullptr) cuda_->cuEventDestroy(s.copied_out);
  }
  if (pool_ != nullptr) cuda_->cuMemFreeHost(pool_);
  if (to_host_ != nullptr) cuda_->cuStreamDestroy(to_host_);
  if (to_device_ != nullptr) cuda_->cuStreamDestroy(to_device_);
}

net::Status Staging::make_pool_locked(cuda::CUcontext ctx) {
  cuda::ScopedContext scope(*cuda_, ctx);
  const size_t half = opts_.chunk_bytes;
  const size_t n = static_cast<size_t>(opts_.slots);
  auto failed = [&](const char* call, cuda::CUresult rc) {
    CFX_WARN(kLogColl, "CollNet regMr: making %zu pinned staging slots of 2 x %zu bytes: %s", n,
             half, cuda::error_text(*cuda_, call, rc).c_str());
    return net::Status::kUnhandledCudaError;
  };
  if (scope.rc != cuda::CUDA_SUCCESS) return failed("cuCtxPushCurrent", scope.rc);
  cuda::CUresult rc = cuda_->cuStreamCreate(&to_host_, cuda::CU_STREAM_NON_BLOCKING);
  if (rc != cuda::CUDA_SUCCESS) return failed("cuStreamCreate", rc);
  rc = cuda_->cuStreamCreate(&to_device_, cuda::CU_STREAM_NON_BLOCKING);
  if (rc != cuda::CUDA_SUCCESS) return failed("cuStreamCreate", rc);
  rc = cuda_->cuMemHostAlloc(&pool_, n * 2 * half, cuda::CU_MEMHOSTALLOC_PORTABLE);
  if (rc != cuda::CUDA_SUCCESS) {
    pool_ = nullptr;
    return failed("cuMemHostAlloc", rc);
  }
  slots_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Slot& s = slots_[i];
    s.send = static_cast<uint8_t*>(pool_) + 2 * i * half;
    s.recv = s.send + half;
    rc = cuda_->cuEventCreate(&s.copied_in, cuda::CU_EVENT_DISABLE_TIMING);
    if (rc == cuda::CUDA_SUCCESS)
      rc = cuda_->cuEventCreate(&s.copied_out, cuda::CU_EVENT_DISABLE_TIMING);
    if (rc != cuda::CUDA_SUCCESS) return failed("cuEventCreate", rc);
  }
  for (size_t i = n; i-- > 0;) free_slots_.push_back(static_cast<int>(i));
  ctx_ = ctx;
  CFX_INFO(kLogColl, "CollNet: device memory staged through %zu pinned slots of 2 x %zu bytes", n,
           half);
  return net::Status::kOk;
}

net::Status Staging::register_device(void* data, size_t size) {
  std::lock_guard<std::mutex> lk(mu_);
  if (cuda_ == nullptr) {
    const conflux::Status loaded = cuda::driver(&cuda_);
    if (!loaded.ok()) {
      CFX_WARN(kLogColl, "CollNet regMr: CUDA memory at %p (%zu bytes) cannot be staged: %s", data,
               size, loaded.message().c_str());
      return net::Status::kSystemError;
    }
  }
  cuda::CUcontext ctx = nullptr;
  if (!cuda::is_device_pointer(*cuda_, data, &ctx)) {
    CFX_WARN(kLogColl, "CollNet regMr: %p (%zu bytes) is not device memory that CUDA knows", data,
             size);
    return net::Status::kInvalidArgument;
  }
  if (ctx_ == nullptr) {
    // A half-made pool of an earlier failure is released by the destructor only: refuse.
    if (to_host_ != nullptr) return net::Status::kUnhandledCudaError;
    CFX_RETURN_IF_ERROR(make_pool_locked(ctx));
  } else if (ctx != ctx_) {
    CFX_WARN(kLogColl,
             "CollNet regMr: device memory at %p belongs to another CUDA context than the "
             "communicator's first registration",
             data);
    return net::Status::kInvalidUsage;
  }
  regions_.push_back({reinterpret_cast<uintptr_t>(data), size});
  return net::Status::kOk;
}

void Staging::deregister_device(void* data) {
  std::lock_guard<std::mutex> lk(mu_);
  const auto base = reinterpret_cast<uintptr_t>(data);
  auto it = std::find_if(regions_.begin(), regions_.end(),
                         [base](const Region& r) { return r.base == base; });
  if (it != regions_.end()) regions_.erase(it);
}

bool Staging::is_device(const void* p, size_t bytes) const {
  if (p == nullptr || bytes == 0) return false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  for (const Region& r : regions_) {
    if (a >= r.base && a - r.base < r.size) return true;
  }
  cuda::CUcontext ctx = nullptr;
  return cuda_ != nullptr && ctx_ != nullptr && cuda::is_device_pointer(*cuda_, p, &ctx);
}

std::vector<Staging::Chunk> Staging::allreduce_chunks(const uint8_t* send, uint8_t* recv,
                                                      size_t count, DType dtype, Op op) {
  const size_t esize = dtype_size(dtype);
  const size_t total = count * esize;
  const size_t per = std::max(esize, opts_.chunk_bytes / esize * esize);
  const bool dsend = is_device(send, total), drecv = is_device(recv, total);
  std::vector<Chunk> chunks;
  for (size_t off = 0; off < total || chunks.empty(); off += per) {
    const size_t n = std::min(per, total - off);
    Chunk c;
    c.bytes = n;
    c.staged = n > 0 && (dsend || drecv);
    if (c.staged) {
      c.in.push_back({const_cast<uint8_t*>(send) + off, 0, n, dsend});
      c.out.push_back({recv + off, 0, n, drecv});
    }
    c.post = [this, send, recv, off, n, esize, dtype, op](uint8_t* s, uint8_t* r,
                                                          CollRequest** out) {
      return comm_.iallreduce(s != nullptr ? s : send + off, r != nullptr ? r : recv + off,
                              n / esize, dtype, op, out);
    };
    chunks.push_back(std::move(c));
    if (total == 0) break;
  }
  return chunks;
}

std::vector<bool> Staging::device_parts(const std::vector<CollPart>& parts) const {
  std::vector<bool> device;
  device.reserve(parts.size());
  for (const CollPart& p : parts) device.push_back(is_device(p.address, p.size));
  return device;
}

void Staging::cut_parts(const std::vector<CollPart>& parts, const std::vector<bool>& device,
                        size_t from, size_t bytes, std::vector<CollPart>* sub,
                        std::vector<Piece>* pieces) {
  size_t pos = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const CollPart& p = parts[i];
    const size_t lo = std::max(pos, from), hi = std::min(pos + p.size, from + bytes);
    if (hi > lo) {
      sub->push_back({p.address + (lo - pos), hi - lo});
      pieces->push_back({p.address + (lo - pos), lo - from, hi - lo, device[i]});
    }
    pos += p.size;
  }
}

std::vector<Staging::Chunk> Staging::subwindow_chunks(const CollWindow& w, size_t per,
                                                      const SubwindowFn& fill) const {
  const size_t own_lo = owned_in(w, comm_.rank(), w.offset, w.offset + w.bytes).first;
  std::vector<Chunk> chunks;
  for (size_t a = 0; a < w.bytes || chunks.empty(); a += per) {
    Subwindow sw;
    sw.from = a;
    sw.window = {w.bytes_per_rank, w.offset + a, std::min(per, w.bytes - a)};
    std::tie(sw.own_lo, sw.own_hi) =
        owned_in(w, comm_.rank(), sw.window.offset, sw.window.offset + sw.window.bytes);
    sw.own_at = sw.own_hi > sw.own_lo ? sw.own_lo - own_lo : 0;
    Chunk c;
    c.bytes = sw.window.bytes;
    fill(sw, c);
    chunks.push_back(std::move(c));
    if (w.bytes == 0) break;
  }
  return chunks;
}

std::vector<Staging::Chunk> Staging::reducescatter_chunks(const std::vector<CollPart>& parts,
                                                          uint8_t* recv, const CollWindow& w,
                                                          DType dtype, Op op) {
  const size_t esize = dtype_size(dtype);
  const auto [own_lo, own_hi] = owned_in(w, comm_.rank(), w.offset, w.offset + w.bytes);
  const bool drecv = own_hi > own_lo && is_device(recv, own_hi - own_lo);
  const std::vector<bool> device = device_parts(parts);
  return subwindow_chunks(w, std::max(esize, opts_.chunk_bytes / esize * esize),
                          [&](const Subwindow& sw, Chunk& c) {
                            std::vector<CollPart> sub_parts;
                            cut_parts(parts, device, sw.from, sw.window.bytes, &sub_parts, &c.in);
                            const bool owns = sw.own_hi > sw.own_lo;
                            uint8_t* mine = recv + sw.own_at;
                            if (owns) c.out.push_back({mine, 0, sw.own_hi - sw.own_lo, drecv});
                            c.staged = sw.window.bytes > 0 && (any_device(c.in) || (owns && drecv));
                            c.post = [this, sub_parts, mine, sub = sw.window, dtype, op](
                                         uint8_t* s, uint8_t* r, CollRequest** out) {
                              if (s == nullptr)
                                return comm_.ireducescatter(sub_parts, mine, sub, dtype, op, out);
                              return comm_.ireducescatter({{s, sub.bytes}}, r, sub, dtype, op, out);
                            };
                          });
}

std::vector<Staging::Chunk> Staging::allgather_chunks(const uint8_t* send,
                                                      const std::vector<CollPart>& parts,
                                                      const CollWindow& w) {
  const auto [own_lo, own_hi] = owned_in(w, comm_.rank(), w.offset, w.offset + w.bytes);
  const bool dsend = own_hi > own_lo && is_device(send, own_hi - own_lo);
  const std::vector<bool> device = device_parts(parts);
  return subwindow_chunks(
      w, std::max<size_t>(1, opts_.chunk_bytes), [&](const Subwindow& sw, Chunk& c) {
        const bool owns = sw.own_hi > sw.own_lo;
        const uint8_t* mine = send + sw.own_at;
        if (owns) c.in.push_back({const_cast<uint8_t*>(mine), 0, sw.own_hi - sw.own_lo, dsend});
        std::vector<CollPart> sub_parts;
        cut_parts(parts, device, sw.from, sw.window.bytes, &sub_parts, &c.out);
        c.staged = sw.window.bytes > 0 && (any_device(c.out) || (owns && dsend));
        c.post = [this, sub_parts, mine, sub = sw.window](uint8_t* s, uint8_t* r,
                                                          CollRequest** out) {
          if (s == nullptr) return comm_.iallgather(mine, sub_parts, sub, out);
          return comm_.iallgather(s, {{r, sub.bytes}}, sub, out);
        };
      });
}

net::Status Staging::iallreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                                void** out) {
  std::lock_guard<std::mutex> lk(mu_);
  auto chunks = allreduce_chunks(static_cast<const uint8_t*>(send), static_cast<uint8_t*>(recv),
                                 count, dtype, op);
  return start(std::move(chunks), count * dtype_size(dtype), out);
}

net::Status Staging::ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                                    const CollWindow& w, DType dtype, Op op, void** out) {
  std::lock_guard<std::mutex> lk(mu_);
  auto chunks = reducescatter_chunks(send_parts, static_cast<uint8_t*>(recv), w, dtype, op);
  return start(std::move(chunks), w.bytes, out);
}

net::Status Staging::iallgather(const void* send, const std::vector<CollPart>& recv_parts,
                                const CollWindow& w, void** out) {
  std::lock_guard<std::mutex> lk(mu_);
  auto chunks = allgather_chunks(static_cast<const uint8_t*>(send), recv_parts, w);
  return start(std::move(chunks), w.bytes, out);
}

net::Status Staging::start(std::vector<Chunk> chunks, size_t bytes, void** out) {
  *out = nullptr;
  if (queue_.empty() && chunks.size() == 1 && !chunks[0].staged) {
    CollRequest* r = nullptr;  // straight through: NCCL tests CollComm's request
    CFX_RETURN_IF_ERROR(chunks[0].post(nullptr, nullptr, &r));
    *out = r;
    return net::Status::kOk;
  }
  auto* req = new StagedRequest;
  req->owner = this;
  req->pieces_left = chunks.size();
  req->bytes = bytes;
  for (Chunk& c : chunks) {
    c.req = req;
    queue_.push_back(std::move(c));
  }
  pump_locked();
  *out = req;
  return net::Status::kOk;
}

void Staging::end_locked(Chunk& c, const std::string& error, net::Status status) {
  if (c.slot >= 0) free_slots_.push_back(c.slot);
  c.slot = -1;
  c.state = Chunk::kEnded;
  --c.req->pieces_left;
  if (!error.empty() && !c.req->failed) {
    c.req->failed = true;
    c.req->error = error;
    c.req->status = status;
  }
}

bool Staging::copy_in_locked(Chunk& c) {
  c.slot = free_slots_.back();
  free_slots_.pop_back();
  return copy_locked(c, /*in=*/true);
}

bool Staging::copy_out_locked(Chunk& c) { return copy_locked(c, /*in=*/false); }

bool Staging::copy_locked(Chunk& c, bool in) {
  const Slot& s = slots_[static_cast<size_t>(c.slot)];
  uint8_t* half = in ? s.send : s.recv;
  const cuda::CUstream stream = in ? to_host_ : to_device_;
  for (const Piece& p : in ? c.in : c.out) {
    uint8_t* at = half + p.slot_offset;
    if (!p.device) {
      std::memcpy(in ? at : p.user, in ? p.user : at, p.bytes);
      continue;
    }
    const cuda::CUresult rc = in ? cuda_->cuMemcpyDtoHAsync(at, dptr(p.user), p.bytes, stream)
                                 : cuda_->cuMemcpyHtoDAsync(dptr(p.user), at, p.bytes, stream);
    if (rc != cuda::CUDA_SUCCESS) {
      end_locked(c, cuda::error_text(*cuda_, in ? "cuMemcpyDtoHAsync" : "cuMemcpyHtoDAsync", rc));
      return false;
    }
  }
  const cuda::CUresult rc = cuda_->cuEventRecord(in ? s.copied_in : s.copied_out, stream);
  if (rc != cuda::CUDA_SUCCESS) {
    end_locked(c, cuda::error_text(*cuda_, "cuEventRecord", rc));
    return false;
  }
  c.state = in ? Chunk::kCopyingIn : Chunk::kCopyingOut;
  return true;
}

void Staging::pump_locked() {
  std::optional<cuda::ScopedContext> scope;
  std::string no_context;
  if (ctx_ != nullptr) {
    scope.emplace(*cuda_, ctx_);
    if (scope->rc != cuda::CUDA_SUCCESS) {
      no_context = cuda::error_text(*cuda_, "cuCtxPushCurrent", scope->rc);
    }
  }
  start_copies_in_locked(no_context);
  post_in_order_locked();
  take_results_locked(no_context);
  end_copies_out_locked();
  while (!queue_.empty() && queue_.front().state == Chunk::kEnded) queue_.pop_front();
}

void Staging::start_copies_in_locked(const std::string& no_context) {
  // In order, while slots are free. A failed request's pieces that were not posted yet end here
  // (NCCL stops the job on the error test() returns).
  for (Chunk& c : queue_) {
    if (c.state != Chunk::kWaiting) continue;
    if (c.req->failed) {
      end_locked(c, std::string());
    } else if (!c.staged) {
      c.state = Chunk::kCopyingIn;  // nothing to copy
    } else if (!no_context.empty()) {
      end_locked(c, no_context);
    } else if (free_slots_.empty()) {
      break;
    } else {
      copy_in_locked(c);
    }
  }
}

void Staging::post_in_order_locked() {
  // Strictly in order: the same sequence of CollComm requests on every rank.
  for (Chunk& c : queue_) {
    if (c.state == Chunk::kWaiting) break;
    if (c.state != Chunk::kCopyingIn) continue;
    if (c.staged) {
      const cuda::CUresult rc = cuda_->cuEventQuery(slots_[size_t(c.slot)].copied_in);
      if (rc == cuda::CUDA_ERROR_NOT_READY) break;
      if (rc != cuda::CUDA_SUCCESS) {
        end_locked(c, cuda::error_text(*cuda_, "cuEventQuery (copy to host)", rc));
        continue;
      }
    }
    const Slot* s = c.staged ? &slots_[size_t(c.slot)] : nullptr;
    CollRequest* r = nullptr;
    const net::Status st = c.post(s ? s->send : nullptr, s ? s->recv : nullptr, &r);
    if (st != net::Status::kOk) {
      end_locked(c, std::string("CollNet refused a piece of the request: ") + net::toString(st),
                 st);
      continue;
    }
    if (r == nullptr) break;  // CollComm: post it again later
    c.host = r;
    c.state = Chunk::kPosted;
  }
}

void Staging::take_results_locked(const std::string& no_context) {
  // Copies out as each piece completes.
  for (Chunk& c : queue_) {
    if (c.state != Chunk::kPosted) continue;
    bool done = false;
    size_t bytes = 0;
    const net::Status st = CollComm::test(c.host, &done, &bytes);
    if (st != net::Status::kOk) {
      c.host = nullptr;  // released by CollComm with its error
      end_locked(c, std::string("a piece of the request failed: ") + net::toString(st), st);
      continue;
    }
    if (!done) continue;
    c.host = nullptr;
    if (!c.staged) {
      end_locked(c, std::string());
    } else if (!no_context.empty()) {
      end_locked(c, no_context);
    } else {
      copy_out_locked(c);
    }
  }
}

void Staging::end_copies_out_locked() {
  for (Chunk& c : queue_) {
    if (c.state != Chunk::kCopyingOut) continue;
    const cuda::CUresult rc = cuda_->cuEventQuery(slots_[size_t(c.slot)].copied_out);
    if (rc == cuda::CUDA_ERROR_NOT_READY) continue;
    end_locked(c, rc == cuda::CUDA_SUCCESS
                      ? std::string()
                      : cuda::error_text(*cuda_, "cuEventQuery (copy to device)", rc));
  }
}

net::Status Staging::test(StagedRequest* r, bool* done, size_t* bytes) {
  Staging& s = *r->owner;
  std::lock_guard<std::mutex> lk(s.mu_);
  s.pump_locked();
  *done = false;
  if (r->pieces_left > 0) return net::Status::kOk;
  const bool failed = r->failed;
  const net::Status r_status = r->status;
  if (failed) CFX_WARN(kLogColl, "CollNet request failed: %s", r->error.c_str());
  *done = !failed;
  *bytes = r->bytes;
  r->magic = 0;
  delete r;
  return failed ? r_status : net::Status::kOk;
}

}  // namespace conflux::collnet
