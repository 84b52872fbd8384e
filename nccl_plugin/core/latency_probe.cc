#include "core/latency_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "net/log.h"
#include "net/recv_comm.h"
#include "net/send_comm.h"

namespace conflux::plugin {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kProbeTimeout = std::chrono::seconds(2);

struct Pair {
  std::unique_ptr<net::SendComm> send;
  std::unique_ptr<net::RecvComm> recv;
};

// One connection from `dev` to itself: connect completes without the accept (the listener's
// backlog holds it), then the accept takes it.
net::Status connectToSelf(const net::TcpTransport& t, int dev, Pair* p, Clock::time_point end) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now());
  net::ConnectHandle h;
  std::unique_ptr<net::ListenComm> l;
  CFX_RETURN_IF_ERROR(t.listen(dev, &h, &l));
  CFX_RETURN_IF_ERROR(t.connectBlocking(dev, h, left, &p->send));
  return net::TcpTransport::acceptBlocking(*l, left, &p->recv);
}

}  // namespace

float measureStackLatencyUs(const net::TcpTransport& t, int dev, int rounds) {
  const Clock::time_point end = Clock::now() + kProbeTimeout;
  Pair a, b;  // a: there, b: back
  net::Status s = connectToSelf(t, dev, &a, end);
  if (s == net::Status::kOk) s = connectToSelf(t, dev, &b, end);
  std::vector<double> rtt;
  rtt.reserve(size_t(rounds));
  uint64_t out = 0, in = 0, back = 0;
  for (int i = 0; s == net::Status::kOk && i < rounds + 4; ++i) {  // 4 warm-up rounds
    const Clock::time_point t0 = Clock::now();
    void* data[1] = {&in};
    size_t size[1] = {sizeof in};
    int tag[1] = {i};
    net::Request *rx = nullptr, *tx = nullptr, *rx2 = nullptr, *tx2 = nullptr;
    s = a.recv->irecv(1, data, size, tag, &rx);
    if (s == net::Status::kOk) s = a.send->isend(&out, sizeof out, i, &tx);
    if (s == net::Status::kOk && (rx == nullptr || tx == nullptr)) s = net::Status::kInternalError;
    if (s == net::Status::kOk) s = net::waitRequest(rx, end);
    if (s == net::Status::kOk) s = net::waitRequest(tx, end);
    // The echo, on the connection back.
    void* echo[1] = {&back};  // not `in`, which the echo's send reads meanwhile
    if (s == net::Status::kOk) s = b.recv->irecv(1, echo, size, tag, &rx2);
    if (s == net::Status::kOk) s = b.send->isend(&in, sizeof in, i, &tx2);
    if (s == net::Status::kOk && (rx2 == nullptr || tx2 == nullptr))
      s = net::Status::kInternalError;
    if (s == net::Status::kOk) s = net::waitRequest(rx2, end);
    if (s == net::Status::kOk) s = net::waitRequest(tx2, end);
    if (s == net::Status::kOk && i >= 4) {
      rtt.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
    }
    ++out;
  }
  if (s != net::Status::kOk || rtt.empty()) {
    CFX_INFO(net::kLogInit, "latency probe on device %d failed (%s); reporting latency 0", dev,
             net::toString(s));
    return -1.0f;
  }
  std::nth_element(rtt.begin(), rtt.begin() + rtt.size() / 2, rtt.end());
  return float(rtt[rtt.size() / 2] / 2.0);
}

}  // namespace conflux::plugin
