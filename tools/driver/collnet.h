// SPDX-License-Identifier: Apache-2.0
// One CollNet "communicator" as NCCL 2.28 sets it up and drives CollNetChain AllReduce with
// host staging, through ncclCollNet_v11.
//
// Exact plugin calls (see README.md "Call sequence"):
//   open:  init(&cctx, commId, logger) -> devices(&n) -> getProperties(0) -> listen(cctx, 0,
//          handle, &listenComm) -> [allgather ok flags + handles; any failure: all decline]
//          -> connect(handles[], nranks, rank, listenComm, &collComm) (blocking, collective)
//          -> [allgather outcome; any failure: all decline] -> closeListen(listenComm)
//          -> reduceSupport(dtype 0..11, op 0..3) -> [allgather; usable = supported on all]
//          -> regMr(collComm, send, bytes, NCCL_PTR_HOST) -> regMr(collComm, recv, ...)
//   op:    per chunk of chunk_bytes: iallreduce(collComm, send+off, recv+off, count, dtype, op,
//          sendMh, recvMh, &req) (NULL req: retry later), at most `inflight` outstanding,
//          test(req, &done, &size) oldest first until done; size must equal the chunk's bytes
//   direct: ReduceScatter / AllGather as CollNetDirect's proxy drives them: the
//          nranks * bytesPerRank buffer in windows of chunk_bytes; per window one
//          ireducescatter(collComm, 1, {sendMh, send+winOffset, winBytes}, recvPtr,
//          bytesPerRank, winOffset, winBytes, dtype, op, recvMh, &req) or
//          iallgather(collComm, sendPtr, 1, {recvMh, recv+winOffset, winBytes}, bytesPerRank,
//          winOffset, winBytes, sendMh, &req), where recvPtr/sendPtr is this rank's block
//          advanced by winOffset % bytesPerRank when the window starts inside that block
//   close: deregMr(send) -> deregMr(recv) -> closeColl -> finalize(cctx)
//   decline after a local success: closeColl (if connected) -> finalize; after a failed
//   connect NCCL drops the listen comm without closing it, and so does the driver.
//   regions (--nccl-regions R): AllReduce as NCCL's CollNet proxy really issues it
//          (transport/coll_net.cc): every iallreduce covers a whole region of R bytes of one
//          shared staging area, whatever the user's size (a 4 B AllReduce is an R-byte
//          request), the part past the user's bytes holding stale data (here 0xff bytes: NaN
//          for floats); the area is registered once per channel and direction (regMr x 2 x
//          --nccl-channels on one region); channels form groups of 8 (NCCL's CollNet group),
//          each group issuing its own steps, up to `inflight`, round-robin with the others.
//          The user's bytes are copied in before and out after each request, as NCCL's GPU
//          kernels do; only they are checked.
// All calls come from the rank's main thread (NCCL's proxy thread); those of a --service-collnet
// comm from the service thread (service_collnet.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "conflux/common/dtype.h"
#include "driver/bootstrap.h"
#include "driver/buffers.h"
#include "driver/device_buffers.h"
#include "driver/plugin.h"

namespace conflux::driver {

// Channels per CollNet group in NCCL's proxy (transport/coll_net.cc).
inline constexpr int kCollNetGroupChannels = 8;

class CollNetSession {
 public:
  CollNetSession() = default;
  CollNetSession(const CollNetSession&) = delete;
  CollNetSession& operator=(const CollNetSession&) = delete;

  // Ok with available()==false when CollNet is unavailable or declined (reason() says why,
  // identically on every rank). An error Status only for failures NCCL would abort on.
  // shared_ctx: a further CollNet comm of the communicator whose CollNet context that is (NCCL's
  // service thread connecting one at run time, service_collnet.h): init and finalize are left
  // to that context's owner, and comm_id is not used.
  Status open(const nccl::ncclCollNet_v11_t* cn, uint64_t comm_id, Bootstrap* bs, HostBuffers* bufs,
              const Deadline* dl, std::optional<void*> shared_ctx = std::nullopt);
  // --device-buffers: the send and receive buffers (and --nccl-regions' staging area) are
  // device memory, registered with NCCL_PTR_CUDA, as NCCL does at gdr 1. Before open().
  void use_device(DeviceBuffers* dev) { dev_ = dev; }
  bool available() const { return coll_comm_ != nullptr; }
  // The ptrSupport of CollNet device 0 (getProperties), -1 before open() got it.
  int ptr_support() const { return ptr_support_; }
  void* context() const { return ctx_; }
  // Requests posted so far (any thread may read it: --service-collnet counts those posted
  // while its thread connected).
  uint64_t posted() const { return posted_.load(std::memory_order_relaxed); }
  const std::string& reason() const { return reason_; }
  const std::string& device_name() const { return dev_name_; }
  bool supported(DType t, Op op) const {
    return usable_[static_cast<int>(t)][static_cast<int>(op)];
  }

