// SPDX-License-Identifier: Apache-2.0
// Staging: the layer between NCCL's CollNet calls and CollComm. It cuts every request into
// pieces of at most `chunk_bytes` (the same cut on every rank, whatever memory the request is
// in) and posts them to CollComm one after the other, in NCCL's order; a piece in device memory
// goes through a slot of pinned host memory:
//
//   device --D2H (copy stream)--> slot.send --CollComm (aggregators, ring)--> slot.recv
//          <--H2D (copy stream)--------------------------------------------------'
//
// Pipelining: every piece of a request takes a free slot and starts its device-to-host copy at
// once; a piece is posted when its copy is done and every earlier piece was posted; its result
// goes back to device memory as soon as CollComm completes it. A request's time thus grows by
// about one piece's copy each way. The request is done (test()) only when the last copy into
// device memory has completed (the copy stream's event): NCCL's iflush then has nothing left
// to wait for, and collIflush completes at once.
//
// A piece wholly in host memory is posted with the caller's own pointers (no copy); a request
// in host memory that fits one piece and finds nothing queued goes straight to CollComm and
// NCCL gets CollComm's request back, as before staging existed.
//
// CUDA: the driver API is loaded at the first device registration (cuda/cuda_driver.h). The
// pool (`slots` slots of 2 x chunk_bytes, cuMemHostAlloc), the two copy streams and the slots'
// events are made then, never per request. Every CUDA call runs with the registered memory's
// context pushed and popped around it, so the calling thread's context is left as it was.
//
// Threads: register_region/deregister may come from NCCL's service thread; the collectives and
// test() from its proxy thread. One mutex guards everything; no call blocks on the network or
// on a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "collnet/coll_request.h"
#include "conflux/common/dtype.h"
#include "cuda/cuda_driver.h"
#include "net/status.h"

namespace conflux::collnet {

class CollComm;

struct StagingOptions {
  size_t chunk_bytes = 1 << 20;  // CONFLUX_STAGING_CHUNK, agreed at connect (rank 0's)
  int slots = 8;                 // CONFLUX_STAGING_SLOTS
};

class Staging;

// A request that went through Staging, as NCCL sees it (void*).
struct StagedRequest {
  static constexpr uint32_t kMagic = 0x43535251;
  uint32_t magic = kMagic;
  Staging* owner = nullptr;
  size_t pieces_left = 0;  // pieces not yet ended (result in place, or failed)
  size_t bytes = 0;        // what test() reports: the sum of the pieces' sizes
  bool failed = false;
  std::string error;  // the first failure, logged by test()
  net::Status status = net::Status::kOk;
};

class Staging {
 public:
  Staging(CollComm& comm, const StagingOptions& opts);
  ~Staging();
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  // NCCL_PTR_CUDA (or a DMA-BUF region, whose address NCCL passes too): loads CUDA and makes
  // the pool on the first call. Errors are logged here, once, with the call that failed.
  net::Status register_device(void* data, size_t size);
  void deregister_device(void* data);

  // The collectives: *out is a CollRequest* (straight to CollComm), a StagedRequest* or
  // nullptr (CollComm asks NCCL to post it again).
  net::Status iallreduce(const void* send, void* recv, size_t count, DType dtype, Op op,
                         void** out);
  net::Status ireducescatter(const std::vector<CollPart>& send_parts, void* recv,
                             const CollWindow& w, DType dtype, Op op, void** out);
  net::Status iallgather(const void* send, const std::vector<CollPart>& recv_parts,
                         const CollWindow& w, void** out);

  // Moves every piece on; then whether r is done (released) or failed (released, error).
  static net::Status test(StagedRequest* r, bool* done, size_t* bytes);

 private:
  // A run of bytes of the caller's memory and where it sits in a slot's half.
  struct Piece {
    uint8_t* user = nullptr;
    size_t slot_offset = 0;
    size_t bytes = 0;
    bool device = false;
  };
  // How a piece reaches CollComm: the slot's halves, or both null for the caller's pointers.
  using Post = std::function<net::Status(uint8_t* send, uint8_t* recv, CollRequest** out)>;
  struct Chunk {
    enum State { kWaiting, kCopyingIn, kPosted, kCopyingOut, kEnded };
    StagedRequest* req = nullptr;
    std::vector<Piece> in, out;
    Post post;
    bool staged = false;  // some piece is device memory: it needs a slot
    int slot = -1;
    State state = kWaiting;
    CollRequest* host = nullptr;
    size_t bytes = 0;
  };
  struct Slot {
    uint8_t* send = nullptr;
    uint8_t* recv = nullptr;
    cuda::CUevent copied_in = nullptr, copied_out = nullptr;
  };

