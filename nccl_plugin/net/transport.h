// SPDX-License-Identifier: Apache-2.0
// conflux::net::TcpTransport — the point-to-point TCP transport behind the plugin's ncclNet,
// also usable directly from C++ (e.g. by CollNet for its worker ring).
//
// Object model (all in namespace conflux::net):
//   TcpTransport  devices (one per selected interface) and factory for connections.
//   ListenComm    listening endpoint; its 64-byte ConnectHandle goes to the peer out of band.
//   Connector     a connection being opened from a ConnectHandle (non-blocking).
//   SendComm      sending end: isend(); RecvComm: receiving end: irecv(); test() completes.
//
// Threads and blocking: every call below is non-blocking except the two helpers named
// *Blocking. A SendComm/RecvComm has lanes (CommOptions::nthreads) that the process's shared
// helper threads (net/progress.h) run to move the bytes, so requests progress without the
// caller polling; test() only checks.
// Each comm must be driven by one thread at a time (isend/irecv/test are not re-entrant on
// the same comm); different comms may be used from different threads. Destroying a comm
// takes its lanes off the helper threads (blocks briefly). Errors are sticky per comm and
// logged once.
//
// Semantics (same as NCCL's net API): messages match receives in posting order, by tag
// within a grouped irecv; received sizes may be smaller than posted; a message larger than
// the receive fails the comm (kInvalidUsage); a peer that closes or dies fails pending
// requests with kRemoteError.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/comm.h"
#include "net/connector.h"
#include "net/interfaces.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/status.h"
#include "net/wire.h"

namespace conflux::net {

// Opaque connection handle: produced by listen(), consumed by connect() on the peer.
struct ConnectHandle {
  uint8_t bytes[wire::kHandleBytes];
};

// Transport settings (the plugin fills them from CONFLUX_* parameters).
struct TransportConfig {
  std::string ifname;       // NCCL_SOCKET_IFNAME syntax; empty = default selection
  int nthreads = 0;         // lanes per comm; 0 = auto (1 on loopback, else 2)
  int nsocksPerThread = 0;  // data sockets per thread; 0 = auto (2)
  size_t minChunkBytes = 64 * 1024;
  size_t inlineBytes = 64 * 1024;  // messages up to this size ride on the control socket
  int socketBufBytes = 0;          // SO_SNDBUF/SO_RCVBUF; 0 = kernel autotuning
  bool callerProgress = true;      // CommOptions::callerProgress
  int stallWarnMs = 60'000;        // CommOptions::stallWarnMs
  int progressThreads = 4;         // CommOptions::progressThreads
};

class TcpTransport {
 public:
  // Discovers and selects devices. Fails (kInvalidArgument) on bad settings, or
  // (kSystemError) when no interface matches. Control path; any thread.
  static Status create(const TransportConfig& config, std::unique_ptr<TcpTransport>* out);

  int numDevices() const { return int(devices_.size()); }
  const NetDevice& device(int dev) const { return devices_[dev]; }
  bool validDevice(int dev) const { return dev >= 0 && dev < numDevices(); }
  // Resolved per-connection options for connections made on `dev`.
  CommOptions optionsFor(int dev) const;

  // Starts listening on `dev`; fills *handle. Never blocks.
  Status listen(int dev, ConnectHandle* handle, std::unique_ptr<ListenComm>* out) const;
  // Starts connecting to a peer's handle from `dev`; drive it with Connector::poll().
  Status startConnect(int dev, const ConnectHandle& handle, std::unique_ptr<Connector>* out) const;

  // Blocking helpers for control-path users (ring setup). They poll every millisecond until
  // done or `timeout` passes (then kRemoteError). Do not call them from NCCL's proxy thread.
  Status connectBlocking(int dev, const ConnectHandle& handle, std::chrono::milliseconds timeout,
                         std::unique_ptr<SendComm>* out) const;
  static Status acceptBlocking(ListenComm& listener, std::chrono::milliseconds timeout,
                               std::unique_ptr<RecvComm>* out);

  const TransportConfig& config() const { return config_; }

 private:
  TransportConfig config_;
  std::vector<NetDevice> devices_;
};

// Checks the ranges of a TransportConfig; on error writes which field is wrong to *why.
Status validateConfig(const TransportConfig& config, std::string* why);

}  // namespace conflux::net
