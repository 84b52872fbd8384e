// SPDX-License-Identifier: Apache-2.0
// A test-only NCCL net plugin to be named by CONFLUX_NET_DELEGATE: Conflux's own TCP net (the
// abi/net_vN.cc adapter of one ABI version, its table renamed by the build to
// conflux_inner_net_vN, over a core built with CONFLUX_NO_NET_DELEGATE), exported as
// ncclNetPlugin_vN under a name and with counters of its own, so a test can tell that the
// traffic went through it:
//   - name "TestDelegateN"; every device reports as "delegate<dev>" at 12345 Mbit/s;
//   - TEST_DELEGATE_FAIL_INIT=1 in the environment: init fails (ncclSystemError);
//   - isend calls and bytes, and irecv calls, counted; printed to stderr at every closeSend as
//     "TestDelegateN: N isend, B bytes, R irecv" (so far, in this process: the library may stay
//     loaded to the end, and the driver's ranks leave with _exit).
// One library per version: DELEGATE_VERSION is 8, 9, 10 or 11 (tests/plugin_net/CMakeLists.txt).
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"

#define FIXTURE_CAT2(a, b) a##b
#define FIXTURE_CAT(a, b) FIXTURE_CAT2(a, b)
#define FIXTURE_STR2(a) #a
#define FIXTURE_STR(a) FIXTURE_STR2(a)

using NetT = conflux::nccl::FIXTURE_CAT(FIXTURE_CAT(ncclNet_v, DELEGATE_VERSION), _t);
using conflux::nccl::ncclResult_t;

extern "C" NetT FIXTURE_CAT(conflux_inner_net_v, DELEGATE_VERSION);

namespace {

const NetT& inner() { return FIXTURE_CAT(conflux_inner_net_v, DELEGATE_VERSION); }

std::atomic<uint64_t> g_isends{0}, g_bytes{0}, g_irecvs{0};
constexpr int kMaxDevs = 64;
std::string g_names[kMaxDevs];

ncclResult_t closeSend(void* comm) {
  std::fprintf(stderr, "TestDelegate%d: %llu isend, %llu bytes, %llu irecv\n", DELEGATE_VERSION,
               static_cast<unsigned long long>(g_isends.load()),
               static_cast<unsigned long long>(g_bytes.load()),
               static_cast<unsigned long long>(g_irecvs.load()));
  return inner().closeSend(comm);
}

template <typename... A>
ncclResult_t init(A... a) {
  const char* fail = std::getenv("TEST_DELEGATE_FAIL_INIT");
  if (fail != nullptr && fail[0] == '1') return conflux::nccl::ncclSystemError;
  return inner().init(a...);
}

template <typename Props>
ncclResult_t getProperties(int dev, Props* props) {
  ncclResult_t r = inner().getProperties(dev, props);
  if (r == conflux::nccl::ncclSuccess && dev >= 0 && dev < kMaxDevs) {
    g_names[dev] = "delegate" + std::to_string(dev);
    props->name = g_names[dev].data();
    props->speed = 12345;
    // TEST_DELEGATE_PTR_SUPPORT: the ptrSupport it claims (e.g. 7: HOST|CUDA|DMABUF, as a
    // GPUDirect NIC's plugin reports), for the gdr checks of tests/gpu_memory.
    if (const char* ptr = std::getenv("TEST_DELEGATE_PTR_SUPPORT"))
      props->ptrSupport = std::atoi(ptr);
  }
  return r;
}

template <typename Size, typename... Rest>
ncclResult_t isend(void* comm, void* data, Size size, Rest... rest) {
  g_isends.fetch_add(1, std::memory_order_relaxed);
  g_bytes.fetch_add(static_cast<uint64_t>(size), std::memory_order_relaxed);
  return inner().isend(comm, data, size, rest...);
}

template <typename... Rest>
ncclResult_t irecv(void* comm, int n, Rest... rest) {
  g_irecvs.fetch_add(1, std::memory_order_relaxed);
  return inner().irecv(comm, n, rest...);
}

NetT wrapped() {
  NetT n = inner();
  n.name = "TestDelegate" FIXTURE_STR(DELEGATE_VERSION);
  n.init = init;
  n.getProperties = getProperties;
  n.isend = isend;
  n.irecv = irecv;
  n.closeSend = closeSend;
  return n;
}

}  // namespace

extern "C" {
__attribute__((visibility("default")))
NetT FIXTURE_CAT(ncclNetPlugin_v, DELEGATE_VERSION) = wrapped();
}
