#include "udp_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "errno_text.h"

namespace conflux::client {

UdpChannel::~UdpChannel() {
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

std::string UdpChannel::open(const std::string& bind_addr, int buf_bytes, size_t max_datagram,
                             const FaultInjection& faults, uint32_t rank, Counters* counters) {
  ctr_ = counters;
  max_datagram_ = max_datagram;
  tx_faults_ = FaultInjector(faults, 2ull * rank);
  rx_faults_ = FaultInjector(faults, 2ull * rank + 1);
  rx_blackout_after_ = faults.rx_blackout_after;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, bind_addr.c_str(), &a.sin_addr) != 1) {
    return "bind address '" + bind_addr + "' is not an IPv4 address";
  }
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    return std::string("UDP socket: ") + errno_text(errno);
  }
  // Best effort: the *FORCE variants need CAP_NET_ADMIN; the plain ones are capped at
  // net.core.{r,w}mem_max.
  if (::setsockopt(fd_, SOL_SOCKET, SO_RCVBUFFORCE, &buf_bytes, sizeof buf_bytes) != 0) {
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &buf_bytes, sizeof buf_bytes);
  }
  if (::setsockopt(fd_, SOL_SOCKET, SO_SNDBUFFORCE, &buf_bytes, sizeof buf_bytes) != 0) {
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDBUF, &buf_bytes, sizeof buf_bytes);
  }
  socklen_t olen = sizeof rcvbuf_;
  ::getsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf_, &olen);
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return "UDP bind to " + bind_addr + ": " + errno_text(errno);
  }
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  rx_buf_.resize(size_t{kBatch} * max_datagram_);
  rx_out_.reserve(size_t{2} * kBatch);
  return "";
}

void UdpChannel::send_raw(std::span<const OutDatagram> batch) {
  mmsghdr msgs[kBatch];
  iovec iov[kBatch][2];
  size_t done = 0;
  int stalls = 0;
  while (done < batch.size()) {
    const size_t n = std::min<size_t>(kBatch, batch.size() - done);
    for (size_t i = 0; i < n; ++i) {
      const OutDatagram& d = batch[done + i];
      iov[i][0] = {const_cast<uint8_t*>(d.header), proto::kDataHeaderSize};
      iov[i][1] = {const_cast<uint8_t*>(d.payload), d.payload_len};
      msgs[i] = {};
      msgs[i].msg_hdr.msg_name = const_cast<sockaddr_in*>(&d.dst);
      msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
      msgs[i].msg_hdr.msg_iov = iov[i];
      msgs[i].msg_hdr.msg_iovlen = 2;
    }
    const int r = ::sendmmsg(fd_, msgs, static_cast<unsigned>(n), 0);
    if (r > 0) {
      uint64_t bytes = 0;
      for (int i = 0; i < r; ++i) {
        bytes += proto::kDataHeaderSize + batch[done + i].payload_len;
      }
      Counters::add(ctr_->packets_sent, static_cast<uint64_t>(r));
      Counters::add(ctr_->bytes_sent, bytes);
      done += static_cast<size_t>(r);
      stalls = 0;
      continue;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && stalls++ < 3) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 1);
      continue;
    }
    // Refused (e.g. ECONNREFUSED from an earlier ICMP, or a full buffer): skip this one;
    // its retransmission timer will send it again.
    Counters::add(ctr_->send_errors);
    ++done;
  }
}

