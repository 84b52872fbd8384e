// SPDX-License-Identifier: Apache-2.0
#include "test_client.h"

#include <arpa/inet.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <set>
#include <sstream>

#include "conflux/common/http_client.h"
#include "conflux/protocol/admin_auth.h"

namespace conflux::agg::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<uint32_t> g_daemon_ip{INADDR_LOOPBACK};
std::atomic<uint32_t> g_local_ip{INADDR_LOOPBACK};
std::atomic<uint32_t> g_data_daemon_ip{0};
std::atomic<uint32_t> g_data_local_ip{0};

uint32_t data_daemon_ip() { return g_data_daemon_ip != 0 ? g_data_daemon_ip.load() : daemon_ip(); }
uint32_t data_local_ip() { return g_data_local_ip != 0 ? g_data_local_ip.load() : local_ip(); }

sockaddr_in addr(uint32_t ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(ip);
  return a;
}

bool wait_readable(int fd, int timeout_ms) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, timeout_ms) > 0;
}

}  // namespace

void set_endpoints(uint32_t daemon, uint32_t local, uint32_t data_daemon, uint32_t data_local) {
  g_daemon_ip = daemon;
  g_local_ip = local;
  g_data_daemon_ip = data_daemon;
  g_data_local_ip = data_local;
}
uint32_t daemon_ip() { return g_daemon_ip; }
uint32_t local_ip() { return g_local_ip; }

ControlClient::~ControlClient() { close(); }

void ControlClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool ControlClient::connect(uint16_t port) {
  fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const sockaddr_in a = addr(daemon_ip(), port);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof(a)) != 0) return false;
  auto m = recv(2000);
  if (!m || !std::holds_alternative<proto::ServerHello>(*m)) return false;
  hello_ = std::get<proto::ServerHello>(*m);
  return true;
}

bool ControlClient::send(const proto::ControlMsg& m) {
  std::vector<uint8_t> out;
  proto::encode_control(m, out);
  return send_raw(out);
}

bool ControlClient::send_raw(std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::optional<proto::ControlMsg> ControlClient::recv(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    proto::ControlMsg m;
    size_t used = 0;
    const auto r = proto::parse_control(buf_, &m, &used);
    if (r == proto::ControlParse::kOk) {
      buf_.erase(buf_.begin(), buf_.begin() + static_cast<ptrdiff_t>(used));
      return m;
    }
    if (r != proto::ControlParse::kNeedMore) return std::nullopt;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || !wait_readable(fd_, static_cast<int>(left.count())))
      return std::nullopt;
    uint8_t tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return std::nullopt;
    buf_.insert(buf_.end(), tmp, tmp + n);
  }
}

std::optional<proto::ControlMsg> ControlClient::recv_skip_heartbeats(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto m = recv(static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (!m) return m;
    if (auto* hb = std::get_if<proto::Heartbeat>(&*m)) {
      send(proto::HeartbeatAck{hb->time_ns});
      continue;
    }
    return m;
  }
}

bool ControlClient::wait_closed(int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0 || !wait_readable(fd_, static_cast<int>(left.count()))) return false;
    uint8_t tmp[4096];
    const ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
  }
}

UdpClient::UdpClient() {
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  const int bytes = 4 << 20;
  setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &bytes, sizeof(bytes));
  sockaddr_in a = addr(data_local_ip(), 0);
  bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
}

UdpClient::~UdpClient() { ::close(fd_); }

bool UdpClient::send_to(uint16_t port, std::span<const uint8_t> bytes) {
  const sockaddr_in a = addr(data_daemon_ip(), port);
  return sendto(fd_, bytes.data(), bytes.size(), 0, reinterpret_cast<const sockaddr*>(&a),
                sizeof(a)) == static_cast<ssize_t>(bytes.size());
}

std::optional<std::vector<uint8_t>> UdpClient::recv(int timeout_ms) {
  if (!wait_readable(fd_, timeout_ms)) return std::nullopt;
  std::vector<uint8_t> buf(65536);
  const ssize_t n = ::recv(fd_, buf.data(), buf.size(), MSG_DONTWAIT);
  if (n < 0) return std::nullopt;
  buf.resize(static_cast<size_t>(n));
  return buf;
}

