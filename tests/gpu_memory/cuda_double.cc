// SPDX-License-Identifier: Apache-2.0
// A test double of the CUDA driver (libcuda.so.1) for machines without a GPU: the entry
// points that nccl_plugin/cuda/cuda_driver.h resolves, through cuGetProcAddress as the real
// driver gives them. A test artifact only: never installed, never packaged
// (scripts/check_no_test_hooks.sh fails on it).
//
// What makes it a useful double rather than a stub:
//   * "Device memory" (cuMemAlloc) is a memfd mapped twice: PROT_NONE at the address the
//     caller gets, read-write at a shadow address only the copy functions use. Host code that
//     reads or writes device memory without a copy faults at once.
//   * Async copies and events run on a thread per stream, in stream order: an event is done
//     only once every copy recorded before it is. A reader that does not wait for the event
//     sees stale bytes.
//   * Async copies need pinned host memory (cuMemHostAlloc) and a current context; every call
//     that needs a context fails with CUDA_ERROR_INVALID_CONTEXT on a thread that has none.
//   * CONFLUX_CUDA_DOUBLE_FAIL: "init" (cuInit fails: CUDA_ERROR_NO_DEVICE) or "copy:N" (the
//     Nth async copy of the process fails: CUDA_ERROR_ILLEGAL_ADDRESS).
//   * conflux_cuda_double_stats() (dlsym) counts the async copies and their bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using CUresult = int;
using CUdeviceptr = unsigned long long;
struct Ctx {
  int id = 1;
};
using CUcontext = Ctx*;

constexpr CUresult kSuccess = 0;
constexpr CUresult kInvalidValue = 1;
constexpr CUresult kNotInitialized = 3;
constexpr CUresult kNoDevice = 100;
constexpr CUresult kInvalidDevice = 101;
constexpr CUresult kInvalidContext = 201;
constexpr CUresult kInvalidHandle = 400;
constexpr CUresult kNotFound = 500;
constexpr CUresult kNotReady = 600;
constexpr CUresult kIllegalAddress = 700;

Ctx g_ctx;
std::atomic<bool> g_init{false};
thread_local std::vector<CUcontext> t_ctx;

struct DeviceAlloc {
  uint8_t* shadow = nullptr;
  size_t size = 0;
  size_t mapped = 0;
};
std::mutex g_mu;
std::map<uintptr_t, DeviceAlloc> g_device;  // by device address
std::map<uintptr_t, size_t> g_pinned;       // cuMemHostAlloc'd ranges

std::atomic<uint64_t> g_copies_to_host{0}, g_copies_to_device{0}, g_bytes{0}, g_async{0};

long fail_copy_at() {
  static const long n = [] {
    const char* f = std::getenv("CONFLUX_CUDA_DOUBLE_FAIL");
    return (f != nullptr && std::strncmp(f, "copy:", 5) == 0) ? std::atol(f + 5) : 0L;
  }();
  return n;
}

bool has_context() { return !t_ctx.empty() && t_ctx.back() != nullptr; }

// The shadow of [p, p + n) if it lies inside one device allocation, else nullptr.
uint8_t* shadow_of(CUdeviceptr p, size_t n) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_device.upper_bound(static_cast<uintptr_t>(p));
  if (it == g_device.begin()) return nullptr;
  --it;
  const uintptr_t off = static_cast<uintptr_t>(p) - it->first;
  if (off > it->second.size || n > it->second.size - off) return nullptr;
  return it->second.shadow + off;
}

