// SPDX-License-Identifier: Apache-2.0
// CollNet session: setup/agreement, chunked iallreduce, teardown (see collnet.h).
#include "driver/collnet.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "driver/chunks.h"
#include "driver/idle.h"

namespace conflux::driver {

Status CollNetSession::agree(bool ok_here, const std::string& why_here,
                             const std::string& blob_here, std::vector<std::string>* blobs,
                             bool* all_ok, std::vector<bool>* oks) {
  std::string mine(1, ok_here ? '1' : '0');
  uint32_t why_len = static_cast<uint32_t>(why_here.size());
  mine.append(reinterpret_cast<const char*>(&why_len), sizeof why_len);
  mine += why_here;
  mine += blob_here;
  std::vector<std::string> all;
  CFX_TRY(bs_->allgather(mine, &all));
  *all_ok = true;
  blobs->assign(all.size(), std::string());
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& a = all[r];
    uint32_t len = 0;
    if (a.size() < 5) return internal_error("bootstrap: malformed CollNet outcome");
    std::memcpy(&len, a.data() + 1, sizeof len);
    if (a.size() < 5 + static_cast<size_t>(len))
      return internal_error("bootstrap: malformed CollNet outcome");
    if (oks != nullptr) oks->push_back(a[0] == '1');
    if (a[0] != '1') {
      *all_ok = false;
      reason_ += (reason_.empty() ? "" : "\n") + std::string("CollNet declined on rank ") +
                 std::to_string(r) + ": " + a.substr(5, len);
    }
    (*blobs)[r] = a.substr(5 + len);
  }
  return Status();
}

