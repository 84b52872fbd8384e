// SPDX-License-Identifier: Apache-2.0
#include "udp_channel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "conflux/common/udp_offload.h"
#include "errno_text.h"

namespace conflux::client {

namespace {

size_t trailer_len(const OutDatagram& d) {
  return d.trailer != nullptr ? proto::kMacTrailerSize : 0;
}
size_t wire_len(const OutDatagram& d) {
  return proto::kDataHeaderSize + d.payload_len + trailer_len(d);
}

// Applies one fault decision to a datagram: `pass` delivers it, `hold` keeps it for later.
template <typename Pass, typename Hold>
void apply_fault(FaultAction action, Counters* ctr, Pass&& pass, Hold&& hold) {
  switch (action) {
    case FaultAction::kPass:
      pass();
      break;
    case FaultAction::kDrop:
      Counters::add(ctr->fault_dropped);
      break;
    case FaultAction::kDuplicate:
      Counters::add(ctr->fault_duplicated);
      pass();
      pass();
      break;
    case FaultAction::kReorder:
      Counters::add(ctr->fault_reordered);
      hold();
      break;
  }
}

}  // namespace

UdpChannel::~UdpChannel() {
  if (fd_ >= 0 && membership_.imr_multiaddr.s_addr != 0) {
    ::setsockopt(fd_, IPPROTO_IP, IP_DROP_MEMBERSHIP, &membership_, sizeof membership_);
  }
  if (fd_ >= 0) {
    ::close(fd_);
  }
}

Status UdpChannel::open(const std::string& bind_addr, int buf_bytes, size_t max_datagram,
                        Counters* counters, bool offload) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, bind_addr.c_str(), &a.sin_addr) != 1) {
    return invalid_argument("bind address '" + bind_addr + "' is not an IPv4 address");
  }
  CFX_TRY(create_socket(buf_bytes, max_datagram, counters));
  if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return system_error("UDP bind to " + bind_addr + ": " + errno_text(errno));
  }
  socklen_t len = sizeof a;
  ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
  port_ = ntohs(a.sin_port);
  if (offload) {
    // GSO is chosen per send (a control message); the probe tells whether the kernel has it.
    gso_ = udp_offload::gso_supported(fd_);
    gro_ = udp_offload::enable_gro(fd_);
  }
  return {};
}

Status UdpChannel::create_socket(int buf_bytes, size_t max_datagram, Counters* counters) {
  ctr_ = counters;
  max_datagram_ = max_datagram;
  fd_ = ::socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) {
    return system_error(std::string("UDP socket: ") + errno_text(errno));
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
  rx_buf_.resize(std::max(size_t{kBatch} * max_datagram_, size_t{kGroBatch} * kGroBufBytes));
  rx_out_.reserve(size_t{2} * kBatch);
  return {};
}