bool is_pinned(const void* p, size_t n) {
  std::lock_guard<std::mutex> lk(g_mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = g_pinned.upper_bound(a);
  if (it == g_pinned.begin()) return false;
  --it;
  return a - it->first <= it->second && n <= it->second - (a - it->first);
}

struct Stream {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::function<void()>> ops;
  uint64_t enqueued = 0, completed = 0;
  bool stop = false;
  std::thread worker;

  Stream() {
    worker = std::thread([this] {
      std::unique_lock<std::mutex> lk(mu);
      for (;;) {
        cv.wait(lk, [this] { return stop || !ops.empty(); });
        if (ops.empty()) return;
        auto op = std::move(ops.front());
        ops.pop_front();
        lk.unlock();
        op();
        lk.lock();
        ++completed;
        cv.notify_all();
      }
    });
  }
  ~Stream() {
    {
      std::lock_guard<std::mutex> lk(mu);
      stop = true;
    }
    cv.notify_all();
    worker.join();
  }
  uint64_t push(std::function<void()> op) {
    std::lock_guard<std::mutex> lk(mu);
    ops.push_back(std::move(op));
    cv.notify_all();
    return ++enqueued;
  }
  void wait_for(uint64_t ticket) {
    std::unique_lock<std::mutex> lk(mu);
    cv.wait(lk, [&] { return completed >= ticket; });
  }
  bool reached(uint64_t ticket) {
    std::lock_guard<std::mutex> lk(mu);
    return completed >= ticket;
  }
};

struct Event {
  Stream* stream = nullptr;
  uint64_t ticket = 0;
};

#define DOUBLE_NEED_INIT()               \
  do {                                   \
    if (!g_init) return kNotInitialized; \
  } while (0)
#define DOUBLE_NEED_CONTEXT()                   \
  do {                                          \
    DOUBLE_NEED_INIT();                         \
    if (!has_context()) return kInvalidContext; \
  } while (0)

CUresult async_copy(Stream* s, void* dst, const void* src, size_t n, bool to_host) {
  const uint64_t k = g_async.fetch_add(1) + 1;
  if (fail_copy_at() > 0 && k == static_cast<uint64_t>(fail_copy_at())) return kIllegalAddress;
  (to_host ? g_copies_to_host : g_copies_to_device).fetch_add(1);
  g_bytes.fetch_add(n);
  s->push([dst, src, n] { std::memcpy(dst, src, n); });
  return kSuccess;
}

}  // namespace

