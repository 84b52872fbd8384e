// SPDX-License-Identifier: Apache-2.0
// Helpers shared by the per-version ABI adapters (abi/net_v*.cc, later collnet_v*.cc).
#pragma once

#include <exception>
#include <new>

#include "abi/nccl_names.h"
#include "core/net_api.h"
#include "core/net_props.h"
#include "net/log.h"

namespace conflux::abi {

static_assert(int(net::Status::kOk) == ncclSuccess);
static_assert(int(net::Status::kUnhandledCudaError) == ncclUnhandledCudaError);
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

using plugin::copyCommonProps;
using plugin::copyV9Props;

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
