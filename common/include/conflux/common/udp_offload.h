// SPDX-License-Identifier: Apache-2.0
// UDP segmentation offload, shared by confluxd's kernel-UDP dataplane and the worker engine:
// a GSO send hands the kernel many same-size datagrams to one destination as one buffer
// (UDP_SEGMENT, Linux >= 4.18), and a GRO socket (UDP_GRO, Linux >= 5.0) may return several
// datagrams of one flow as one buffer. Neither changes what goes on the wire.
#pragma once

#include <netinet/in.h>
#include <netinet/udp.h>  // UDP_SEGMENT, UDP_GRO
#include <sys/socket.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace conflux::udp_offload {

// The kernel's bounds on one GSO send: at most 64 segments (UDP_MAX_SEGMENTS on every
// kernel that has UDP_SEGMENT) and one IPv4 UDP payload (65535 - 20 - 8 bytes) in all.
inline constexpr size_t kMaxSegments = 64;
inline constexpr size_t kMaxBytes = 65507;
// Room for the control message of either option.
inline constexpr size_t kControlBytes = CMSG_SPACE(sizeof(int));
// One message's control buffer, aligned as the kernel's cmsghdr needs.
struct alignas(cmsghdr) ControlBuffer {
  char bytes[kControlBytes];
};

inline bool same_destination(const sockaddr_in& a, const sockaddr_in& b) {
  return a.sin_addr.s_addr == b.sin_addr.s_addr && a.sin_port == b.sin_port;
}

// Whether the kernel has UDP GSO (probed on a UDP socket).
inline bool gso_supported(int fd) {
  int segment = 0;
  socklen_t len = sizeof segment;
  return ::getsockopt(fd, SOL_UDP, UDP_SEGMENT, &segment, &len) == 0;
}

// Asks for coalesced receives; false when the kernel does not have UDP GRO.
inline bool enable_gro(int fd) {
  const int on = 1;
  return ::setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof on) == 0;
}

// How many datagrams of sizes len(first), len(first + 1), ... (before `end`) one GSO send
// can carry: `same(i)` says datagram i goes where `first` goes; every segment has the
// first's size but the last, which may be shorter.
template <typename Len, typename Same>
size_t run_length(size_t first, size_t end, Len&& len, Same&& same) {
  const size_t segment = len(first);
  size_t n = 1;
  size_t bytes = segment;
  while (first + n < end && n < kMaxSegments) {
    const size_t next = len(first + n);
    if (!same(first + n) || next > segment || bytes + next > kMaxBytes) break;
    bytes += next;
    ++n;
    if (next < segment) break;  // a shorter segment ends the send
  }
  return n;
}

// Marks `h` as a GSO send of `segment`-byte datagrams; `control` has kControlBytes.
inline void set_segment(msghdr& h, char* control, uint16_t segment) {
  h.msg_control = control;
  h.msg_controllen = CMSG_SPACE(sizeof(uint16_t));
  cmsghdr* c = CMSG_FIRSTHDR(&h);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
  std::memcpy(CMSG_DATA(c), &segment, sizeof segment);
}

// The segment size of a coalesced receive, or 0 for a single datagram.
inline size_t gro_segment(const msghdr& h) {
  for (const cmsghdr* c = CMSG_FIRSTHDR(&h); c != nullptr;
       c = CMSG_NXTHDR(const_cast<msghdr*>(&h), const_cast<cmsghdr*>(c))) {
    if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
      int segment = 0;
      std::memcpy(&segment, CMSG_DATA(c), sizeof segment);
      return segment > 0 ? static_cast<size_t>(segment) : 0;
    }
  }
  return 0;
}

// Whether a failed GSO send means the route cannot take GSO at all (a device without
// checksum offload, datagrams above its MTU): the caller then sends plain datagrams.
inline bool gso_refused(int err) { return err == EIO || err == EINVAL || err == EOPNOTSUPP; }

}  // namespace conflux::udp_offload
