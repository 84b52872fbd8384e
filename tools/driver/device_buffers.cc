// SPDX-License-Identifier: Apache-2.0
#include "driver/device_buffers.h"

#include <dlfcn.h>

namespace conflux::driver {
namespace {

cuda::CUdeviceptr dptr(const void* p) {
  return static_cast<cuda::CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

}  // namespace

DeviceBuffers::~DeviceBuffers() {
  if (api_ == nullptr) return;
  for (void* p : allocations_) api_->cuMemFree(dptr(p));
}

Status DeviceBuffers::check(cuda::CUresult rc, const char* call) const {
  if (rc == cuda::CUDA_SUCCESS) return Status();
  return internal_error("--device-buffers: " + cuda::error_text(*api_, call, rc));
}

Status DeviceBuffers::open(const HostBuffers& host) {
  CFX_TRY(cuda::driver(&api_).prefixed("--device-buffers: "));
  host_ = &host;
  cuda::CUdevice dev = 0;
  CFX_TRY(check(api_->cuDeviceGet(&dev, 0), "cuDeviceGet"));
  CFX_TRY(check(api_->cuDevicePrimaryCtxRetain(&ctx_, dev), "cuDevicePrimaryCtxRetain"));
  CFX_TRY(check(api_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent"));
  CFX_TRY(alloc(host.bytes, &send_));
  CFX_TRY(alloc(host.bytes, &recv_));
  return Status();
}

Status DeviceBuffers::alloc(size_t bytes, void** out) {
  cuda::CUdeviceptr p = 0;
  CFX_TRY(check(api_->cuMemAlloc(&p, bytes), "cuMemAlloc"));
  *out = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  allocations_.push_back(*out);
  return Status();
}

void* DeviceBuffers::twin(void* host) const {
  auto* h = static_cast<char*>(host);
  auto* s = static_cast<char*>(host_->send);
  auto* r = static_cast<char*>(host_->recv);
  if (h >= s && h < s + host_->bytes) return static_cast<char*>(send_) + (h - s);
  if (h >= r && h < r + host_->bytes) return static_cast<char*>(recv_) + (h - r);
  return host;
}

Status DeviceBuffers::upload(const void* host, size_t bytes) {
  return check(api_->cuMemcpyHtoD(dptr(twin(const_cast<void*>(host))), host, bytes),
               "cuMemcpyHtoD");
}

Status DeviceBuffers::download(void* host, size_t bytes) const {
  return check(api_->cuMemcpyDtoH(host, dptr(twin(host)), bytes), "cuMemcpyDtoH");
}

Status DeviceBuffers::copy(void* dst, const void* src, size_t bytes) const {
  return check(api_->cuMemcpyDtoD(dptr(dst), dptr(src), bytes), "cuMemcpyDtoD");
}

Status DeviceBuffers::fill(void* dst, unsigned char value, size_t bytes) const {
  return check(api_->cuMemsetD8(dptr(dst), value, bytes), "cuMemsetD8");
}

Status DeviceBuffers::context_unchanged(const char* after) const {
  cuda::CUcontext now = nullptr;
  CFX_TRY(check(api_->cuCtxGetCurrent(&now), "cuCtxGetCurrent"));
  if (now != ctx_) {
    return internal_error(std::string("the plugin changed the calling thread's CUDA context in ") +
                          after + " (NCCL's proxy thread would lose its device)");
  }
  return Status();
}

std::string DeviceBuffers::copy_counts() const {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return std::string();
  using Stats = void (*)(uint64_t*, uint64_t*, uint64_t*);
  auto stats = reinterpret_cast<Stats>(dlsym(lib, "conflux_cuda_double_stats"));
  std::string out;
  if (stats != nullptr) {
    uint64_t to_host = 0, to_device = 0, bytes = 0;
    stats(&to_host, &to_device, &bytes);
    out = "cuda (test double): " + std::to_string(to_host) + " async copies to host, " +
          std::to_string(to_device) + " to device, " + std::to_string(bytes) + " bytes";
  }
  dlclose(lib);
  return out;
}

}  // namespace conflux::driver