Status CollNetSession::open(const nccl::ncclCollNet_v11_t* cn, uint64_t comm_id, Bootstrap* bs,
                            HostBuffers* bufs, const Deadline* dl,
                            std::optional<void*> shared_ctx) {
  cn_ = cn;
  bs_ = bs;
  bufs_ = bufs;
  dl_ = dl;
  rank_ = bs->rank();
  reason_.clear();
  std::string why;
  auto failed = [&why](const char* call, int rc) {
    why = std::string(call) + " returned " + std::to_string(rc) + " (" + result_name(rc) + ")";
    return false;
  };

  // Phase 1: local setup up to listen; then every rank learns every outcome.
  bool ok = true;
  int rc = 0;
  if (shared_ctx.has_value()) {
    ctx_ = *shared_ctx;  // its owner finalizes it
  } else {
    rc = cn_->init(&ctx_, comm_id, driver_logger);
    if (rc != 0) ok = failed("collnet.init", rc);
    inited_ = (rc == 0);
  }
  int ndev = 0;
  if (ok && (rc = cn_->devices(&ndev)) != 0) ok = failed("collnet.devices", rc);
  if (ok && ndev <= 0) {
    ok = false;
    why = "collnet.devices reported " + std::to_string(ndev) + " devices (CollNet unavailable)";
  }
  nccl::ncclNetProperties_v11_t props{};
  if (ok && (rc = cn_->getProperties(0, &props)) != 0) ok = failed("collnet.getProperties(0)", rc);
  if (ok) {
    dev_name_ = props.name != nullptr ? props.name : "";
    ptr_support_ = props.ptrSupport;
    max_coll_bytes_ = props.maxCollBytes;
  }
  char handle[nccl::NCCL_NET_HANDLE_MAXSIZE] = {};
  if (ok && (rc = cn_->listen(ctx_, 0, handle, &listen_comm_)) != 0)
    ok = failed("collnet.listen(dev 0)", rc);
  std::vector<std::string> handles;
  bool all_ok = false;
  CFX_TRY(agree(ok, why, std::string(handle, sizeof handle), &handles, &all_ok));
  if (!all_ok) return decline_cleanup();

  // Phase 2: the blocking, collective connect; then agree again.
  std::vector<std::vector<char>> copies(handles.size());
  std::vector<void*> ptrs(handles.size());
  for (size_t r = 0; r < handles.size(); ++r) {
    copies[r].assign(handles[r].begin(), handles[r].end());
    copies[r].resize(nccl::NCCL_NET_HANDLE_MAXSIZE);
    ptrs[r] = copies[r].data();
  }
  rc = cn_->connect(ptrs.data(), bs_->nranks(), rank_, listen_comm_, &coll_comm_);
  if (rc != 0 || coll_comm_ == nullptr) {
    ok = rc != 0 ? failed("collnet.connect", rc) : false;
    if (rc == 0) why = "collnet.connect returned success but no collComm";
    listen_comm_ = nullptr;  // NCCL forgets the listen comm of a failed connect
    coll_comm_ = nullptr;
  } else {
    void* l = listen_comm_;
    listen_comm_ = nullptr;
    DRV_CALL(rank_, "collnet.closeListen", cn_->closeListen(l));  // NCCL: right after connect
  }
  // NCCL compares connect results only among the ranks of one node (src/transport.cc), and
  // each rank here is a node of its own: ranks that disagree would choose different
  // algorithms and wait for each other forever. All declined is NCCL's clean fallback.
  std::vector<std::string> ignored;
  std::vector<bool> oks;
  CFX_TRY(agree(ok, why, std::string(), &ignored, &all_ok, &oks));
  std::string accepted, declined;
  for (size_t r = 0; r < oks.size(); ++r) (oks[r] ? accepted : declined) += " " + std::to_string(r);
  if (!accepted.empty() && !declined.empty()) {
    return internal_error("NCCL would hang: collnet.connect succeeded on rank(s)" + accepted +
                          " and failed on rank(s)" + declined +
                          "; NCCL checks the outcome only within a node (" + reason_ + ")");
  }
  if (!all_ok) return decline_cleanup();

  // Phase 3: datatype/op support, agreed across ranks, and buffer registration.
  std::string support(kNumDTypes * kNumOps, '0');
  for (int t = 0; t < kNumDTypes; ++t) {
    for (int o = 0; o < kNumOps; ++o) {
      int sup = 0;
      std::string call = "collnet.reduceSupport(" + std::string(dtype_name(static_cast<DType>(t))) +
                         ", " + std::string(op_name(static_cast<Op>(o))) + ")";
      DRV_CALL(rank_, call.c_str(),
               cn_->reduceSupport(static_cast<nccl::ncclDataType_t>(t),
                                  static_cast<nccl::ncclRedOp_t>(o), &sup));
      support[t * kNumOps + o] = sup ? '1' : '0';
    }
  }
  std::vector<std::string> all;
  CFX_TRY(bs_->allgather(support, &all));
  for (int t = 0; t < kNumDTypes; ++t) {
    for (int o = 0; o < kNumOps; ++o) {
      bool u = true;
      for (const std::string& a : all)
        u = u && a.size() == support.size() && a[t * kNumOps + o] == '1';
      usable_[t][o] = u;
    }
  }
  if (dev_ != nullptr) {
    DRV_CALL(rank_, "collnet.regMr(send buffer, NCCL_PTR_CUDA)",
             cn_->regMr(coll_comm_, dev_->twin(bufs_->send), bufs_->bytes, nccl::NCCL_PTR_CUDA,
                        &send_mh_));
    DRV_CALL(rank_, "collnet.regMr(recv buffer, NCCL_PTR_CUDA)",
             cn_->regMr(coll_comm_, dev_->twin(bufs_->recv), bufs_->bytes, nccl::NCCL_PTR_CUDA,
                        &recv_mh_));
    return dev_->context_unchanged("collnet.regMr");
  }
  DRV_CALL(rank_, "collnet.regMr(send buffer, NCCL_PTR_HOST)",
           cn_->regMr(coll_comm_, bufs_->send, bufs_->bytes, nccl::NCCL_PTR_HOST, &send_mh_));
  DRV_CALL(rank_, "collnet.regMr(recv buffer, NCCL_PTR_HOST)",
           cn_->regMr(coll_comm_, bufs_->recv, bufs_->bytes, nccl::NCCL_PTR_HOST, &recv_mh_));
  return Status();
}