  // small_chunk_bytes > 0 (--mixed-chunks): requests alternate between that size and
  // chunk_bytes, the small one first.
  Status allreduce(void* send, void* recv, size_t count, DType t, Op op, size_t chunk_bytes,
                   int inflight, size_t small_chunk_bytes = 0);
  // count = elements per rank: send holds nranks * count, recv this rank's count.
  Status reducescatter(void* send, void* recv, size_t count, DType t, Op op, size_t chunk_bytes,
                       int inflight);
  // count = elements per rank: send holds count, recv nranks * count.
  Status allgather(void* send, void* recv, size_t count, DType t, size_t chunk_bytes, int inflight);
  // --nccl-regions: every AllReduce request is a whole `region_bytes` region of one shared
  // staging area (see the top), from ceil(channels / 8) groups issued round-robin, each with
  // `inflight` requests at most and its oldest tested; call after open(), before the first
  // allreduce.
  Status use_regions(size_t region_bytes, int inflight, int channels);
  Status close();

 private:
  Status allreduce_regions(void* send, void* recv, size_t count, DType t, Op op, int inflight);
  // Every rank's outcome, reason and blob; *all_ok when every rank succeeded, and (if given)
  // (*oks)[r] whether rank r did.
  Status agree(bool ok_here, const std::string& why_here, const std::string& blob_here,
               std::vector<std::string>* blobs, bool* all_ok, std::vector<bool>* oks = nullptr);
  Status decline_cleanup();
  // Posts chunk i (a null request means "again later") with up to `inflight` outstanding,
  // tests them oldest first and checks each completed size against bytes(i).
  using PostFn = std::function<Status(size_t i, void** req)>;
  // done(i), if given, runs once chunk i completed (before its slot is reused).
  Status pipeline(const char* what, size_t nchunks, int inflight, const PostFn& post,
                  const std::function<size_t(size_t)>& bytes,
                  const std::function<void(size_t)>& done = nullptr);
  size_t chunk_bytes(size_t requested, size_t esize) const;
  // The window loop shared by reducescatter and allgather.
  // --device-buffers: after each completed request, iflush of its receive region, tested to
  // completion, as NCCL's CollNet proxy does when the NIC wrote into GPU memory (gdr 1).
  Status flush(void* data, size_t bytes, void* mhandle);
  // --nccl-regions' copies (NCCL's kernels): host or device memory as the buffers are.
  Status copy(void* dst, const void* src, size_t bytes) const;
  Status fill(void* dst, unsigned char value, size_t bytes) const;
  Status direct(bool reduce, void* send, void* recv, size_t count, DType t, Op op, size_t chunk,
                int inflight);

  const nccl::ncclCollNet_v11_t* cn_ = nullptr;
  Bootstrap* bs_ = nullptr;
  HostBuffers* bufs_ = nullptr;
  DeviceBuffers* dev_ = nullptr;
  const Deadline* dl_ = nullptr;
  int ptr_support_ = -1;
  int rank_ = 0;
  void* ctx_ = nullptr;
  bool inited_ = false;
  void* listen_comm_ = nullptr;
  void* coll_comm_ = nullptr;
  void* send_mh_ = nullptr;
  void* recv_mh_ = nullptr;
  size_t max_coll_bytes_ = 0;
  // --nccl-regions: staging_slots_ send regions, then as many receive regions.
  void* staging_ = nullptr;
  size_t region_bytes_ = 0;
  int staging_slots_ = 0;
  int groups_ = 1;
  std::vector<void*> stage_mh_;  // per channel: send-direction handle, recv-direction handle
  std::string reason_;
  std::string dev_name_;
  std::atomic<uint64_t> posted_{0};
  bool usable_[kNumDTypes][kNumOps] = {};
};

}  // namespace conflux::driver
