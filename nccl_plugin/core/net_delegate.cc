// SPDX-License-Identifier: Apache-2.0
#include "core/net_delegate.h"

#include <dlfcn.h>

#include <climits>
#include <utility>

#include "core/net_props.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "net/log.h"

namespace conflux::plugin {
namespace {

using namespace ::conflux::nccl;  // NOLINT(google-build-using-namespace): NCCL's own words

Status st(ncclResult_t r) { return Status(int(r)); }

// v8 sizes are int: a larger request cannot be expressed to a v8 delegate, and v8 devices
// advertise at most this much per message.
constexpr size_t kV8MaxBytes = size_t{1} << 30;
bool fitsInt(size_t n) { return n <= size_t(INT_MAX); }

// The properties struct a getProperties entry of an ABI table fills.
template <typename Fn>
struct PropsOf;
template <typename P>
struct PropsOf<ncclResult_t (*)(int, P*)> {
  using type = P;
};

// The calls every version makes the same way; `Net` is the delegate's ncclNet_vN_t and `V` its
// number. Where versions differ, `if constexpr` on V.
template <typename Net, int V>
class DelegateOf final : public NetDelegate {
 public:
  DelegateOf(void* dl, std::string lib, const Net* net)
      : NetDelegate(dl, std::move(lib), V, net->name), n_(*net) {}
  ~DelegateOf() override { finalizeProcess(); }

  Status devices(int* ndev) override { return st(n_.devices(ndev)); }

  Status getProperties(int dev, NetProperties* props) override {
    if (props == nullptr) return Status::kInvalidArgument;
    *props = NetProperties{};
    // What an older version lacks is filled as NCCL fills it for a plugin of that version:
    // v8, one physical device per index and messages of at most 1 GiB (its sizes are int: the
    // largest power of two below INT_MAX); before v11, one request per multi-request.
    typename PropsOf<decltype(n_.getProperties)>::type p{};
    const Status s = st(n_.getProperties(dev, &p));
    if (s != Status::kOk) return s;
    props->maxMultiRequestSize = 1;
    if constexpr (V == 8) {
      copyCommonProps(p, props);
      props->vProps.ndevs = 1;
      props->vProps.devs[0] = dev;
      props->maxP2pBytes = kV8MaxBytes;
      props->maxCollBytes = kV8MaxBytes;
    } else {
      copyV9Props(p, props);
      if constexpr (V >= 11) props->maxMultiRequestSize = p.maxMultiRequestSize;
    }
    return s;
  }

  Status listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (V >= 11) {
      return st(n_.listen(contextFor(ctx), dev, handle, listenComm));
    } else {
      return st(n_.listen(dev, handle, listenComm));
    }
  }

  Status connect(void* ctx, int dev, int trafficClass, void* handle, void** sendComm,
                 ncclNetDeviceHandle_t** devComm) override {
    ncclNetDeviceHandle_t* unused = nullptr;
    ncclNetDeviceHandle_t** dc = devComm != nullptr ? devComm : &unused;
    if constexpr (V >= 11) {
      return st(n_.connect(contextFor(ctx), dev, handle, sendComm, dc));
    } else if constexpr (V == 10) {
      ncclNetCommConfig_t config{trafficClass};
      return st(n_.connect(dev, &config, handle, sendComm, dc));
    } else {
      return st(n_.connect(dev, handle, sendComm, dc));
    }
  }

  Status accept(void* listenComm, void** recvComm, ncclNetDeviceHandle_t** devComm) override {
    ncclNetDeviceHandle_t* unused = nullptr;
    return st(n_.accept(listenComm, recvComm, devComm != nullptr ? devComm : &unused));
  }

