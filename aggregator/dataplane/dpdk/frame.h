// SPDX-License-Identifier: Apache-2.0
// Ethernet (+ optional 802.1Q) / IPv4 / UDP and ARP parsing and building for the DPDK
// dataplane, on plain byte buffers (no DPDK types, so it is unit-tested without EAL).
// Every function is pure and thread-safe; the datapath calls them once per frame.
// Byte order: IPv4 addresses and ports are host order in the API, network order on the wire.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace conflux::agg::dpdk {

struct MacAddr {
  uint8_t b[6] = {0, 0, 0, 0, 0, 0};
  bool operator==(const MacAddr& o) const { return std::memcmp(b, o.b, 6) == 0; }
  bool is_broadcast() const {
    return b[0] == 0xff && b[1] == 0xff && b[2] == 0xff && b[3] == 0xff && b[4] == 0xff &&
           b[5] == 0xff;
  }
};

inline constexpr size_t kEthHeader = 14;
inline constexpr size_t kVlanTag = 4;
inline constexpr size_t kIpv4Header = 20;
inline constexpr size_t kUdpHeader = 8;
inline constexpr size_t kArpBody = 28;
inline constexpr size_t kMinFrame = 60;  // Ethernet minimum without FCS
inline constexpr uint16_t kEtherIpv4 = 0x0800;
inline constexpr uint16_t kEtherArp = 0x0806;
inline constexpr uint16_t kEtherVlan = 0x8100;
inline constexpr uint8_t kUnicastTtl = 64;  // IPv4 TTL of everything but multicast results

// Why a frame was not handed to the aggregation engine (metrics label `reason`).
enum class FrameDrop : uint8_t {
  kNone = 0,
  kTruncated,    // shorter than the headers it announces (Ethernet, VLAN, IPv4, UDP, ARP)
  kBadIpHeader,  // IPv4 version/IHL/total length inconsistent
  kIpFragment,   // MF set or fragment offset != 0 (the aggregator never reassembles)
  kBadIpChecksum,
  kBadUdpChecksum,  // non-zero UDP checksum that does not verify
  kForeign,         // not ours: other MAC, VLAN, ethertype, protocol, IPv4 address or port
};
inline constexpr int kNumFrameDrops = 7;
std::string_view frame_drop_name(FrameDrop d);

// What offload hardware said about a checksum (mbuf RX flags); kUnknown = check in software.
enum class CsumStatus : uint8_t { kUnknown, kGood, kBad };

// The aggregator's own addresses, as one dataplane queue filters and answers with them.
struct LocalAddr {
  MacAddr mac;
  uint32_t ip = 0;          // host order
  uint16_t vlan = 0;        // 0 = untagged; else frames must carry this VLAN id
  uint16_t first_port = 0;  // UDP ports first_port .. first_port + n_ports - 1 are ours
  uint16_t n_ports = 0;
};

enum class FrameKind : uint8_t { kDropped, kUdp, kArpRequest, kArpReply };

struct ParsedFrame {
  FrameKind kind = FrameKind::kDropped;
  FrameDrop drop = FrameDrop::kNone;
  MacAddr src_mac;
  uint32_t src_ip = 0;  // IPv4 source, or ARP sender address (host order)
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  const uint8_t* payload = nullptr;  // UDP payload (kUdp)
  uint32_t payload_len = 0;
};

// Classifies one received frame (without FCS). Accepts unicast to local.mac or broadcast
// (ARP), IPv4 with options, UDP checksum 0 ("none"). Never reads past frame + len.
ParsedFrame parse_frame(const uint8_t* frame, size_t len, const LocalAddr& local,
                        CsumStatus ip_csum = CsumStatus::kUnknown,
                        CsumStatus l4_csum = CsumStatus::kUnknown);

// One's complement sum of big-endian 16-bit words (odd tail padded with zero), added to sum.
uint32_t csum_add(const uint8_t* p, size_t n, uint32_t sum);
// Folds a csum_add() sum to 16 bits and complements it (the value to store).
uint16_t csum_finish(uint32_t sum);
// UDP checksum of a datagram whose payload sums (csum_add from 0) to payload_sum.
// Never 0 on the wire: a computed 0 is sent as 0xffff (RFC 768).
uint16_t udp_checksum(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                      uint32_t payload_len, uint32_t payload_sum);

// Bytes of the Ethernet(+VLAN)/IPv4/UDP headers for `vlan`.
inline size_t udp_header_len(uint16_t vlan) {
  return kEthHeader + (vlan != 0 ? kVlanTag : 0) + kIpv4Header + kUdpHeader;
}

struct UdpHeaderSpec {
  MacAddr dst_mac;
  uint32_t dst_ip = 0;
  uint16_t src_port = 0;
  uint16_t dst_port = 0;
  uint32_t payload_len = 0;
  uint16_t ip_id = 0;
  uint16_t udp_csum = 0;  // stored as given (network order is applied); 0 = none
  bool ip_csum = true;    // compute the IPv4 header checksum (false: offload, field = 0)
  uint8_t ttl = kUnicastTtl;
};

// Writes udp_header_len(local.vlan) bytes of headers at `out` (DF set, TTL s.ttl).
size_t build_udp_headers(uint8_t* out, const LocalAddr& local, const UdpHeaderSpec& s);

// IPv4 multicast (224.0.0.0/4, host order): a job's result group (protocol/SPEC.md §8).
inline bool is_ipv4_multicast(uint32_t ip) { return (ip >> 28) == 0xE; }
// The Ethernet address of IPv4 group `group` (host order): 01:00:5e and the low 23 bits of the
// group (RFC 1112 §6.4), so 32 groups share one MAC and receivers filter by IP.
MacAddr multicast_mac(uint32_t group);
// Addresses a datagram to group `group`: its MAC instead of a neighbour's (a group has no ARP
// entry), and `ttl` (multicast_ttl: 1 keeps the results on the segment).
inline void address_to_group(UdpHeaderSpec* s, uint32_t group, uint8_t ttl) {
  s->dst_mac = multicast_mac(group);
  s->dst_ip = group;
  s->ttl = ttl;
}

// Writes an ARP frame (request when op == 1, reply when op == 2) padded to kMinFrame (+VLAN)
// at `out` (room for 64 bytes). A request goes to broadcast; a gratuitous ARP is a request
// for local.ip with target_ip == local.ip. Returns the frame length.
size_t build_arp(uint8_t* out, const LocalAddr& local, uint16_t op, const MacAddr& target_mac,
                 uint32_t target_ip);

}  // namespace conflux::agg::dpdk
