// SPDX-License-Identifier: Apache-2.0
// Result codes of the Conflux TCP transport.
//
// Numeric values equal NCCL's ncclResult_t so that the ABI adapters convert with a cast
// (checked by static_asserts in abi/adapter_util.h). The transport itself knows nothing of NCCL.
#pragma once

namespace conflux::net {

enum class Status : int {
  kOk = 0,
  kUnhandledCudaError = 1,  // a CUDA driver call failed (CollNet's staging of device memory)
  kSystemError = 2,         // a system call failed locally (socket, thread, out of fds)
  kInternalError = 3,       // a bug or an unsupported request (e.g. CUDA memory)
  kInvalidArgument = 4,     // bad parameter value or malformed handle
  kInvalidUsage = 5,        // API misuse (e.g. message larger than the posted receive)
  kRemoteError = 6,         // the peer closed the connection or sent garbage
};

inline const char* toString(Status s) {
  switch (s) {
    case Status::kOk:
      return "ok";
    case Status::kUnhandledCudaError:
      return "unhandled CUDA error";
    case Status::kSystemError:
      return "system error";
    case Status::kInternalError:
      return "internal error";
    case Status::kInvalidArgument:
      return "invalid argument";
    case Status::kInvalidUsage:
      return "invalid usage";
    case Status::kRemoteError:
      return "remote error";
  }
  return "unknown";
}

inline bool ok(Status s) { return s == Status::kOk; }

}  // namespace conflux::net

// Propagates a non-ok Status to the caller.
#define CFX_RETURN_IF_ERROR(expr)                                       \
  do {                                                                  \
    ::conflux::net::Status cfx_status_ = (expr);                        \
    if (cfx_status_ != ::conflux::net::Status::kOk) return cfx_status_; \
  } while (0)
