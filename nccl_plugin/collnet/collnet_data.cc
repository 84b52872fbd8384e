// CollNet data path: memory registration, AllReduce, test, flush.
#include <climits>
#include <cstdint>
#include <memory>

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
  if (comm_or_warn(collComm, "CollNet regMr") == nullptr) return Status::kInvalidArgument;
  if (type != abi::NCCL_PTR_HOST) {
    CFX_WARN(kLogColl,
             "CollNet regMr: refusing %s memory at %p (%zu bytes): Conflux reduces host memory "
             "only",
             type == abi::NCCL_PTR_CUDA ? "CUDA" : "non-host", data, size);
    return Status::kInternalError;
  }
  auto* mr = new CollMr;
  mr->data = data;
  mr->size = size;
  *mhandle = mr;
  return Status::kOk;
}

Status collRegMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t, int,
                       void** mhandle) {
  if (mhandle != nullptr) *mhandle = nullptr;
  CFX_WARN(kLogColl, "CollNet regMrDmaBuf: refusing DMA-BUF memory at %p (%zu bytes, type %d)",
           data, size, type);
  return Status::kInternalError;
}

Status collDeregMr(void* collComm, void* mhandle) {
  auto* mr = static_cast<CollMr*>(mhandle);
  if (mr == nullptr || mr->magic != CollMr::kMagic) return Status::kInvalidArgument;
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
  collnet::CollRequest* r = nullptr;
  CFX_RETURN_IF_ERROR(c->iallreduce(sendData, recvData, count, static_cast<DType>(dtype),
                                    static_cast<Op>(op), &r));
  *request = r;
  return Status::kOk;
}

Status collIflush(void*, void*, int, void*, void** request) {
  if (request != nullptr) *request = nullptr;
  return Status::kOk;
}

Status collTest(void* request, int* done, int* size) {
  auto* r = static_cast<collnet::CollRequest*>(request);
  if (r == nullptr || r->magic != collnet::CollRequest::kMagic || done == nullptr) {
    CFX_WARN(kLogColl, "CollNet test: invalid request %p", request);
    return Status::kInvalidArgument;
  }
  bool d = false;
  size_t bytes = 0;
  // The owning comm is not needed to complete a request: it finishes on the comm's thread.
  const Status st = collnet::CollComm::test(r, &d, &bytes);
  *done = d ? 1 : 0;
  if (d && size != nullptr) *size = bytes > size_t(INT32_MAX) ? INT32_MAX : int(bytes);
  return st;
}

}  // namespace conflux::plugin
