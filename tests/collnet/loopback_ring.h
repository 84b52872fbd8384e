// SPDX-License-Identifier: Apache-2.0
// N ranks' ring connections over the real p2p transport on loopback (each rank sends to
// rank + 1 and receives from rank - 1), for tests that run the ranks as threads.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "collnet/ring_allreduce.h"
#include "net/transport.h"

namespace conflux::collnet {

struct Ring {
  std::unique_ptr<net::TcpTransport> transport;
  std::vector<std::unique_ptr<net::SendComm>> next;
  std::vector<std::unique_ptr<net::RecvComm>> prev;

  explicit Ring(int n) : next(n), prev(n) {
    using namespace std::chrono_literals;
    net::TransportConfig cfg;
    cfg.ifname = "lo";
    EXPECT_EQ(net::TcpTransport::create(cfg, &transport), net::Status::kOk);
    std::vector<std::unique_ptr<net::ListenComm>> listeners(n);
    std::vector<net::ConnectHandle> handles(n);
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(transport->listen(0, &handles[r], &listeners[r]), net::Status::kOk);
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(transport->connectBlocking(0, handles[(r + 1) % n], 5s, &next[r]),
                net::Status::kOk);
    }
    for (int r = 0; r < n; ++r) {
      EXPECT_EQ(net::TcpTransport::acceptBlocking(*listeners[r], 5s, &prev[r]), net::Status::kOk);
    }
  }
  RingLinks links(int r) { return {r, int(next.size()), next[r].get(), prev[r].get()}; }
};

}  // namespace conflux::collnet