  // Whether p lies in a registered device region (or, with CUDA loaded, is device memory).
  bool is_device(const void* p, size_t bytes) const;
  // Queues a request's pieces (or posts it straight through); *out as for the collectives.
  net::Status start(std::vector<Chunk> chunks, size_t bytes, void** out);
  // The pieces of one collective, before start().
  std::vector<Chunk> allreduce_chunks(const uint8_t* send, uint8_t* recv, size_t count, DType dtype,
                                      Op op);
  // Whether each part is device memory (asked once per request, not per piece).
  std::vector<bool> device_parts(const std::vector<CollPart>& parts) const;
  // The bytes [from, from + bytes) of a window laid out in `parts` (`device`: each part's
  // memory): as parts of their own (*sub) and as pieces at their offsets in a slot (*pieces).
  static void cut_parts(const std::vector<CollPart>& parts, const std::vector<bool>& device,
                        size_t from, size_t bytes, std::vector<CollPart>* sub,
                        std::vector<Piece>* pieces);
  // One sub-window of a ReduceScatter / AllGather window: its bytes from `from` on, the part of
  // it this rank owns ([own_lo, own_hi) of the whole buffer) and where that part starts in the
  // rank's owned bytes of the whole window.
  struct Subwindow {
    size_t from = 0;
    CollWindow window;
    size_t own_lo = 0, own_hi = 0, own_at = 0;
  };
  using SubwindowFn = std::function<void(const Subwindow&, Chunk&)>;
  // A piece per sub-window of at most `per` bytes (one, empty, for an empty window), each
  // filled by `fill`.
  std::vector<Chunk> subwindow_chunks(const CollWindow& w, size_t per,
                                      const SubwindowFn& fill) const;
  std::vector<Chunk> reducescatter_chunks(const std::vector<CollPart>& parts, uint8_t* recv,
                                          const CollWindow& w, DType dtype, Op op);
  std::vector<Chunk> allgather_chunks(const uint8_t* send, const std::vector<CollPart>& parts,
                                      const CollWindow& w);
  // With mu_ held: one pass over the queue, in four steps: copies in (while slots are free),
  // posts (in order), results (copies out started), copies out that are done.
  void pump_locked();
  void start_copies_in_locked(const std::string& no_context);
  void post_in_order_locked();
  void take_results_locked(const std::string& no_context);
  void end_copies_out_locked();
  // A piece's copies into its slot (a free one taken first) or out of it, on the copy stream of
  // that direction, then the slot's event; false (and the piece ended) when a call failed.
  bool copy_in_locked(Chunk& c);
  bool copy_out_locked(Chunk& c);
  bool copy_locked(Chunk& c, bool in);
  // Frees c's slot; a non-empty error fails its request (with `status`, if it is the first).
  void end_locked(Chunk& c, const std::string& error,
                  net::Status status = net::Status::kUnhandledCudaError);
  static bool any_device(const std::vector<Piece>& pieces) {
    for (const Piece& p : pieces) {
      if (p.device) return true;
    }
    return false;
  }
  net::Status make_pool_locked(cuda::CUcontext ctx);

  CollComm& comm_;
  const StagingOptions opts_;
  mutable std::mutex mu_;
  std::deque<Chunk> queue_;  // NCCL's order; ended pieces leave from the front
  size_t next_post_ = 0;     // queue_ index of the first piece not yet posted

  struct Region {
    uintptr_t base = 0;
    size_t size = 0;
  };
  std::vector<Region> regions_;
  const cuda::Api* cuda_ = nullptr;
  cuda::CUcontext ctx_ = nullptr;
  cuda::CUstream to_host_ = nullptr, to_device_ = nullptr;
  void* pool_ = nullptr;
  std::vector<Slot> slots_;
  std::vector<int> free_slots_;
};

}  // namespace conflux::collnet
