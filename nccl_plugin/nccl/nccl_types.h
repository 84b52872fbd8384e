// SPDX-License-Identifier: Apache-2.0
// Conflux's own declarations of the NCCL plugin ABI: the types shared by every version.
//
// Written from the published ABI facts (see /work/shared/reference/nccl-plugin-abi.md); no NCCL
// header is included or copied. Everything lives in namespace conflux::nccl so these names never
// clash with <nccl.h> in a translation unit that also includes it. Only layout and values matter
// to NCCL: it reaches the plugin through exported C data symbols (see abi/export.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace conflux::nccl {

// Result codes (values fixed by the ABI).
enum ncclResult_t : int {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};

// Log levels and subsystem flags passed to the logger.
enum ncclDebugLogLevel : int {
  NCCL_LOG_NONE = 0,
  NCCL_LOG_VERSION = 1,
  NCCL_LOG_WARN = 2,
  NCCL_LOG_INFO = 3,
  NCCL_LOG_ABORT = 4,
  NCCL_LOG_TRACE = 5,
};

inline constexpr unsigned long NCCL_INIT = 0x1;
inline constexpr unsigned long NCCL_COLL = 0x2;
inline constexpr unsigned long NCCL_P2P = 0x4;
inline constexpr unsigned long NCCL_NET = 0x10;
inline constexpr unsigned long NCCL_TUNING = 0x40;
inline constexpr unsigned long NCCL_ENV = 0x80;
inline constexpr unsigned long NCCL_ALL = ~0UL;

using ncclDebugLogger_t = void (*)(ncclDebugLogLevel level, unsigned long flags, const char* file,
                                   int line, const char* fmt, ...);

// Profiler callback handed to init (v10+). Conflux does not emit profiler events yet.
using ncclProfilerCallback_t = ncclResult_t (*)(void** eHandle, int type, void* pHandle,
                                                int64_t pluginId, void* extData);

// Data types and reduction ops as CollNet sees them.
enum ncclDataType_t : int {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
  ncclFloat8e4m3 = 10,
  ncclFloat8e5m2 = 11,
};
enum ncclRedOp_t : int { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3 };

// Memory types for regMr / ptrSupport.
inline constexpr int NCCL_PTR_HOST = 0x1;
inline constexpr int NCCL_PTR_CUDA = 0x2;
inline constexpr int NCCL_PTR_DMABUF = 0x4;

inline constexpr int NCCL_NET_HANDLE_MAXSIZE = 128;
inline constexpr int NCCL_NET_MAX_REQUESTS = 32;
inline constexpr size_t NCCL_MAX_NET_SIZE_BYTES = size_t{1} << 40;  // 1 TiB cap on max*Bytes
inline constexpr int NCCL_NET_MAX_DEVS_PER_NIC = 4;
inline constexpr int NCCL_NET_TRAFFIC_CLASS_UNDEF = -1;
// irecv may find *request preset to this value (LL/LL128: completion is optional).
inline constexpr uintptr_t NCCL_NET_OPTIONAL_RECV_COMPLETION = 0x1;

enum ncclNetDeviceType : int {
  NCCL_NET_DEVICE_HOST = 0,
  NCCL_NET_DEVICE_UNPACK = 1,
};
inline constexpr int NCCL_NET_DEVICE_INVALID_VERSION = 0;

// Device offload handle (same layout v8..v11). Conflux never offloads: always left untouched.
struct ncclNetDeviceHandle_t {
  ncclNetDeviceType netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
};
#if defined(__LP64__)
static_assert(sizeof(ncclNetDeviceHandle_t) == 32);
#endif
using ncclNetDeviceHandle_v8_t = ncclNetDeviceHandle_t;
using ncclNetDeviceHandle_v9_t = ncclNetDeviceHandle_t;
using ncclNetDeviceHandle_v10_t = ncclNetDeviceHandle_t;
using ncclNetDeviceHandle_v11_t = ncclNetDeviceHandle_t;

// Virtual NIC description (v9+, identical layout in v9, v10, v11).
struct ncclNetVDeviceProps_t {
  int ndevs;
  int devs[NCCL_NET_MAX_DEVS_PER_NIC];
};

// Per-communicator config: passed to connect in v10, to init in v11.
struct ncclNetCommConfig_t {
  int trafficClass;  // NCCL_NET_TRAFFIC_CLASS_UNDEF when not set
};

}  // namespace conflux::nccl
