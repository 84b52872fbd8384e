// SPDX-License-Identifier: Apache-2.0
#include "cuda/cuda_driver.h"

#include <dlfcn.h>

#include <mutex>

namespace conflux::cuda {
namespace {

// cuda.h's CUdriverProcAddressQueryResult: 0 found, 1 not found, 2 version not sufficient.
using GetProcV2 = CUresult (*)(const char* symbol, void** pfn, int version, uint64_t flags,
                               int* status);
using GetProcV1 = CUresult (*)(const char* symbol, void** pfn, int version, uint64_t flags);

// The CUDA version each symbol is asked for: the one that gave it the signature above
// (cuda.h maps cuMemAlloc to cuMemAlloc_v2 from CUDA 3.2 on, the primary-context calls to _v2
// from 11.0, cuCtxPushCurrent/PopCurrent to _v2 from 4.0, cuStreamDestroy/cuEventDestroy to
// _v2 from 4.0). 11030 is the oldest driver with cuGetProcAddress, and every entry point
// above had its current form by then.
constexpr int kAskVersion = 11030;

class Loader {
 public:
  Loader() {
    lib_ = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) {
      const char* e = dlerror();
      why_ = std::string("cannot load libcuda.so.1: ") + (e != nullptr ? e : "unknown error");
      return;
    }
    v2_ = reinterpret_cast<GetProcV2>(dlsym(lib_, "cuGetProcAddress_v2"));
    if (v2_ == nullptr) v1_ = reinterpret_cast<GetProcV1>(dlsym(lib_, "cuGetProcAddress"));
    if (v2_ == nullptr && v1_ == nullptr) {
      why_ = "libcuda.so.1 has no cuGetProcAddress (a driver older than CUDA 11.3)";
      return;
    }
    if (!resolve_all()) return;
    CUresult rc = api_.cuInit(0);
    if (rc != CUDA_SUCCESS) {
      why_ = error_text(api_, "cuInit", rc);
      return;
    }
    rc = api_.cuDriverGetVersion(&api_.version);
    if (rc != CUDA_SUCCESS) {
      why_ = error_text(api_, "cuDriverGetVersion", rc);
      return;
    }
    ok_ = true;
  }
  // The library stays loaded for the process's lifetime: its entry points may be in use by
  // other threads at exit.

  Status api(const Api** out) const {
    *out = ok_ ? &api_ : nullptr;
    return ok_ ? Status() : system_error(why_);
  }

 private:
  template <typename F>
  bool resolve(const char* name, F* fn) {
    void* p = nullptr;
    int status = 0;
    const CUresult rc =
        v2_ != nullptr ? v2_(name, &p, kAskVersion, 0, &status) : v1_(name, &p, kAskVersion, 0);
    if (rc != CUDA_SUCCESS || p == nullptr || status != 0) {
      why_ = std::string("libcuda.so.1 does not provide ") + name + " (cuGetProcAddress returned " +
             std::to_string(rc) + ")";
      return false;
    }
    *fn = reinterpret_cast<F>(p);
    return true;
  }

  bool resolve_all() {
    Api& a = api_;
    return resolve("cuInit", &a.cuInit) && resolve("cuDriverGetVersion", &a.cuDriverGetVersion) &&
           resolve("cuGetErrorName", &a.cuGetErrorName) &&
           resolve("cuGetErrorString", &a.cuGetErrorString) &&
           resolve("cuDeviceGet", &a.cuDeviceGet) &&
           resolve("cuDevicePrimaryCtxRetain", &a.cuDevicePrimaryCtxRetain) &&
           resolve("cuDevicePrimaryCtxRelease", &a.cuDevicePrimaryCtxRelease) &&
           resolve("cuCtxGetCurrent", &a.cuCtxGetCurrent) &&
           resolve("cuCtxSetCurrent", &a.cuCtxSetCurrent) &&
           resolve("cuCtxPushCurrent", &a.cuCtxPushCurrent) &&
           resolve("cuCtxPopCurrent", &a.cuCtxPopCurrent) &&
           resolve("cuPointerGetAttribute", &a.cuPointerGetAttribute) &&
           resolve("cuMemAlloc", &a.cuMemAlloc) && resolve("cuMemFree", &a.cuMemFree) &&
           resolve("cuMemHostAlloc", &a.cuMemHostAlloc) &&
           resolve("cuMemFreeHost", &a.cuMemFreeHost) && resolve("cuMemcpyHtoD", &a.cuMemcpyHtoD) &&
           resolve("cuMemcpyDtoH", &a.cuMemcpyDtoH) && resolve("cuMemcpyDtoD", &a.cuMemcpyDtoD) &&
           resolve("cuMemsetD8", &a.cuMemsetD8) &&
           resolve("cuMemcpyHtoDAsync", &a.cuMemcpyHtoDAsync) &&
           resolve("cuMemcpyDtoHAsync", &a.cuMemcpyDtoHAsync) &&
           resolve("cuStreamCreate", &a.cuStreamCreate) &&
           resolve("cuStreamDestroy", &a.cuStreamDestroy) &&
           resolve("cuStreamSynchronize", &a.cuStreamSynchronize) &&
           resolve("cuEventCreate", &a.cuEventCreate) &&
           resolve("cuEventDestroy", &a.cuEventDestroy) &&
           resolve("cuEventRecord", &a.cuEventRecord) && resolve("cuEventQuery", &a.cuEventQuery) &&
           resolve("cuEventSynchronize", &a.cuEventSynchronize);
  }

  void* lib_ = nullptr;
  GetProcV2 v2_ = nullptr;
  GetProcV1 v1_ = nullptr;
  Api api_;
  bool ok_ = false;
  std::string why_;
};

}  // namespace

Status driver(const Api** out) {
  static const Loader* loader = new Loader();  // never destroyed: see ~Loader's note
  return loader->api(out);
}

std::string error_text(const Api& api, const char* call, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName == nullptr || api.cuGetErrorName(rc, &name) != CUDA_SUCCESS) {
    name = nullptr;
  }
  if (api.cuGetErrorString == nullptr || api.cuGetErrorString(rc, &text) != CUDA_SUCCESS) {
    text = nullptr;
  }
  std::string s = std::string(call) + " failed: ";
  s += name != nullptr ? name : "CUresult " + std::to_string(rc);
  if (text != nullptr) s += std::string(" (") + text + ")";
  return s;
}

bool is_device_pointer(const Api& api, const void* p, CUcontext* ctx) {
  const auto ptr = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  unsigned type = 0;
  if (api.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, ptr) != CUDA_SUCCESS ||
      type != CU_MEMORYTYPE_DEVICE) {
    return false;
  }
  CUcontext c = nullptr;
  if (api.cuPointerGetAttribute(&c, CU_POINTER_ATTRIBUTE_CONTEXT, ptr) != CUDA_SUCCESS) {
    return false;
  }
  *ctx = c;
  return true;
}

}  // namespace conflux::cuda
