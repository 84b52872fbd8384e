// Helpers shared by the per-version ABI adapters (abi/net_v*.cc, later collnet_v*.cc).
#pragma once

#include <exception>
#include <new>

#include "abi/nccl_names.h"
#include "core/net_api.h"
#include "net/log.h"

namespace conflux::abi {

static_assert(int(net::Status::kOk) == ncclSuccess);
static_assert(int(net::Status::kSystemError) == ncclSystemError);
static_assert(int(net::Status::kInternalError) == ncclInternalError);
static_assert(int(net::Status::kInvalidArgument) == ncclInvalidArgument);
static_assert(int(net::Status::kInvalidUsage) == ncclInvalidUsage);
static_assert(int(net::Status::kRemoteError) == ncclRemoteError);

inline ncclResult_t toNccl(net::Status s) { return ncclResult_t(int(s)); }

// Runs `body` (returning net::Status); any exception becomes ncclInternalError (bad_alloc:
// ncclSystemError) with one log line naming the entry point. Nothing escapes into NCCL.
template <typename F>
ncclResult_t guard(const char* entry, F&& body) noexcept {
  try {
    return toNccl(body());
  } catch (const std::bad_alloc&) {
    CFX_WARN(net::kLogNet, "%s: out of memory", entry);
    return ncclSystemError;
  } catch (const std::exception& e) {
    CFX_WARN(net::kLogNet, "%s: internal error: %s", entry, e.what());
    return ncclInternalError;
  } catch (...) {
    CFX_WARN(net::kLogNet, "%s: internal error: unknown exception", entry);
    return ncclInternalError;
  }
}

// Copies the fields every properties version shares (v8 has no forceFlush: see callers).
template <typename P>
void copyCommonProps(const plugin::NetProperties& in, P* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
}

// v9+ fields.
template <typename P>
void copyV9Props(const plugin::NetProperties& in, P* out) {
  copyCommonProps(in, out);
  out->forceFlush = in.forceFlush;
  out->vProps = in.vProps;
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
}

template <typename P>
ncclResult_t getPropsAs(int dev, P* out, void (*copy)(const plugin::NetProperties&, P*)) {
  return guard("getProperties", [&] {
    if (out == nullptr) return net::Status::kInvalidArgument;
    plugin::NetProperties p;
    net::Status s = plugin::netGetProperties(dev, &p);
    if (s == net::Status::kOk) copy(p, out);
    return s;
  });
}

}  // namespace conflux::abi