extern "C" {

CUresult cuInit(unsigned flags) {
  const char* f = std::getenv("CONFLUX_CUDA_DOUBLE_FAIL");
  if (f != nullptr && std::strcmp(f, "init") == 0) return kNoDevice;
  if (flags != 0) return kInvalidValue;
  g_init = true;
  return kSuccess;
}

CUresult cuDriverGetVersion(int* v) {
  if (v == nullptr) return kInvalidValue;
  *v = 12080;
  return kSuccess;
}

CUresult cuGetErrorName(CUresult e, const char** s) {
  static const std::map<CUresult, const char*> names = {
      {kSuccess, "CUDA_SUCCESS"},
      {kInvalidValue, "CUDA_ERROR_INVALID_VALUE"},
      {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED"},
      {kNoDevice, "CUDA_ERROR_NO_DEVICE"},
      {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE"},
      {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT"},
      {kInvalidHandle, "CUDA_ERROR_INVALID_HANDLE"},
      {kNotFound, "CUDA_ERROR_NOT_FOUND"},
      {kNotReady, "CUDA_ERROR_NOT_READY"},
      {kIllegalAddress, "CUDA_ERROR_ILLEGAL_ADDRESS"},
  };
  auto it = names.find(e);
  if (it == names.end() || s == nullptr) return kInvalidValue;
  *s = it->second;
  return kSuccess;
}

CUresult cuGetErrorString(CUresult e, const char** s) {
  if (s == nullptr) return kInvalidValue;
  const char* name = nullptr;
  if (cuGetErrorName(e, &name) != kSuccess) return kInvalidValue;
  *s = "reported by the Conflux CUDA test double";
  return kSuccess;
}

CUresult cuDeviceGet(int* dev, int ordinal) {
  DOUBLE_NEED_INIT();
  if (dev == nullptr || ordinal != 0) return kInvalidDevice;
  *dev = 0;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, int dev) {
  DOUBLE_NEED_INIT();
  if (ctx == nullptr || dev != 0) return kInvalidDevice;
  *ctx = &g_ctx;
  return kSuccess;
}

CUresult cuDevicePrimaryCtxRelease(int dev) { return dev == 0 ? kSuccess : kInvalidDevice; }

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  DOUBLE_NEED_INIT();
  if (ctx == nullptr) return kInvalidValue;
  *ctx = t_ctx.empty() ? nullptr : t_ctx.back();
  return kSuccess;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  DOUBLE_NEED_INIT();
  if (ctx != nullptr && ctx != &g_ctx) return kInvalidContext;
  if (t_ctx.empty()) {
    t_ctx.push_back(ctx);
  } else {
    t_ctx.back() = ctx;
  }
  return kSuccess;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  DOUBLE_NEED_INIT();
  if (ctx != &g_ctx) return kInvalidContext;
  t_ctx.push_back(ctx);
  return kSuccess;
}

CUresult cuCtxPopCurrent(CUcontext* ctx) {
  DOUBLE_NEED_INIT();
  if (t_ctx.empty()) return kInvalidContext;
  if (ctx != nullptr) *ctx = t_ctx.back();
  t_ctx.pop_back();
  return kSuccess;
}

CUresult cuPointerGetAttribute(void* data, int attribute, CUdeviceptr ptr) {
  DOUBLE_NEED_INIT();
  if (data == nullptr) return kInvalidValue;
  const bool device = shadow_of(ptr, 1) != nullptr;
  const bool pinned = !device && is_pinned(reinterpret_cast<void*>(ptr), 1);
  if (!device && !pinned) return kInvalidValue;  // memory CUDA does not know
  if (attribute == 1) {                          // CU_POINTER_ATTRIBUTE_CONTEXT
    *static_cast<CUcontext*>(data) = &g_ctx;
  } else if (attribute == 2) {  // CU_POINTER_ATTRIBUTE_MEMORY_TYPE
    *static_cast<unsigned*>(data) = device ? 2 : 1;
  } else {
    return kInvalidValue;
  }
  return kSuccess;
}

CUresult cuMemAlloc(CUdeviceptr* dptr, size_t bytes) {
  DOUBLE_NEED_CONTEXT();
  if (dptr == nullptr || bytes == 0) return kInvalidValue;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = (bytes + page - 1) / page * page;
  const int fd = memfd_create("conflux-cuda-double", MFD_CLOEXEC);
  if (fd < 0) return kInvalidValue;
  if (ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    close(fd);
    return kInvalidValue;
  }
  void* dev = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
  void* shadow = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (dev == MAP_FAILED || shadow == MAP_FAILED) return kInvalidValue;
  std::lock_guard<std::mutex> lk(g_mu);
  g_device[reinterpret_cast<uintptr_t>(dev)] = {static_cast<uint8_t*>(shadow), bytes, mapped};
  *dptr = reinterpret_cast<uintptr_t>(dev);
  return kSuccess;
}

CUresult cuMemFree(CUdeviceptr dptr) {
  DOUBLE_NEED_INIT();
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_device.find(static_cast<uintptr_t>(dptr));
  if (it == g_device.end()) return kInvalidValue;
  munmap(reinterpret_cast<void*>(it->first), it->second.mapped);
  munmap(it->second.shadow, it->second.mapped);
  g_device.erase(it);
  return kSuccess;
}

CUresult cuMemHostAlloc(void** pp, size_t bytes, unsigned) {
  DOUBLE_NEED_CONTEXT();
  if (pp == nullptr || bytes == 0) return kInvalidValue;
  void* p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (p == nullptr) return kInvalidValue;
  std::lock_guard<std::mutex> lk(g_mu);
  g_pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  *pp = p;
  return kSuccess;
}

CUresult cuMemFreeHost(void* p) {
  DOUBLE_NEED_INIT();
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_pinned.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_pinned.end()) return kInvalidValue;
  g_pinned.erase(it);
  std::free(p);
  return kSuccess;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) {
  DOUBLE_NEED_CONTEXT();
  uint8_t* d = shadow_of(dst, n);
  if (d == nullptr || (n > 0 && src == nullptr)) return kInvalidValue;
  std::memcpy(d, src, n);
  return kSuccess;
}

CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) {
  DOUBLE_NEED_CONTEXT();
  const uint8_t* s = shadow_of(src, n);
  if (s == nullptr || (n > 0 && dst == nullptr)) return kInvalidValue;
  std::memcpy(dst, s, n);
  return kSuccess;
}

CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  DOUBLE_NEED_CONTEXT();
  uint8_t* d = shadow_of(dst, n);
  const uint8_t* s = shadow_of(src, n);
  if (d == nullptr || s == nullptr) return kInvalidValue;
  std::memmove(d, s, n);
  return kSuccess;
}

CUresult cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t n) {
  DOUBLE_NEED_CONTEXT();
  uint8_t* d = shadow_of(dst, n);
  if (d == nullptr) return kInvalidValue;
  std::memset(d, value, n);
  return kSuccess;
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, void* stream) {
  DOUBLE_NEED_CONTEXT();
  uint8_t* d = shadow_of(dst, n);
  if (d == nullptr || stream == nullptr || !is_pinned(src, n)) return kInvalidValue;
  return async_copy(static_cast<Stream*>(stream), d, src, n, false);
}

CUresult cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, void* stream) {
  DOUBLE_NEED_CONTEXT();
  const uint8_t* s = shadow_of(src, n);
  if (s == nullptr || stream == nullptr || !is_pinned(dst, n)) return kInvalidValue;
  return async_copy(static_cast<Stream*>(stream), dst, s, n, true);
}

CUresult cuStreamCreate(void** stream, unsigned) {
  DOUBLE_NEED_CONTEXT();
  if (stream == nullptr) return kInvalidValue;
  *stream = new Stream;
  return kSuccess;
}

CUresult cuStreamDestroy(void* stream) {
  DOUBLE_NEED_INIT();
  if (stream == nullptr) return kInvalidHandle;
  delete static_cast<Stream*>(stream);  // runs what is queued, then stops
  return kSuccess;
}

