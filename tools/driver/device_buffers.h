// SPDX-License-Identifier: Apache-2.0
// --device-buffers: the rank's send and receive buffers in device memory, as NCCL hands them
// to CollNet when the NIC's gdr bit is 1 (shared/reference: nccl-gdr.md). The CUDA driver is
// loaded at run time (nccl_plugin/cuda/cuda_driver.h): the real one on a GPU machine, the test
// double (tests/gpu_memory) elsewhere. The device's primary context is made current on the
// rank's main thread, as NCCL's proxy thread has its device's; after each collective the
// driver checks that the plugin left it so.
//
// The host buffers stay the driver's reference: inputs are written there and uploaded, results
// downloaded there and checked, outside the timed iterations (whose data stays on the device).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cuda/cuda_driver.h"
#include "driver/buffers.h"
#include "driver/status.h"

namespace conflux::driver {

class DeviceBuffers {
 public:
  DeviceBuffers() = default;
  DeviceBuffers(const DeviceBuffers&) = delete;
  DeviceBuffers& operator=(const DeviceBuffers&) = delete;
  ~DeviceBuffers();

  // Loads CUDA, makes device 0's primary context current on this thread and allocates device
  // twins of host's send and receive buffers.
  Status open(const HostBuffers& host);
  // Device memory (the twins; NCCL's CollNet staging area at gdr 1); freed with the object.
  Status alloc(size_t bytes, void** out);

  // The device twin of a pointer into the host send or receive buffer (itself otherwise).
  void* twin(void* host) const;
  Status upload(const void* host, size_t bytes);                // host buffer -> its twin
  Status download(void* host, size_t bytes) const;              // twin -> host buffer
  Status copy(void* dst, const void* src, size_t bytes) const;  // device to device
  Status fill(void* dst, unsigned char value, size_t bytes) const;
  // Error when this thread's current context is not the one open() made current.
  Status context_unchanged(const char* after) const;
  // "cuda: N copies to host, M to device (B bytes) by the plugin" when the driver is the test
  // double (which counts them), else empty.
  std::string copy_counts() const;

 private:
  Status check(cuda::CUresult rc, const char* call) const;

  const cuda::Api* api_ = nullptr;
  cuda::CUcontext ctx_ = nullptr;
  const HostBuffers* host_ = nullptr;
  void* send_ = nullptr;
  void* recv_ = nullptr;
  std::vector<void*> allocations_;  // every cuMemAlloc, send_ and recv_ included
};

}  // namespace conflux::driver
