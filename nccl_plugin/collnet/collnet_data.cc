// SPDX-License-Identifier: Apache-2.0
// CollNet data path: memory registration, AllReduce, test, flush.
#include <climits>
#include <cstdint>
#include <memory>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/collnet_api.h"
#include "net/log.h"

namespace conflux::plugin {
namespace {

using net::kLogColl;

struct CollMr {
  static constexpr uint32_t kMagic = 0x434d5248;
  uint32_t magic = kMagic;
  void* data = nullptr;
  size_t size = 0;
  bool device = false;
};

collnet::CollComm* comm_or_warn(void* collComm, const char* fn) {
  auto* c = static_cast<collnet::CollComm*>(collComm);
  if (c == nullptr || !c->valid()) {
    CFX_WARN(kLogColl, "%s: invalid CollNet communicator %p", fn, collComm);
    return nullptr;
  }
  return c;
}

}  // namespace

Status collReduceSupport(int dtype, int op, int* supported) {
  if (supported == nullptr) return Status::kInvalidArgument;
  // Every NCCL type and every op CollNet is handed: the aggregators reduce all of them and
  // the ring (overflow, failover) does too.
  *supported = valid_dtype(static_cast<uint32_t>(dtype)) && valid_op(static_cast<uint32_t>(op));
  return Status::kOk;
}

Status collRegMr(void* collComm, void* data, size_t size, int type, void** mhandle) {
  if (mhandle == nullptr) return Status::kInvalidArgument;
  *mhandle = nullptr;
  collnet::CollComm* c = comm_or_warn(collComm, "CollNet regMr");
  if (c == nullptr) return Status::kInvalidArgument;
  if (type != nccl::NCCL_PTR_HOST && type != nccl::NCCL_PTR_CUDA) {
    CFX_WARN(kLogColl, "CollNet regMr: memory type %d at %p (%zu bytes) is neither host nor CUDA",
             type, data, size);
    return Status::kInvalidArgument;
  }
  // Device memory is staged through pinned host slots (collnet/staging.h).
  if (type == nccl::NCCL_PTR_CUDA) CFX_RETURN_IF_ERROR(c->staging().register_device(data, size));
  auto* mr = new CollMr;
  mr->data = data;
  mr->size = size;
  mr->device = type == nccl::NCCL_PTR_CUDA;
  *mhandle = mr;
  return Status::kOk;
}

// NCCL passes the device address with the DMA-BUF fd (and closes the fd after the call): the
// copies to and from the slots use the address, so the fd is not kept.
Status collRegMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t, int,
                       void** mhandle) {
  return collRegMr(collComm, data, size, type, mhandle);
}

Status collDeregMr(void* collComm, void* mhandle) {
  auto* mr = static_cast<CollMr*>(mhandle);
  if (mr == nullptr || mr->magic != CollMr::kMagic) return Status::kInvalidArgument;
  collnet::CollComm* c = comm_or_warn(collComm, "CollNet deregMr");
  if (c != nullptr && mr->device) c->staging().deregister_device(mr->data);
  mr->magic = 0;
  delete mr;
  return Status::kOk;
}

Status collIallreduce(void* collComm, void* sendData, void* recvData, size_t count, int dtype,
                      int op, void*, void*, void** request) {
  if (request == nullptr) return Status::kInvalidArgument;
  *request = nullptr;
  collnet::CollComm* c = comm_or_warn(collComm, "CollNet iallreduce");
  if (c == nullptr) return Status::kInvalidArgument;
  if (!valid_dtype(static_cast<uint32_t>(dtype)) || !valid_op(static_cast<uint32_t>(op))) {
    CFX_WARN(kLogColl, "CollNet iallreduce: unsupported datatype %d / op %d", dtype, op);
    return Status::kInvalidArgument;
  }
  if (count > 0 && (sendData == nullptr || recvData == nullptr)) return Status::kInvalidArgument;
  return c->staging().iallreduce(sendData, recvData, count, static_cast<DType>(dtype),
                                 static_cast<Op>(op), request);
}

