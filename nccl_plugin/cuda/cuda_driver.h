// SPDX-License-Identifier: Apache-2.0
// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1"), then every entry point
// through cuGetProcAddress (CUDA 12's _v2 form, else CUDA 11's), as NCCL itself loads it.
// Nothing here needs CUDA at build time (the few types and constants the plugin uses are
// declared below, with the driver's values), and nothing links libcuda: on a host without
// CUDA, load() fails with a reason and the caller goes on with host memory only.
//
// Users: the CollNet staging of device memory (collnet/device_staging.h) and the driver's
// device-buffer mode (tools/driver). No logging here: errors come back as a Status.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "conflux/common/status.h"

namespace conflux::cuda {

// The driver's own types, by the same names, so that a reader can look them up in cuda.h.
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;  // cuda.h: CUdeviceptr_v2
using CUcontext = struct CUctx_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

inline constexpr CUresult CUDA_SUCCESS = 0;
inline constexpr CUresult CUDA_ERROR_NOT_READY = 600;
inline constexpr int CU_POINTER_ATTRIBUTE_CONTEXT = 1;
inline constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
inline constexpr unsigned CU_MEMORYTYPE_HOST = 1;
inline constexpr unsigned CU_MEMORYTYPE_DEVICE = 2;
inline constexpr unsigned CU_STREAM_NON_BLOCKING = 1;
inline constexpr unsigned CU_EVENT_DISABLE_TIMING = 2;
inline constexpr unsigned CU_MEMHOSTALLOC_PORTABLE = 1;

// The entry points Conflux calls, each resolved for the CUDA version noted in load().
struct Api {
  CUresult (*cuInit)(unsigned flags) = nullptr;
  CUresult (*cuDriverGetVersion)(int* version) = nullptr;
  CUresult (*cuGetErrorName)(CUresult error, const char** name) = nullptr;
  CUresult (*cuGetErrorString)(CUresult error, const char** text) = nullptr;
  CUresult (*cuDeviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext* ctx, CUdevice device) = nullptr;
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice device) = nullptr;
  CUresult (*cuCtxGetCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuCtxSetCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxPushCurrent)(CUcontext ctx) = nullptr;
  CUresult (*cuCtxPopCurrent)(CUcontext* ctx) = nullptr;
  CUresult (*cuPointerGetAttribute)(void* data, int attribute, CUdeviceptr ptr) = nullptr;
  CUresult (*cuMemAlloc)(CUdeviceptr* dptr, size_t bytes) = nullptr;
  CUresult (*cuMemFree)(CUdeviceptr dptr) = nullptr;
  CUresult (*cuMemHostAlloc)(void** pp, size_t bytes, unsigned flags) = nullptr;
  CUresult (*cuMemFreeHost)(void* p) = nullptr;
  CUresult (*cuMemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*cuMemcpyDtoD)(CUdeviceptr dst, CUdeviceptr src, size_t bytes) = nullptr;
  CUresult (*cuMemsetD8)(CUdeviceptr dst, unsigned char value, size_t bytes) = nullptr;
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes,
                                CUstream stream) = nullptr;
  CUresult (*cuMemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes,
                                CUstream stream) = nullptr;
  CUresult (*cuStreamCreate)(CUstream* stream, unsigned flags) = nullptr;
  CUresult (*cuStreamDestroy)(CUstream stream) = nullptr;
  CUresult (*cuStreamSynchronize)(CUstream stream) = nullptr;
  CUresult (*cuEventCreate)(CUevent* event, unsigned flags) = nullptr;
  CUresult (*cuEventDestroy)(CUevent event) = nullptr;
  CUresult (*cuEventRecord)(CUevent event, CUstream stream) = nullptr;
  CUresult (*cuEventQuery)(CUevent event) = nullptr;
  CUresult (*cuEventSynchronize)(CUevent event) = nullptr;

  int version = 0;  // cuDriverGetVersion, e.g. 12080
};

// The process's driver into *out, loaded and initialised (cuInit) on the first call; when that
// failed, *out = nullptr and a system_error names the library, the missing symbol or the
// CUresult. The outcome of the first call is kept: later calls return the same.
Status driver(const Api** out);

// "cuMemcpyDtoHAsync failed: CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access ...)".
std::string error_text(const Api& api, const char* call, CUresult rc);

// Whether `p` is device memory of some context (cuPointerGetAttribute(MEMORY_TYPE));
// *ctx gets its context. False for host memory and for pointers CUDA does not know.
bool is_device_pointer(const Api& api, const void* p, CUcontext* ctx);

// Makes `ctx` current on this thread for the object's lifetime, then restores the
// thread's previous context (cuCtxPushCurrent / cuCtxPopCurrent). `rc` says whether the push
// worked; nothing is popped when it did not.
class ScopedContext {
 public:
  ScopedContext(const Api& api, CUcontext ctx) : api_(api) { rc = api_.cuCtxPushCurrent(ctx); }
  ~ScopedContext() {
    if (rc == CUDA_SUCCESS) {
      CUcontext popped = nullptr;
      api_.cuCtxPopCurrent(&popped);
    }
  }
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  CUresult rc;

 private:
  const Api& api_;
};

}  // namespace conflux::cuda
