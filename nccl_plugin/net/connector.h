// SPDX-License-Identifier: Apache-2.0
// Connection establishment: Connector (sending side) and ListenComm (receiving side).
//
// A connection is 1 control socket + N data sockets. The connector opens all of them to the
// address in the listener's handle and sends a Hello on each (nonce from the handle, a random
// connection id, its index, N, and its chunk size). The listener accepts sockets, reads the
// hellos, groups them by connection id, and yields a RecvComm once all N+1 sockets arrived.
// Both sides are non-blocking state machines advanced by repeated calls (NCCL semantics).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "net/comm.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"
#include "net/wire.h"

namespace conflux::net {

class Connector {
 public:
  // Opens the sockets (non-blocking connects). Caller: any thread; never blocks.
  static Status start(const wire::Handle& handle, const CommOptions& opts,
                      std::unique_ptr<Connector>* out);

  // Advances the handshake; sets *out (and then is spent) once every socket is connected and
  // has sent its hello. Never blocks. An error is final.
  Status poll(std::unique_ptr<SendComm>* out);

  const wire::Handle& handle() const { return handle_; }

 private:
  struct Sock {
    Fd fd;
    uint8_t hello[wire::kHelloBytes];
    size_t sent = 0;
    bool connected = false;
  };

  wire::Handle handle_;
  CommOptions opts_;
  std::vector<Sock> socks_;  // [0] control, [1..N] data
};

class ListenComm {
 public:
  // Listens on `addr` (ephemeral port) and writes the connection handle. Never blocks.
  static Status create(const SockAddr& addr, const CommOptions& recvOpts,
                       uint8_t handle[wire::kHandleBytes], std::unique_ptr<ListenComm>* out);

  // Accepts pending sockets and reads their hellos; sets *out when one connection is
  // complete (else leaves it null). Never blocks. Caller: one thread at a time.
  Status accept(std::unique_ptr<RecvComm>* out);

  const SockAddr& address() const { return bound_; }

  static constexpr uint32_t kMagic = 0x4c495354;
  bool valid() const { return magic_ == kMagic; }
  ~ListenComm() { magic_ = 0; }

 private:
  struct Incoming {
    Fd fd;
    uint8_t buf[wire::kHelloBytes];
    size_t got = 0;
    std::string peer;
  };
  struct Group {
    uint64_t connId = 0;
    uint16_t numData = 0;
    uint32_t minChunk = 0;
    Fd ctrl;
    std::vector<Fd> data;
    int have = 0;
    std::string peer;
  };

  void acceptNew();
  void readHellos();
  void addToGroup(Fd fd, const wire::Hello& h, std::string peer);

  uint32_t magic_ = kMagic;
  Fd fd_;
  SockAddr bound_;
  uint64_t nonce_ = 0;
  CommOptions opts_;
  std::vector<Incoming> incoming_;
  std::vector<Group> groups_;
};

// 64 random bits (getrandom, falling back to std::random_device).
uint64_t randomU64();

}  // namespace conflux::net
