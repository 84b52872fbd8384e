// SPDX-License-Identifier: Apache-2.0
// UdpChannel::open_group: the receiving socket of an aggregator's multicast group (SPEC §8).
#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>

#include "conflux/common/udp_offload.h"
#include "errno_text.h"
#include "udp_channel.h"

namespace conflux::client {

Status UdpChannel::open_group(const sockaddr_in& group, in_addr iface, int buf_bytes,
                              size_t max_datagram, Counters* counters, bool offload) {
  CFX_TRY(create_socket(buf_bytes, max_datagram, counters));
  char name[INET_ADDRSTRLEN] = "?";
  ::inet_ntop(AF_INET, &group.sin_addr, name, sizeof name);
  const std::string where = std::string(name) + ":" + std::to_string(ntohs(group.sin_port));
  // Several ranks on one host bind the same group and port; each gets every datagram. Bound
  // to the group address, the socket takes no other group's traffic.
  const int one = 1;
  ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&group), sizeof group) != 0) {
    return system_error("UDP bind to multicast group " + where + ": " + errno_text(errno));
  }
  ip_mreq m{};
  m.imr_multiaddr = group.sin_addr;
  m.imr_interface = iface;
  if (::setsockopt(fd_, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof m) != 0) {
    return system_error("joining multicast group " + where + ": " + errno_text(errno));
  }
  membership_ = m;
  port_ = ntohs(group.sin_port);
  if (offload) {
    gro_ = udp_offload::enable_gro(fd_);
  }
  return {};
}

}  // namespace conflux::client
