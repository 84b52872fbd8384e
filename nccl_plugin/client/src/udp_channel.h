// SPDX-License-Identifier: Apache-2.0
// The engine's one UDP socket (kernel UDP, IPv4), batched with sendmmsg/recvmmsg, with
// in test builds the fault injector (fault.h) applied to every datagram in both directions.
// Owned and used by the progress thread only (open() runs in Engine::create).
//
// Segmentation offload (when open() is asked for it and the kernel has it): consecutive
// same-size datagrams to one destination leave as one UDP GSO send (UDP_SEGMENT: one skb
// through the stack, cut into wire datagrams at the device or not at all on loopback), and
// the socket takes coalesced datagrams (UDP_GRO) that receive() cuts apart again. The wire
// format is unchanged: every datagram is exactly what a plain send would have produced.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "counters.h"
#include "fault.h"

namespace conflux::client {

// One datagram to send: a 48-byte header and a payload, gathered by the kernel.
struct OutDatagram {
  sockaddr_in dst{};
  const uint8_t* header = nullptr;
  const uint8_t* payload = nullptr;
  uint32_t payload_len = 0;
  const uint8_t* trailer = nullptr;  // data MAC trailer (proto::kMacTrailerSize bytes) or none
};

// One received datagram; `data` stays valid until the next receive().
struct InDatagram {
  const uint8_t* data = nullptr;
  size_t len = 0;
  bool truncated = false;  // larger than the receive buffer
  sockaddr_in from{};      // the sender (zero for a datagram held back by fault injection)
};

class UdpChannel {
 public:
  UdpChannel() = default;
  ~UdpChannel();
  UdpChannel(const UdpChannel&) = delete;
  UdpChannel& operator=(const UdpChannel&) = delete;

  // Binds a non-blocking socket to bind_addr:0 with socket buffers of buf_bytes.
  // max_datagram sizes the receive buffers. Returns ok or what failed.
  // offload: try UDP GSO and GRO (either is dropped quietly where the kernel lacks it).
  Status open(const std::string& bind_addr, int buf_bytes, size_t max_datagram, Counters* counters,
              bool offload = false);
  // group_channel.cc: instead of open(), a socket that receives the multicast group
  // `group` (address and port) joined on the interface with address `iface` (SPEC §8). It
  // only receives; the group is left when the channel is destroyed.
  Status open_group(const sockaddr_in& group, in_addr iface, int buf_bytes, size_t max_datagram,
                    Counters* counters, bool offload);
#ifdef CONFLUX_TEST_HOOKS
  // Test builds: the datagram faults this channel applies from now on (fault.h arm_faults);
  // `stream` seeds its two injectors (send, receive).
  void set_faults(const FaultInjection& f, uint64_t stream) {
    tx_faults_ = FaultInjector(f, 2 * stream);
    rx_faults_ = FaultInjector(f, 2 * stream + 1);
  }
#endif
  int fd() const { return fd_; }
  uint16_t port() const { return port_; }
  // Effective SO_RCVBUF (the kernel reports twice the usable payload space).
  int rcvbuf_bytes() const { return rcvbuf_; }
  // Whether sends are segmented by the kernel (UDP GSO) / receives may be coalesced (GRO).
  bool gso() const { return gso_; }
  bool gro() const { return gro_; }

  // Sends every datagram (minus injected drops). A datagram the kernel refuses is
  // counted in send_errors and left to the retransmission timer.
  void send(std::span<const OutDatagram> batch);

  // Reads up to one batch without blocking; returns the datagrams to process (injected
  // drops removed, duplicates repeated, reordered ones delivered on a later call).
  std::span<const InDatagram> receive();

  // Datagrams held back by reordering in either direction.
  bool has_held() const { return !tx_held_.empty() || !rx_held_.empty(); }
  // Sends / delivers (on the next receive) the held datagrams now.
  void release_held();

 private:
  struct Held {
    sockaddr_in dst{};
    std::vector<uint8_t> bytes;
  };
  // The socket with its buffers, fault injectors and receive buffers, not bound yet.
  Status create_socket(int buf_bytes, size_t max_datagram, Counters* counters);
  void send_raw(std::span<const OutDatagram> batch);
  void send_held_tx();

  // Appends the datagrams of one received buffer (several when the kernel coalesced them).
  void take_received(const uint8_t* data, size_t len, bool truncated, size_t segment,
                     const sockaddr_in& from);

  static constexpr int kBatch = 64;
  static constexpr int kGroBatch = 16;           // receive buffers when GRO is on
  static constexpr size_t kGroBufBytes = 65536;  // > any coalesced UDP payload
  int fd_ = -1;
  bool gso_ = false;
  bool gro_ = false;
  uint16_t port_ = 0;
  int rcvbuf_ = 0;
  size_t max_datagram_ = 0;
  Counters* ctr_ = nullptr;
  FaultInjector tx_faults_;  // test builds: fault.h (arm_faults); otherwise they always pass
  FaultInjector rx_faults_;
  std::vector<uint8_t> rx_buf_;  // kBatch * max_datagram_
  sockaddr_in rx_from_[kBatch]{};
  ip_mreq membership_{};  // the group joined by open_group (imr_multiaddr 0: none)
  std::vector<InDatagram> rx_out_;
  std::vector<std::vector<uint8_t>> rx_held_, rx_delivering_;
  bool rx_release_ = false;
  std::vector<Held> tx_held_;
  std::vector<OutDatagram> tx_scratch_;
};

}  // namespace conflux::client