void UdpChannel::send_raw(std::span<const OutDatagram> batch) {
  mmsghdr msgs[kBatch];
  iovec iov[3 * kBatch];  // header, payload and MAC trailer of each datagram
  size_t segments[kBatch];
  alignas(cmsghdr) char control[kBatch][udp_offload::kControlBytes];
  size_t done = 0;
  int stalls = 0;
  while (done < batch.size()) {
    // Up to kBatch datagrams per sendmmsg, as one message each or as GSO runs.
    const size_t end = done + std::min<size_t>(kBatch, batch.size() - done);
    unsigned n_msgs = 0;
    for (size_t i = done; i < end; ++n_msgs) {
      const size_t run =
          gso_ ? udp_offload::run_length(
                     i, end, [&](size_t k) { return wire_len(batch[k]); },
                     [&](size_t k) {
                       return udp_offload::same_destination(batch[k].dst, batch[i].dst);
                     })
               : 1;
      iovec* v = &iov[3 * (i - done)];
      size_t n_iov = 0;
      for (size_t k = 0; k < run; ++k) {
        const OutDatagram& d = batch[i + k];
        v[n_iov++] = {const_cast<uint8_t*>(d.header), proto::kDataHeaderSize};
        v[n_iov++] = {const_cast<uint8_t*>(d.payload), d.payload_len};
        if (d.trailer != nullptr) v[n_iov++] = {const_cast<uint8_t*>(d.trailer), trailer_len(d)};
      }
      msgs[n_msgs] = {};
      msghdr& h = msgs[n_msgs].msg_hdr;
      h.msg_name = const_cast<sockaddr_in*>(&batch[i].dst);
      h.msg_namelen = sizeof(sockaddr_in);
      h.msg_iov = v;
      h.msg_iovlen = n_iov;
      if (run > 1) {
        udp_offload::set_segment(h, control[n_msgs], static_cast<uint16_t>(wire_len(batch[i])));
      }
      segments[n_msgs] = run;
      i += run;
    }
    const int r = ::sendmmsg(fd_, msgs, n_msgs, 0);
    if (r > 0) {
      uint64_t datagrams = 0;
      uint64_t bytes = 0;
      for (int m = 0; m < r; ++m) {
        for (size_t k = 0; k < segments[m]; ++k) {
          bytes += wire_len(batch[done + datagrams + k]);
        }
        datagrams += segments[m];
        if (segments[m] > 1) {
          Counters::add(ctr_->gso_sends);
        }
      }
      Counters::add(ctr_->packets_sent, datagrams);
      Counters::add(ctr_->bytes_sent, bytes);
      done += datagrams;
      stalls = 0;
      continue;
    }
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r < 0 && segments[0] > 1 && udp_offload::gso_refused(errno)) {
      // The route cannot take GSO sends (a device without checksum offload, or datagrams
      // above its MTU): plain datagrams from now on.
      gso_ = false;
      Counters::add(ctr_->gso_fallbacks);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == ENOBUFS) && stalls++ < 3) {
      pollfd p{fd_, POLLOUT, 0};
      ::poll(&p, 1, 1);
      continue;
    }
    // Refused (e.g. ECONNREFUSED from an earlier ICMP, or a full buffer): skip the first
    // message; the retransmission timer sends its datagrams again.
    Counters::add(ctr_->send_errors, segments[0]);
    done += segments[0];
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
    apply_fault(
        tx_faults_.next(), ctr_, [&] { tx_scratch_.push_back(d); },
        [&] {
          Held h;
          h.dst = d.dst;
          h.bytes.assign(d.header, d.header + proto::kDataHeaderSize);
          h.bytes.insert(h.bytes.end(), d.payload, d.payload + d.payload_len);
          h.bytes.insert(h.bytes.end(), d.trailer, d.trailer + trailer_len(d));
          tx_held_.push_back(std::move(h));
        });
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
    d.payload_len = static_cast<uint32_t>(h.bytes.size() - proto::kDataHeaderSize);  // + trailer
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
  alignas(cmsghdr) char control[kGroBatch][udp_offload::kControlBytes];
  const int n_bufs = gro_ ? kGroBatch : kBatch;
  const size_t buf_len = gro_ ? kGroBufBytes : max_datagram_;
  for (int i = 0; i < n_bufs; ++i) {
    iov[i] = {rx_buf_.data() + i * buf_len, buf_len};
    msgs[i] = {};
    msgs[i].msg_hdr.msg_name = &rx_from_[i];
    msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    if (gro_) {
      msgs[i].msg_hdr.msg_control = control[i];
      msgs[i].msg_hdr.msg_controllen = sizeof control[i];
    }
  }
  int r = ::recvmmsg(fd_, msgs, static_cast<unsigned>(n_bufs), MSG_DONTWAIT, nullptr);
  if (r < 0) {
    r = 0;
  }
  for (int i = 0; i < r; ++i) {
    const msghdr& h = msgs[i].msg_hdr;
    take_received(rx_buf_.data() + i * buf_len, msgs[i].msg_len, (h.msg_flags & MSG_TRUNC) != 0,
                  gro_ ? udp_offload::gro_segment(h) : 0, rx_from_[i]);
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

void UdpChannel::take_received(const uint8_t* data, size_t len, bool truncated, size_t segment,
                               const sockaddr_in& from) {
  if (segment == 0 || segment >= len) {
    segment = std::max<size_t>(len, 1);  // one datagram
  } else {
    Counters::add(ctr_->gro_receives);
  }
  uint64_t datagrams = 0;
  size_t at = 0;
  do {
    const size_t n = std::min(segment, len - at);
    // A datagram larger than the engine's own limit is refused as with plain receives.
    const InDatagram d{data + at, n, truncated || n > max_datagram_, from};
    at += n;
    ++datagrams;
    if (rx_faults_.blackout()) {
      Counters::add(ctr_->fault_dropped);
      continue;
    }
    apply_fault(
        rx_faults_.next(), ctr_, [&] { rx_out_.push_back(d); },
        [&] { rx_held_.emplace_back(d.data, d.data + d.len); });
  } while (at < len);
  Counters::add(ctr_->packets_received, datagrams);
  Counters::add(ctr_->bytes_received, len);
}

}  // namespace conflux::client