void UdpChannel::send(std::span<const OutDatagram> batch) {
  if (!tx_faults_.enabled()) {
    send_raw(batch);
    return;
  }
  const size_t held_before = tx_held_.size();
  tx_scratch_.clear();
  for (const OutDatagram& d : batch) {
    switch (tx_faults_.next()) {
      case FaultAction::kPass:
        tx_scratch_.push_back(d);
        break;
      case FaultAction::kDrop:
        Counters::add(ctr_->fault_dropped);
        break;
      case FaultAction::kDuplicate:
        Counters::add(ctr_->fault_duplicated);
        tx_scratch_.push_back(d);
        tx_scratch_.push_back(d);
        break;
      case FaultAction::kReorder: {
        Counters::add(ctr_->fault_reordered);
        Held h;
        h.dst = d.dst;
        h.bytes.assign(d.header, d.header + proto::kDataHeaderSize);
        h.bytes.insert(h.bytes.end(), d.payload, d.payload + d.payload_len);
        tx_held_.push_back(std::move(h));
        break;
      }
    }
  }
  send_raw(tx_scratch_);
  // Datagrams held on an earlier call now go out behind this batch.
  if (held_before > 0) {
    std::vector<Held> keep(std::make_move_iterator(tx_held_.begin() + held_before),
                           std::make_move_iterator(tx_held_.end()));
    tx_held_.resize(held_before);
    send_held_tx();
    tx_held_ = std::move(keep);
  }
}

void UdpChannel::send_held_tx() {
  tx_scratch_.clear();
  for (const Held& h : tx_held_) {
    OutDatagram d;
    d.dst = h.dst;
    d.header = h.bytes.data();
    d.payload = h.bytes.data() + proto::kDataHeaderSize;
    d.payload_len = static_cast<uint32_t>(h.bytes.size() - proto::kDataHeaderSize);
    tx_scratch_.push_back(d);
  }
  send_raw(tx_scratch_);
  tx_held_.clear();
}

void UdpChannel::release_held() {
  if (!tx_held_.empty()) {
    send_held_tx();
  }
  if (!rx_held_.empty()) {
    rx_release_ = true;
  }
}

std::span<const InDatagram> UdpChannel::receive() {
  rx_out_.clear();
  rx_delivering_.clear();
  // Datagrams held back on earlier calls are delivered behind this call's batch.
  const bool deliver_held = !rx_held_.empty();
  if (deliver_held) {
    rx_delivering_.swap(rx_held_);
  }

  mmsghdr msgs[kBatch];
  iovec iov[kBatch];
  for (int i = 0; i < kBatch; ++i) {
    iov[i] = {rx_buf_.data() + i * max_datagram_, max_datagram_};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
  }
  int r = ::recvmmsg(fd_, msgs, kBatch, MSG_DONTWAIT, nullptr);
  if (r < 0) {
    r = 0;
  }
  uint64_t bytes = 0;
  for (int i = 0; i < r; ++i) {
    InDatagram d{rx_buf_.data() + i * max_datagram_, msgs[i].msg_len,
                 (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0};
    bytes += d.len;
    if (rx_blackout_after_ > 0 && ++rx_seen_ > rx_blackout_after_) {
      Counters::add(ctr_->fault_dropped);
      continue;
    }
    switch (rx_faults_.next()) {
      case FaultAction::kPass:
        rx_out_.push_back(d);
        break;
      case FaultAction::kDrop:
        Counters::add(ctr_->fault_dropped);
        break;
      case FaultAction::kDuplicate:
        Counters::add(ctr_->fault_duplicated);
        rx_out_.push_back(d);
        rx_out_.push_back(d);
        break;
      case FaultAction::kReorder:
        Counters::add(ctr_->fault_reordered);
        rx_held_.emplace_back(d.data, d.data + d.len);
        break;
    }
  }
  if (r > 0) {
    Counters::add(ctr_->packets_received, static_cast<uint64_t>(r));
    Counters::add(ctr_->bytes_received, bytes);
  }
  if (deliver_held && (r > 0 || rx_release_)) {
    for (const auto& h : rx_delivering_) {
      rx_out_.push_back({h.data(), h.size(), false});
    }
    rx_release_ = false;
  } else if (deliver_held) {
    // Nothing new arrived: keep holding them (release_held() forces delivery).
    for (auto& h : rx_delivering_) {
      rx_held_.push_back(std::move(h));
    }
    rx_delivering_.clear();
  }
  return rx_out_;
}

}  // namespace conflux::client