CUresult cuStreamSynchronize(void* stream) {
  DOUBLE_NEED_INIT();
  if (stream == nullptr) return kInvalidHandle;
  auto* s = static_cast<Stream*>(stream);
  uint64_t last = 0;
  {
    std::lock_guard<std::mutex> lk(s->mu);
    last = s->enqueued;
  }
  s->wait_for(last);
  return kSuccess;
}

CUresult cuEventCreate(void** event, unsigned) {
  DOUBLE_NEED_CONTEXT();
  if (event == nullptr) return kInvalidValue;
  *event = new Event;
  return kSuccess;
}

CUresult cuEventDestroy(void* event) {
  DOUBLE_NEED_INIT();
  if (event == nullptr) return kInvalidHandle;
  delete static_cast<Event*>(event);
  return kSuccess;
}

CUresult cuEventRecord(void* event, void* stream) {
  DOUBLE_NEED_CONTEXT();
  if (event == nullptr || stream == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  e->stream = static_cast<Stream*>(stream);
  e->ticket = e->stream->push([] {});
  return kSuccess;
}

CUresult cuEventQuery(void* event) {
  DOUBLE_NEED_INIT();
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  return e->stream == nullptr || e->stream->reached(e->ticket) ? kSuccess : kNotReady;
}

CUresult cuEventSynchronize(void* event) {
  DOUBLE_NEED_INIT();
  if (event == nullptr) return kInvalidHandle;
  auto* e = static_cast<Event*>(event);
  if (e->stream != nullptr) e->stream->wait_for(e->ticket);
  return kSuccess;
}

// The double's own: async copies to host and to device, and their bytes.
void conflux_cuda_double_stats(uint64_t* to_host, uint64_t* to_device, uint64_t* bytes) {
  *to_host = g_copies_to_host.load();
  *to_device = g_copies_to_device.load();
  *bytes = g_bytes.load();
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, unsigned long long, int* status);

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, unsigned long long flags) {
  int status = 0;
  return cuGetProcAddress_v2(symbol, pfn, version, flags, &status);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int, unsigned long long, int* status) {
#define DOUBLE_ENTRY(f) \
  { #f, reinterpret_cast < void*>(&f) }
  static const std::map<std::string, void*> table = {
      DOUBLE_ENTRY(cuInit),
      DOUBLE_ENTRY(cuDriverGetVersion),
      DOUBLE_ENTRY(cuGetErrorName),
      DOUBLE_ENTRY(cuGetErrorString),
      DOUBLE_ENTRY(cuDeviceGet),
      DOUBLE_ENTRY(cuDevicePrimaryCtxRetain),
      DOUBLE_ENTRY(cuDevicePrimaryCtxRelease),
      DOUBLE_ENTRY(cuCtxGetCurrent),
      DOUBLE_ENTRY(cuCtxSetCurrent),
      DOUBLE_ENTRY(cuCtxPushCurrent),
      DOUBLE_ENTRY(cuCtxPopCurrent),
      DOUBLE_ENTRY(cuPointerGetAttribute),
      DOUBLE_ENTRY(cuMemAlloc),
      DOUBLE_ENTRY(cuMemFree),
      DOUBLE_ENTRY(cuMemHostAlloc),
      DOUBLE_ENTRY(cuMemFreeHost),
      DOUBLE_ENTRY(cuMemcpyHtoD),
      DOUBLE_ENTRY(cuMemcpyDtoH),
      DOUBLE_ENTRY(cuMemcpyDtoD),
      DOUBLE_ENTRY(cuMemsetD8),
      DOUBLE_ENTRY(cuMemcpyHtoDAsync),
      DOUBLE_ENTRY(cuMemcpyDtoHAsync),
      DOUBLE_ENTRY(cuStreamCreate),
      DOUBLE_ENTRY(cuStreamDestroy),
      DOUBLE_ENTRY(cuStreamSynchronize),
      DOUBLE_ENTRY(cuEventCreate),
      DOUBLE_ENTRY(cuEventDestroy),
      DOUBLE_ENTRY(cuEventRecord),
      DOUBLE_ENTRY(cuEventQuery),
      DOUBLE_ENTRY(cuEventSynchronize),
  };
#undef DOUBLE_ENTRY
  if (symbol == nullptr || pfn == nullptr) return kInvalidValue;
  auto it = table.find(symbol);
  if (it == table.end()) {
    *pfn = nullptr;
    if (status != nullptr) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
    return kNotFound;
  }
  *pfn = it->second;
  if (status != nullptr) *status = 0;
  return kSuccess;
}

}  // extern "C"