  Status regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    return st(n_.regMr(comm, data, size, type, mhandle));
  }
  Status regMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                     void** mhandle) override {
    if (n_.regMrDmaBuf == nullptr) return Status::kInternalError;
    return st(n_.regMrDmaBuf(comm, data, size, type, offset, fd, mhandle));
  }
  Status deregMr(void* comm, void* mhandle) override { return st(n_.deregMr(comm, mhandle)); }

  Status isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle,
               void** request) override {
    if constexpr (V == 8) {
      if (!fitsInt(size)) return Status::kInvalidArgument;
      return st(n_.isend(sendComm, data, int(size), tag, mhandle, request));
    } else if constexpr (V == 9) {
      return st(n_.isend(sendComm, data, size, tag, mhandle, request));
    } else {
      return st(n_.isend(sendComm, data, size, tag, mhandle, phandle, request));
    }
  }

  Status irecv(void* recvComm, int n, void** data, const size_t* sizes, const int* tags,
               void** mhandles, void** phandles, void** request) override {
    if (sizes == nullptr || tags == nullptr || n < 1 || n > kMaxGroupedRecvs) {
      return Status::kInvalidArgument;
    }
    // NCCL's arrays are not const in the ABI; no plugin writes them.
    auto* t = const_cast<int*>(tags);
    if constexpr (V == 8) {
      int s[kMaxGroupedRecvs];
      for (int i = 0; i < n; ++i) {
        if (!fitsInt(sizes[i])) return Status::kInvalidArgument;
        s[i] = int(sizes[i]);
      }
      return st(n_.irecv(recvComm, n, data, s, t, mhandles, request));
    } else if constexpr (V == 9) {
      return st(n_.irecv(recvComm, n, data, const_cast<size_t*>(sizes), t, mhandles, request));
    } else {
      return st(
          n_.irecv(recvComm, n, data, const_cast<size_t*>(sizes), t, mhandles, phandles, request));
    }
  }

  Status iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                void** request) override {
    return st(n_.iflush(recvComm, n, data, sizes, mhandles, request));
  }
  Status test(void* request, int* done, int* sizes) override {
    return st(n_.test(request, done, sizes));
  }
  Status closeSend(void* sendComm) override { return st(n_.closeSend(sendComm)); }
  Status closeRecv(void* recvComm) override { return st(n_.closeRecv(recvComm)); }
  Status closeListen(void* listenComm) override { return st(n_.closeListen(listenComm)); }
  Status getDeviceMr(void* comm, void* mhandle, void** dptrMhandle) override {
    if (n_.getDeviceMr == nullptr) {
      if (dptrMhandle != nullptr) *dptrMhandle = nullptr;
      return Status::kOk;
    }
    return st(n_.getDeviceMr(comm, mhandle, dptrMhandle));
  }
  Status irecvConsumed(void* recvComm, int n, void* request) override {
    if (n_.irecvConsumed == nullptr) return Status::kOk;
    return st(n_.irecvConsumed(recvComm, n, request));
  }

 protected:
  Status callInit(void** ctx, uint64_t commId, int trafficClass, ncclDebugLogger_t log,
                  ncclProfilerCallback_t prof) override {
    if constexpr (V >= 11) {
      ncclNetCommConfig_t config{trafficClass};
      return st(n_.init(ctx, commId, &config, log, prof));
    } else if constexpr (V == 10) {
      return st(n_.init(log, prof));
    } else {
      return st(n_.init(log));
    }
  }
  Status callFinalize(void* ctx) override {
    if constexpr (V >= 11) {
      if (n_.finalize == nullptr) return Status::kOk;
      return st(n_.finalize(ctx));
    } else {
      return Status::kOk;
    }
  }
  bool perContext() const override { return V >= 11; }

 private:
  const Net n_;  // a copy: the table cannot change under us
};

template <typename Net, int V>
std::unique_ptr<NetDelegate> tryVersion(void* dl, const std::string& lib, const char* symbol) {
  auto* net = static_cast<const Net*>(dlsym(dl, symbol));
  if (net == nullptr) return nullptr;
  return std::make_unique<DelegateOf<Net, V>>(dl, lib, net);
}

}  // namespace

NetDelegate::NetDelegate(void* dl, std::string lib, int version, const char* name)
    : dl_(dl), lib_(std::move(lib)), version_(version), name_(name) {}

NetDelegate::~NetDelegate() {
  if (dl_ != nullptr) dlclose(dl_);
}

conflux::Status NetDelegate::load(const std::string& lib, std::unique_ptr<NetDelegate>* out) {
  out->reset();
  dlerror();
  void* dl = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (dl == nullptr) {
    const char* e = dlerror();
    return invalid_argument("CONFLUX_NET_DELEGATE=" + lib + ": cannot load it (" +
                            (e != nullptr ? e : "?") + ")");
  }
  std::unique_ptr<NetDelegate> d = tryVersion<ncclNet_v11_t, 11>(dl, lib, "ncclNetPlugin_v11");
  if (!d) d = tryVersion<ncclNet_v10_t, 10>(dl, lib, "ncclNetPlugin_v10");
  if (!d) d = tryVersion<ncclNet_v9_t, 9>(dl, lib, "ncclNetPlugin_v9");
  if (!d) d = tryVersion<ncclNet_v8_t, 8>(dl, lib, "ncclNetPlugin_v8");
  if (!d) {
    dlclose(dl);
    return invalid_argument("CONFLUX_NET_DELEGATE=" + lib +
                            ": exports no ncclNetPlugin_v8 .. _v11 (not an NCCL net plugin, or a "
                            "version this build does not know)");
  }
  *out = std::move(d);
  return {};
}

Status NetDelegate::initContext(void** ctx, uint64_t commId, int trafficClass,
                                nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof) {
  *ctx = nullptr;
  if (!perContext()) return initProcess(log, prof);
  std::lock_guard<std::mutex> lock(initMu_);
  return callInit(ctx, commId, trafficClass, log, prof);
}

Status NetDelegate::finalizeContext(void* ctx) {
  if (!perContext() || ctx == nullptr) return Status::kOk;
  std::lock_guard<std::mutex> lock(initMu_);
  return callFinalize(ctx);
}

void NetDelegate::finalizeProcess() {
  std::lock_guard<std::mutex> lock(initMu_);
  if (processCtx_ != nullptr) callFinalize(processCtx_);
  processCtx_ = nullptr;
}

Status NetDelegate::initProcess(nccl::ncclDebugLogger_t log, nccl::ncclProfilerCallback_t prof) {
  std::lock_guard<std::mutex> lock(initMu_);
  if (processInit_) return Status::kOk;
  void* ctx = nullptr;
  CFX_RETURN_IF_ERROR(
      callInit(perContext() ? &ctx : nullptr, 0, nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF, log, prof));
  processCtx_ = ctx;
  processInit_ = true;
  return Status::kOk;
}

}  // namespace conflux::plugin