Status CollNetSession::decline_cleanup() {
  if (coll_comm_ != nullptr) {
    void* c = coll_comm_;
    coll_comm_ = nullptr;
    DRV_CALL(rank_, "collnet.closeColl (after decline)", cn_->closeColl(c));
  }
  if (listen_comm_ != nullptr) {  // listened, but connect was never attempted
    void* l = listen_comm_;
    listen_comm_ = nullptr;
    DRV_CALL(rank_, "collnet.closeListen (after decline)", cn_->closeListen(l));
  }
  if (inited_) {
    inited_ = false;
    DRV_CALL(rank_, "collnet.finalize (after decline)", cn_->finalize(ctx_));
  }
  return Status();
}

Status CollNetSession::pipeline(const char* what, size_t nchunks, int inflight, const PostFn& post,
                                const std::function<size_t(size_t)>& bytes,
                                const std::function<void(size_t)>& on_done) {
  const size_t window = static_cast<size_t>(inflight);
  std::vector<void*> reqs(window, nullptr);
  size_t posted = 0, done = 0;
  PollPass pass;
  while (done < nchunks) {
    bool progress = false;
    while (posted < nchunks && posted - done < window) {
      void* req = nullptr;
      CFX_TRY(post(posted, &req));
      if (req == nullptr) break;  // "try again later"
      posted_.fetch_add(1, std::memory_order_relaxed);
      reqs[posted % window] = req;
      ++posted;
      progress = true;
    }
    while (done < posted) {
      int flag = 0, size = -1;
      DRV_CALL(rank_, "collnet.test", cn_->test(reqs[done % window], &flag, &size));
      if (!flag) break;
      const size_t expect = bytes(done);
      if (size < 0 || static_cast<size_t>(size) != expect) {
        return internal_error(std::string("collnet.test reported size ") + std::to_string(size) +
                              " for a " + what + " chunk of " + std::to_string(expect) + " bytes");
      }
      CFX_TRY(flush(dev_ != nullptr ? dev_->twin(bufs_->recv) : nullptr, expect, recv_mh_));
      if (on_done) on_done(done);
      reqs[done % window] = nullptr;
      ++done;
      progress = true;
    }
    if (pass.expired(progress, *dl_)) {
      return internal_error(std::string("--timeout reached in collnet ") + what + " (" +
                            std::to_string(done) + "/" + std::to_string(nchunks) + " chunks done)");
    }
  }
  return Status();
}

size_t CollNetSession::chunk_bytes(size_t requested, size_t esize) const {
  size_t cb = requested;
  if (max_coll_bytes_ > 0 && cb > max_coll_bytes_) cb = max_coll_bytes_;
  cb -= cb % esize;
  return cb > 0 ? cb : esize;
}

Status CollNetSession::use_regions(size_t region_bytes, int inflight, int channels) {
  region_bytes_ = region_bytes;
  staging_slots_ = inflight;
  groups_ = (channels + kCollNetGroupChannels - 1) / kCollNetGroupChannels;
  const size_t total = 2 * region_bytes * static_cast<size_t>(inflight * groups_);
  // At gdr 1 NCCL's staging area is device memory (transport/coll_net.cc, ncclCudaCalloc).
  const int type = dev_ != nullptr ? nccl::NCCL_PTR_CUDA : nccl::NCCL_PTR_HOST;
  if (dev_ != nullptr) {
    CFX_TRY(dev_->alloc(total, &staging_));
    CFX_TRY(dev_->fill(staging_, 0xff, total));
  } else {
    if (posix_memalign(&staging_, 4096, total) != 0) {
      return internal_error("out of memory for the CollNet staging area");
    }
    std::memset(staging_, 0xff, total);
  }
  // NCCL registers the one staging area once per channel and direction; a group's requests
  // carry the handles of its first channel.
  for (int c = 0; c < channels; ++c) {
    void* smh = nullptr;
    void* rmh = nullptr;
    DRV_CALL(rank_, "collnet.regMr(staging area, send direction)",
             cn_->regMr(coll_comm_, staging_, total, type, &smh));
    DRV_CALL(rank_, "collnet.regMr(staging area, recv direction)",
             cn_->regMr(coll_comm_, staging_, total, type, &rmh));
    stage_mh_.push_back(smh);
    stage_mh_.push_back(rmh);
  }
  return Status();
}

