// SPDX-License-Identifier: Apache-2.0
// Process-wide plugin state: configuration, the transport (devices), the NCCL logger, and the
// registry of live connections. Reference counted:
//   - v11 init() acquires once per NCCL communicator, finalize() releases;
//   - v8..v10 init() takes one permanent reference per process (those ABIs have no finalize).
// The first acquire reads CONFLUX_* and discovers devices; the last release stops the helper
// threads of any connection NCCL left open (NCCL dlcloses the library right after).
// CollNet holds references the same way from its own init/finalize (openContext).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "core/net_delegate.h"
#include "core/params.h"
#include "nccl/nccl_types.h"
#include "net/transport.h"

namespace conflux::plugin {

class PluginState {
 public:
  // Thread-safe. On failure nothing is kept (a later acquire retries from scratch).
  static Status acquire(nccl::ncclDebugLogger_t logger);
  static void release();
  // The state while at least one reference is held, else nullptr. Lock-free.
  static PluginState* get();

  // Also runs when the library is unloaded while v8..v10's permanent reference is held.
  ~PluginState() { stopLeftoverComms(); }

  const Config& config() const { return config_; }
  const net::TcpTransport& transport() const { return *transport_; }
  // The delegate net (CONFLUX_NET_DELEGATE), or nullptr: Conflux's own TCP net. Lock-free.
  NetDelegate* delegate() const { return delegateActive_.load(std::memory_order_acquire); }
  // An init of the delegate succeeded: from now on it may hold comms.
  void noteDelegateServes() { delegateServed_.store(true, std::memory_order_release); }
  // An init of the delegate failed (one warning): with CONFLUX_NET_DELEGATE_FALLBACK=1, and
  // before any init of it succeeded (so no delegate comm exists), Conflux's own net takes over
  // (true); else the failure stands (false).
  bool fallBackFromDelegate(Status initStatus);

  // Live connection registry (any thread).
  void addComm(net::CommCore* c);
  void removeComm(net::CommCore* c);

  // The `latency` getProperties reports (CONFLUX_NET_LATENCY_US): a setting, never a
  // measurement, since NCCL does not agree it across ranks (see params.cc). Any thread.
  float latencyUs() const { return float(config_.netLatencyUs); }
  // The `maxRecvs` getProperties reports for Conflux's TCP net (CONFLUX_NET_MAX_RECVS); irecv
  // refuses more parts. Any thread.
  int maxRecvs() const { return config_.netMaxRecvs; }

 private:
  PluginState() = default;
  void stopLeftoverComms();

  // Loads CONFLUX_NET_DELEGATE, if set. Fails (NCCL's init fails) unless the fallback is on.
  Status loadDelegate();

  Config config_;
  std::unique_ptr<net::TcpTransport> transport_;
  std::unique_ptr<NetDelegate> delegate_;  // loaded at the first acquire; freed last
  std::atomic<NetDelegate*> delegateActive_{nullptr};
  std::atomic<bool> delegateServed_{false};  // an init of the delegate succeeded
  std::mutex commsMu_;
  std::unordered_set<net::CommCore*> comms_;
};

// The delegate net of the process state, if any (nullptr before init or without one).
inline NetDelegate* activeDelegate() {
  PluginState* s = PluginState::get();
  return s != nullptr ? s->delegate() : nullptr;
}

// Per-communicator context handed to NCCL by v11 init (and used with default values for the
// older ABIs, which have no context). The net's and the CollNet's differ only in `magic`.
struct NetContext {
  static constexpr uint32_t kMagic = 0x43545854;      // ncclNet
  static constexpr uint32_t kCollMagic = 0x43435458;  // ncclCollNet
  uint32_t magic = kMagic;
  uint64_t commId = 0;
  int trafficClass = nccl::NCCL_NET_TRAFFIC_CLASS_UNDEF;
  void* delegateCtx = nullptr;  // the delegate's context for this one (a v11 delegate's)
};

// v11 init / finalize of a context of kind `magic`: each holds one reference on the process
// state. closeContext refuses a context of another kind, or none, with one warning naming `fn`.
Status openContext(void** ctx, uint32_t magic, uint64_t commId, int trafficClass,
                   nccl::ncclDebugLogger_t log);
Status closeContext(void* ctx, uint32_t magic, const char* fn, unsigned long logFlags);

// Routes conflux::net logging to NCCL's logger with the prefix "NET/Conflux".
void installNcclLogger(nccl::ncclDebugLogger_t logger);

}  // namespace conflux::plugin
