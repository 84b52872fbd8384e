// SPDX-License-Identifier: Apache-2.0
#include "core/plugin_state.h"

#include <atomic>

#include "net/log.h"

namespace conflux::plugin {
namespace {

std::mutex g_mu;                       // guards acquire/release
int g_refs = 0;                        // under g_mu
std::unique_ptr<PluginState> g_owner;  // under g_mu
std::atomic<PluginState*> g_state{nullptr};
std::atomic<nccl::ncclDebugLogger_t> g_logger{nullptr};

void ncclSink(net::LogLevel level, unsigned long flags, const char* file, int line,
              const char* message) {
  nccl::ncclDebugLogger_t log = g_logger.load(std::memory_order_acquire);
  if (log != nullptr) {
    log(nccl::ncclDebugLogLevel(int(level)), flags, file, line, "NET/Conflux : %s", message);
  }
}

}  // namespace

void installNcclLogger(nccl::ncclDebugLogger_t logger) {
  if (logger == nullptr) return;  // keep the previous sink (stderr default or NCCL's)
  g_logger.store(logger, std::memory_order_release);
  net::setLogSink(&ncclSink);
}

Status PluginState::acquire(nccl::ncclDebugLogger_t logger) {
  installNcclLogger(logger);
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refs > 0) {
    ++g_refs;
    return Status::kOk;
  }
  std::unique_ptr<PluginState> s(new PluginState());
  std::string error;
  Status st = loadConfig(&s->config_, &error);
  if (st != Status::kOk) {
    CFX_WARN(net::kLogInit | net::kLogEnv, "%s", error.c_str());
    return st;
  }
  st = net::TcpTransport::create(s->config_.transportConfig(), &s->transport_);
  if (st != Status::kOk) return st;
  CFX_RETURN_IF_ERROR(s->loadDelegate());
  g_owner = std::move(s);
  g_state.store(g_owner.get(), std::memory_order_release);
  g_refs = 1;
  CFX_INFO(net::kLogInit | net::kLogNet, "initialized with %d device(s)",
           g_owner->transport_->numDevices());
  return Status::kOk;
}

Status openContext(void** ctx, uint32_t magic, uint64_t commId, int trafficClass,
                   nccl::ncclDebugLogger_t log) {
  if (ctx == nullptr) return Status::kInvalidArgument;
  *ctx = nullptr;
  CFX_RETURN_IF_ERROR(PluginState::acquire(log));
  auto* c = new NetContext();
  c->magic = magic;
  c->commId = commId;
  c->trafficClass = trafficClass;
  *ctx = c;
  return Status::kOk;
}

Status closeContext(void* ctx, uint32_t magic, const char* fn, unsigned long logFlags) {
  auto* c = static_cast<NetContext*>(ctx);
  if (c == nullptr) {
    // NCCL finalizes the context its failed init left null (plugin/net.cc): nothing was opened,
    // and the init already said why.
    CFX_INFO(logFlags, "%s: no context (its init failed): nothing to close", fn);
    return Status::kOk;
  }
  if (c->magic != magic) {
    CFX_WARN(logFlags, "%s called with an invalid context", fn);
    return Status::kInvalidArgument;
  }
  c->magic = 0;
  delete c;
  PluginState::release();
  return Status::kOk;
}

Status PluginState::loadDelegate() {
  const std::string& lib = config_.netDelegate;
#ifdef CONFLUX_NO_NET_DELEGATE
  // tests/plugin_net/delegate: this build is the delegate a test names; it carries the bytes.
  return Status::kOk;
#endif
  if (lib.empty()) return Status::kOk;
  const conflux::Status loaded = NetDelegate::load(lib, &delegate_);
  if (!loaded.ok()) {
    if (config_.netDelegateFallback) {
      CFX_WARN(net::kLogInit | net::kLogNet,
               "%s; point-to-point traffic uses Conflux's TCP net instead "
               "(CONFLUX_NET_DELEGATE_FALLBACK=1)",
               loaded.message().c_str());
      return Status::kOk;
    }
    CFX_WARN(net::kLogInit | net::kLogNet,
             "%s (set CONFLUX_NET_DELEGATE_FALLBACK=1 to use Conflux's TCP net instead)",
             loaded.message().c_str());
    return Status::kSystemError;
  }
  CFX_INFO(net::kLogInit | net::kLogNet,
           "point-to-point traffic goes over the delegate net '%s' (ncclNetPlugin_v%d of %s); "
           "CollNet stays Conflux's",
           delegate_->name(), delegate_->version(), lib.c_str());
  delegateActive_.store(delegate_.get(), std::memory_order_release);
  return Status::kOk;
}

bool PluginState::fallBackFromDelegate(Status initStatus) {
  NetDelegate* d = delegate();
  if (d == nullptr || !config_.netDelegateFallback ||
      delegateServed_.load(std::memory_order_acquire)) {
    if (d != nullptr) {
      CFX_WARN(net::kLogInit | net::kLogNet, "the delegate net '%s' (%s) failed to initialise: %s",
               d->name(), d->library().c_str(), net::toString(initStatus));
    }
    return false;
  }
  CFX_WARN(net::kLogInit | net::kLogNet,
           "the delegate net '%s' (%s) failed to initialise (%s); point-to-point traffic uses "
           "Conflux's TCP net instead (CONFLUX_NET_DELEGATE_FALLBACK=1)",
           d->name(), d->library().c_str(), net::toString(initStatus));
  delegateActive_.store(nullptr, std::memory_order_release);  // delegate_ stays loaded
  return true;
}

void PluginState::release() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_refs == 0) return;
  if (--g_refs > 0) return;
  g_owner->stopLeftoverComms();
  g_state.store(nullptr, std::memory_order_release);
  g_owner.reset();
}

PluginState* PluginState::get() { return g_state.load(std::memory_order_acquire); }

void PluginState::addComm(net::CommCore* c) {
  std::lock_guard<std::mutex> lock(commsMu_);
  comms_.insert(c);
}

void PluginState::removeComm(net::CommCore* c) {
  std::lock_guard<std::mutex> lock(commsMu_);
  comms_.erase(c);
}

void PluginState::stopLeftoverComms() {
  std::lock_guard<std::mutex> lock(commsMu_);
  if (!comms_.empty()) {
    CFX_WARN(net::kLogNet, "finalize with %zu connection(s) still open; stopping their threads",
             comms_.size());
  }
  for (net::CommCore* c : comms_) c->shutdown();  // objects stay: NCCL may still close them
  comms_.clear();
}

}  // namespace conflux::plugin