namespace {

// Checks a CollNetDirect window and its parts; logs and returns false if anything is off.
bool valid_window(const char* fn, const collnet::CollComm& c, int nparts, const CollSge* parts,
                  const collnet::CollWindow& w, size_t esize, std::vector<collnet::CollPart>* out) {
  const size_t total = w.bytes_per_rank * static_cast<size_t>(c.nranks());
  if (w.bytes_per_rank == 0 || total / static_cast<size_t>(c.nranks()) != w.bytes_per_rank ||
      w.offset > total || w.bytes > total - w.offset) {
    CFX_WARN(kLogColl, "%s: window [%zu, +%zu) outside the %d x %zu-byte buffer", fn, w.offset,
             w.bytes, c.nranks(), w.bytes_per_rank);
    return false;
  }
  if (w.offset % esize != 0 || w.bytes % esize != 0 || w.bytes_per_rank % esize != 0) {
    CFX_WARN(kLogColl,
             "%s: window [%zu, +%zu) of %zu-byte blocks is not a whole number of "
             "%zu-byte elements",
             fn, w.offset, w.bytes, w.bytes_per_rank, esize);
    return false;
  }
  size_t sum = 0;
  for (int i = 0; i < nparts; ++i) {
    if (parts[i].size > 0 && parts[i].address == nullptr) {
      CFX_WARN(kLogColl, "%s: part %d has no address", fn, i);
      return false;
    }
    sum += parts[i].size;
    out->push_back({static_cast<uint8_t*>(parts[i].address), parts[i].size});
  }
  if (sum != w.bytes) {
    CFX_WARN(kLogColl, "%s: parts hold %zu bytes, the window %zu", fn, sum, w.bytes);
    return false;
  }
  return true;
}

// Whether this rank owns any of the window (then it must pass its own buffer).
bool owns_part(const collnet::CollComm& c, const collnet::CollWindow& w) {
  const auto owned = collnet::owned_ranges(w, c.nranks(), 1);
  const auto& mine = owned[static_cast<size_t>(c.rank())];
  return mine.second > mine.first;
}

}  // namespace

Status collIallgather(void* collComm, void* sendData, int nRecvParts, const CollSge* recvParts,
                      size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                      void** request) {
  if (request == nullptr) return Status::kInvalidArgument;
  *request = nullptr;
  collnet::CollComm* c = comm_or_warn(collComm, "CollNet iallgather");
  if (c == nullptr) return Status::kInvalidArgument;
  const collnet::CollWindow w{bytesPerRank, windowOffset, windowBytes};
  std::vector<collnet::CollPart> parts;
  if (!valid_window("CollNet iallgather", *c, nRecvParts, recvParts, w, 1, &parts)) {
    return Status::kInvalidArgument;
  }
  if (sendData == nullptr && owns_part(*c, w)) {
    CFX_WARN(kLogColl, "CollNet iallgather: no send buffer for this rank's part");
    return Status::kInvalidArgument;
  }
  return c->staging().iallgather(sendData, parts, w, request);
}

Status collIreducescatter(void* collComm, int nSendParts, const CollSge* sendParts, void* recvData,
                          size_t bytesPerRank, size_t windowOffset, size_t windowBytes, int dtype,
                          int op, void** request) {
  if (request == nullptr) return Status::kInvalidArgument;
  *request = nullptr;
  collnet::CollComm* c = comm_or_warn(collComm, "CollNet ireducescatter");
  if (c == nullptr) return Status::kInvalidArgument;
  if (!valid_dtype(static_cast<uint32_t>(dtype)) || !valid_op(static_cast<uint32_t>(op))) {
    CFX_WARN(kLogColl, "CollNet ireducescatter: unsupported datatype %d / op %d", dtype, op);
    return Status::kInvalidArgument;
  }
  const auto t = static_cast<DType>(dtype);
  const collnet::CollWindow w{bytesPerRank, windowOffset, windowBytes};
  std::vector<collnet::CollPart> parts;
  if (!valid_window("CollNet ireducescatter", *c, nSendParts, sendParts, w, dtype_size(t),
                    &parts)) {
    return Status::kInvalidArgument;
  }
  if (recvData == nullptr && owns_part(*c, w)) {
    CFX_WARN(kLogColl, "CollNet ireducescatter: no receive buffer for this rank's part");
    return Status::kInvalidArgument;
  }
  return c->staging().ireducescatter(parts, recvData, w, t, static_cast<Op>(op), request);
}

// A staged request is done only once its results are in device memory (staging.h): there is
// nothing left to flush, for host or device memory.
Status collIflush(void*, void*, int, void*, void** request) {
  if (request != nullptr) *request = nullptr;
  return Status::kOk;
}

Status collTest(void* request, int* done, int* size) {
  auto* r = static_cast<collnet::CollRequest*>(request);
  auto* staged = static_cast<collnet::StagedRequest*>(request);
  const bool known = r != nullptr && (r->magic == collnet::CollRequest::kMagic ||
                                      staged->magic == collnet::StagedRequest::kMagic);
  if (!known || done == nullptr) {
    CFX_WARN(kLogColl, "CollNet test: invalid request %p", request);
    return Status::kInvalidArgument;
  }
  bool d = false;
  size_t bytes = 0;
  // The owning comm is not needed to complete a request: it finishes on the comm's thread (a
  // staged request: here, in its Staging's pass).
  const Status st = r->magic == collnet::CollRequest::kMagic
                        ? collnet::CollComm::test(r, &d, &bytes)
                        : collnet::Staging::test(staged, &d, &bytes);
  *done = d ? 1 : 0;
  if (d && size != nullptr) *size = bytes > size_t(INT32_MAX) ? INT32_MAX : int(bytes);
  return st;
}

}  // namespace conflux::plugin
