// SPDX-License-Identifier: Apache-2.0
// The rank's host buffers: send, receive and the ring's receive staging area. Allocated once
// at the largest size, page-aligned and pre-touched, registered with the plugin once per comm.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "driver/status.h"

namespace conflux::driver {

struct HostBuffers {
  void* send = nullptr;
  void* recv = nullptr;
  void* staging = nullptr;
  size_t bytes = 0;          // size of send and recv
  size_t staging_bytes = 0;  // inflight * chunk_bytes

  HostBuffers() = default;
  HostBuffers(const HostBuffers&) = delete;
  HostBuffers& operator=(const HostBuffers&) = delete;
  ~HostBuffers() {
    std::free(send);
    std::free(recv);
    std::free(staging);
  }

  Status alloc(size_t nbytes, size_t nstaging) {
    bytes = nbytes;
    staging_bytes = nstaging;
    if (posix_memalign(&send, 4096, nbytes) != 0 || posix_memalign(&recv, 4096, nbytes) != 0 ||
        posix_memalign(&staging, 4096, nstaging) != 0) {
      return internal_error("out of memory allocating " + std::to_string(2 * nbytes + nstaging) +
                            " bytes of host buffers");
    }
    std::memset(send, 0, nbytes);
    std::memset(recv, 0, nbytes);
    std::memset(staging, 0, nstaging);
    return Status();
  }
};

}  // namespace conflux::driver