bool Worker::start_join(uint16_t control_port, const JoinSpec& s) {
  if (!ctl.connect(control_port)) return false;
  rank = s.rank;
  contributor = static_cast<uint16_t>(s.rank);
  proto::Join j;
  j.job_key = s.job_key;
  j.n_workers = s.n_workers;
  j.rank = s.rank;
  j.udp_addr = g_data_local_ip;  // 0: the daemon uses the control connection's peer address
  j.udp_port = udp.port();
  j.flags = s.flags;
  j.requested_slots = s.requested_slots;
  j.payload_bytes = s.payload_bytes;
  j.join_timeout_ms = s.join_timeout_ms;
  j.min_version = s.min_version;
  j.max_version = s.max_version;
  if (!s.secret.empty()) j.auth_mac = proto::join_mac(s.secret, ctl.hello().nonce, j);
  if (s.corrupt_mac) j.auth_mac ^= 0x5a5a;
  return ctl.send(j);
}

proto::Status Worker::finish_join(int timeout_ms) {
  auto m = ctl.recv_skip_heartbeats(timeout_ms);
  if (!m || !std::holds_alternative<proto::JoinAck>(*m)) return proto::Status::kInternal;
  ack = std::get<proto::JoinAck>(*m);
  return ack.status;
}

std::vector<uint8_t> make_datagram(const proto::DataHeader& h, std::span<const uint8_t> payload) {
  std::vector<uint8_t> d(proto::kDataHeaderSize + payload.size());
  proto::encode_data_header(h, d.data());
  std::memcpy(d.data() + proto::kDataHeaderSize, payload.data(), payload.size());
  return d;
}

bool Worker::send_contrib(uint32_t slot, uint32_t generation, uint64_t offset, DType dt, Op op,
                          std::span<const uint8_t> payload, bool retransmit, int owner) {
  proto::DataHeader h;
  h.type = proto::PacketType::kContrib;
  h.flags = retransmit ? proto::kFlagRetransmit : 0;
  if (owner >= 0) {
    h.flags |= proto::kFlagOwned;
    h.owner = static_cast<uint16_t>(owner);
  }
  h.job_id = ack.job_id;
  h.contributor = contributor;
  h.job_token = ack.job_token;
  h.slot = slot;
  h.generation = generation;
  h.offset = offset;
  h.count = static_cast<uint32_t>(payload.size() / dtype_size(dt));
  h.dtype = dt;
  h.op = op;
  return udp.send_to(port_for(slot), make_datagram(h, payload));
}

namespace {
// Through the tree's one HTTP client (conflux/common/http_client.h): the body whatever the
// status, and the status (0 when the daemon did not answer).
std::string http_request(const char* method, uint16_t port, const std::string& path, int* status,
                         const std::vector<std::string>& headers) {
  in_addr ip{};
  ip.s_addr = htonl(daemon_ip());
  char host[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &ip, host, sizeof host);
  std::string err;
  const auto a = http::request(method, host, port, path, headers, 3000, &err);
  if (status != nullptr) *status = a ? a->status : 0;
  return a ? a->body : "";
}
}  // namespace

std::string http_get(uint16_t port, const std::string& path, int* status) {
  return http_request("GET", port, path, status, {});
}

std::string http_post(uint16_t port, const std::string& path, int* status,
                      const std::string& secret) {
  std::vector<std::string> headers;
  if (!secret.empty()) {
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    headers.push_back(std::string(proto::kAdminAuthHeader) + ": " +
                      proto::admin_auth_value(secret, path, now));
  }
  return http_request("POST", port, path, status, headers);
}

uint64_t metric_sum(const std::string& text, const std::string& name,
                    const std::map<std::string, std::string>& labels) {
  uint64_t sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t name_end = line.find_first_of("{ ");
    if (line.substr(0, name_end) != name) continue;
    std::string label_text;
    if (line[name_end] == '{') label_text = line.substr(name_end, line.find('}') - name_end + 1);
    bool match = true;
    for (const auto& [k, v] : labels) {
      match = match && label_text.find(k + "=\"" + v + "\"") != std::string::npos;
    }
    if (match) sum += std::stoull(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

}  // namespace conflux::agg::testing