Status CollNetSession::allreduce_regions(void* send, void* recv, size_t count, DType t, Op op,
                                         int inflight) {
  const size_t es = dtype_size(t);
  const size_t region = region_bytes_ / es;  // elements per request, whatever the user's count
  const size_t nreq = (count + region - 1) / region;
  const size_t groups = static_cast<size_t>(groups_);
  const size_t window = static_cast<size_t>(std::min(inflight, staging_slots_));
  const size_t slots = static_cast<size_t>(staging_slots_);
  auto* in = static_cast<char*>(staging_);
  auto* out = in + groups * slots * region_bytes_;
  // Request i belongs to group i % G as its step i / G; each group has its own slots.
  auto slot = [&](size_t i) {
    return ((i % groups) * slots + (i / groups) % slots) * region_bytes_;
  };
  auto user = [&](size_t i) { return std::min(region, count - i * region); };
  struct Group {
    size_t posted = 0, done = 0;  // steps of this group
    std::vector<void*> reqs;
  };
  std::vector<Group> g(groups);
  for (Group& x : g) x.reqs.assign(window, nullptr);
  size_t finished = 0, next = 0;
  PollPass pass;
  while (finished < nreq) {
    bool progress = false;
    // NCCL's CollNet proxy issues across its groups in one fixed order (round-robin, request i
    // only after i-1: every rank must hand the plugin the same sequence), each group keeping
    // at most `inflight` requests, and tests the oldest of each group (transport/coll_net.cc).
    while (next < nreq) {
      const size_t k = next % groups;
      Group& x = g[k];
      if (x.posted - x.done >= window) break;
      const size_t i = next;
      char* src = in + slot(i);
      const size_t n = user(i) * es;
      // NCCL's kernels copy the user's bytes into the region; its tail keeps stale data.
      CFX_TRY(copy(src, static_cast<char*>(send) + i * region * es, n));
      CFX_TRY(fill(src + n, 0xff, region_bytes_ - n));
      void* req = nullptr;
      const size_t ch = k * kCollNetGroupChannels;  // the group's first channel
      DRV_CALL(
          rank_, "collnet.iallreduce(region)",
          cn_->iallreduce(coll_comm_, src, out + slot(i), region,
                          static_cast<nccl::ncclDataType_t>(t), static_cast<nccl::ncclRedOp_t>(op),
                          stage_mh_[2 * ch], stage_mh_[2 * ch + 1], &req));
      if (req == nullptr) break;  // "try again later"
      posted_.fetch_add(1, std::memory_order_relaxed);
      x.reqs[x.posted % window] = req;
      ++x.posted;
      ++next;
      progress = true;
    }
    for (size_t k = 0; k < groups; ++k) {
      Group& x = g[k];
      if (x.done < x.posted) {
        int flag = 0, size = -1;
        DRV_CALL(rank_, "collnet.test(region)", cn_->test(x.reqs[x.done % window], &flag, &size));
        if (flag) {
          if (size < 0 || static_cast<size_t>(size) != region * es) {
            return internal_error("collnet.test reported size " + std::to_string(size) +
                                  " for a region of " + std::to_string(region * es) + " bytes");
          }
          const size_t i = x.done * groups + k;
          const size_t ch = k * kCollNetGroupChannels;
          CFX_TRY(flush(out + slot(i), region * es, stage_mh_[2 * ch + 1]));
          CFX_TRY(copy(static_cast<char*>(recv) + i * region * es, out + slot(i), user(i) * es));
          ++x.done;
          ++finished;
          progress = true;
        }
      }
    }
    if (pass.expired(progress, *dl_)) {
      return timed_out("--timeout reached in collnet AllReduce regions (" +
                       std::to_string(finished) + "/" + std::to_string(nreq) + " done)");
    }
  }
  return Status();
}

