// SPDX-License-Identifier: Apache-2.0
// Sends malformed and foreign frames to the DPDK dataplane from a raw AF_PACKET socket (root),
// `count` of each kind, built with the dataplane's own frame code then broken on purpose:
//   dpdk_hostile_frames IFACE AGG_MAC SRC_IP AGG_IP DATA_PORT COUNT
// Expected drop counters per kind are printed (reason=count), one per line.
#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "aggregator/dataplane/dpdk/frame.h"

using namespace conflux::agg::dpdk;

namespace {

bool parse_mac(const char* s, MacAddr* m) {
  unsigned v[6];
  if (std::sscanf(s, "%x:%x:%x:%x:%x:%x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5]) != 6) {
    return false;
  }
  for (int i = 0; i < 6; ++i) m->b[i] = uint8_t(v[i]);
  return true;
}

void fix_ip_csum(std::vector<uint8_t>& f) {
  uint8_t* ip = f.data() + kEthHeader;
  ip[10] = ip[11] = 0;
  const uint16_t c = csum_finish(csum_add(ip, kIpv4Header, 0));
  ip[10] = uint8_t(c >> 8);
  ip[11] = uint8_t(c);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s IFACE AGG_MAC SRC_IP AGG_IP DATA_PORT COUNT\n", argv[0]);
    return 2;
  }
  LocalAddr me;  // the sender's addresses (MAC: whatever; the PMD only checks the destination)
  me.mac = MacAddr{{0x02, 0xba, 0xd0, 0, 0, 1}};
  MacAddr agg_mac;
  in_addr src{}, dst{};
  if (!parse_mac(argv[2], &agg_mac) || inet_pton(AF_INET, argv[3], &src) != 1 ||
      inet_pton(AF_INET, argv[4], &dst) != 1) {
    std::fprintf(stderr, "bad address\n");
    return 2;
  }
  me.ip = ntohl(src.s_addr);
  const auto port = uint16_t(std::atoi(argv[5]));
  const int count = std::atoi(argv[6]);
  const int fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
  if (fd < 0) {
    std::perror("socket(AF_PACKET)");
    return 1;
  }
  sockaddr_ll to{};
  to.sll_family = AF_PACKET;
  to.sll_ifindex = int(if_nametoindex(argv[1]));
  to.sll_halen = 6;
  std::copy(agg_mac.b, agg_mac.b + 6, to.sll_addr);

  // A well-formed UDP datagram to the data port whose payload is not a Conflux header.
  auto udp = [&](uint16_t dport, size_t n) {
    std::vector<uint8_t> payload(n, 0xab);
    std::vector<uint8_t> f(udp_header_len(0) + n);
    UdpHeaderSpec s;
    s.dst_mac = agg_mac;
    s.dst_ip = ntohl(dst.s_addr);
    s.src_port = 40999;
    s.dst_port = dport;
    s.payload_len = uint32_t(n);
    s.udp_csum =
        udp_checksum(me.ip, s.dst_ip, 40999, dport, uint32_t(n), csum_add(payload.data(), n, 0));
    const size_t h = build_udp_headers(f.data(), me, s);
    std::copy(payload.begin(), payload.end(), f.begin() + long(h));
    return f;
  };
  struct Kind {
    const char* reason;
    std::vector<uint8_t> frame;
  };
  std::vector<Kind> kinds;
  auto frag = udp(port, 100);
  frag[kEthHeader + 6] = 0x20;  // MF
  fix_ip_csum(frag);
  kinds.push_back({"ip_fragment", frag});
  auto bad_ip = udp(port, 100);
  bad_ip[kEthHeader + 10] ^= 0x5a;
  kinds.push_back({"bad_ip_checksum", bad_ip});
  auto bad_udp = udp(port, 100);
  bad_udp.back() ^= 0x01;
  kinds.push_back({"bad_udp_checksum", bad_udp});
  auto trunc = udp(port, 100);
  trunc.resize(kEthHeader + 16);  // cut inside the IPv4 header
  kinds.push_back({"truncated_frame", trunc});
  auto short_udp = udp(port, 100);
  short_udp.resize(short_udp.size() - 40);  // IPv4 total length says 40 bytes more
  kinds.push_back({"truncated_frame", short_udp});
  auto v6 = udp(port, 100);
  v6[12] = 0x86;
  v6[13] = 0xdd;
  kinds.push_back({"foreign", v6});
  kinds.push_back({"foreign", udp(9, 100)});  // UDP to a port that is not ours
  auto tcp = udp(port, 100);
  tcp[kEthHeader + 9] = 6;
  fix_ip_csum(tcp);
  kinds.push_back({"foreign", tcp});
  kinds.push_back({"bad_magic", udp(port, 100)});  // passes the frame layer; the engine drops it

  for (const Kind& k : kinds) {
    for (int i = 0; i < count; ++i) {
      if (sendto(fd, k.frame.data(), k.frame.size(), 0, reinterpret_cast<sockaddr*>(&to),
                 sizeof(to)) < 0) {
        std::perror("sendto");
        return 1;
      }
    }
  }
  // Expected counts (kinds sharing a reason add up).
  std::vector<std::pair<std::string, int>> expect;
  for (const Kind& k : kinds) {
    bool found = false;
    for (auto& e : expect) {
      if (e.first == k.reason) {
        e.second += count;
        found = true;
      }
    }
    if (!found) expect.push_back({k.reason, count});
  }
  for (const auto& [r, n] : expect) std::printf("%s=%d\n", r.c_str(), n);
  close(fd);
  return 0;
}