Status CollNetSession::flush(void* data, size_t bytes, void* mhandle) {
  if (dev_ == nullptr) return Status();  // NCCL flushes only what the NIC wrote to the GPU
  void* req = nullptr;
  DRV_CALL(rank_, "collnet.iflush",
           cn_->iflush(coll_comm_, data, static_cast<int>(bytes), mhandle, &req));
  PollPass pass;
  for (int done = 0; req != nullptr && !done;) {
    int size = 0;
    DRV_CALL(rank_, "collnet.test(iflush)", cn_->test(req, &done, &size));
    if (pass.expired(done != 0, *dl_)) return timed_out("--timeout reached in collnet.iflush");
  }
  return Status();
}

Status CollNetSession::copy(void* dst, const void* src, size_t bytes) const {
  if (dev_ != nullptr) return dev_->copy(dst, src, bytes);
  std::memcpy(dst, src, bytes);
  return Status();
}

Status CollNetSession::fill(void* dst, unsigned char value, size_t bytes) const {
  if (dev_ != nullptr) return dev_->fill(dst, value, bytes);
  std::memset(dst, value, bytes);
  return Status();
}

Status CollNetSession::allreduce(void* send, void* recv, size_t count, DType t, Op op, size_t chunk,
                                 int inflight, size_t small_chunk) {
  if (staging_ != nullptr) return allreduce_regions(send, recv, count, t, op, inflight);
  const size_t es = dtype_size(t);
  ChunkPlan plan{count, chunk_bytes(chunk, es) / es, 0};
  if (small_chunk > 0) plan.small = std::min(chunk_bytes(small_chunk, es) / es, plan.big);
  void* smh = send_mh_;
  void* rmh = (recv == send) ? send_mh_ : recv_mh_;
  auto* s = static_cast<char*>(send);
  auto* d = static_cast<char*>(recv);
  return pipeline(
      "AllReduce", plan.requests(), inflight,
      [&](size_t i, void** req) {
        const size_t first = plan.first(i);
        DRV_CALL(rank_, "collnet.iallreduce",
                 cn_->iallreduce(coll_comm_, s + first * es, d + first * es, plan.elems(i),
                                 static_cast<nccl::ncclDataType_t>(t),
                                 static_cast<nccl::ncclRedOp_t>(op), smh, rmh, req));
        return Status();
      },
      [&](size_t i) { return plan.elems(i) * es; });
}

Status CollNetSession::close() {
  if (coll_comm_ != nullptr) {
    for (void* mh : stage_mh_)
      DRV_CALL(rank_, "collnet.deregMr(staging)", cn_->deregMr(coll_comm_, mh));
  }
  stage_mh_.clear();
  if (dev_ == nullptr) std::free(staging_);  // device memory: freed with dev_
  staging_ = nullptr;
  if (coll_comm_ != nullptr) {
    DRV_CALL(rank_, "collnet.deregMr(send buffer)", cn_->deregMr(coll_comm_, send_mh_));
    DRV_CALL(rank_, "collnet.deregMr(recv buffer)", cn_->deregMr(coll_comm_, recv_mh_));
    send_mh_ = recv_mh_ = nullptr;
    void* c = coll_comm_;
    coll_comm_ = nullptr;
    DRV_CALL(rank_, "collnet.closeColl", cn_->closeColl(c));
  }
  if (inited_) {
    inited_ = false;
    DRV_CALL(rank_, "collnet.finalize", cn_->finalize(ctx_));
  }
  return Status();
}

}  // namespace conflux::driver
