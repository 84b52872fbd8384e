// SPDX-License-Identifier: Apache-2.0
#include "aggregator/dataplane/dpdk/frame.h"

#include <bit>
#include <cstring>

#include "conflux/common/reduce.h"

namespace conflux::agg::dpdk {
namespace {

uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
uint32_t rd32(const uint8_t* p) {
  return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
void wr16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
void wr32(uint8_t* p, uint32_t v) {
  wr16(p, static_cast<uint16_t>(v >> 16));
  wr16(p + 2, static_cast<uint16_t>(v));
}

ParsedFrame dropped(FrameDrop d) {
  ParsedFrame f;
  f.drop = d;
  return f;
}

uint32_t pseudo_sum(uint32_t src_ip, uint32_t dst_ip, uint32_t udp_len) {
  return (src_ip >> 16) + (src_ip & 0xffff) + (dst_ip >> 16) + (dst_ip & 0xffff) + 17 + udp_len;
}

ParsedFrame parse_arp(const uint8_t* p, size_t len, const LocalAddr& local, const MacAddr& src) {
  if (len < kArpBody) return dropped(FrameDrop::kTruncated);
  if (rd16(p) != 1 || rd16(p + 2) != kEtherIpv4 || p[4] != 6 || p[5] != 4) {
    return dropped(FrameDrop::kForeign);
  }
  const uint16_t op = rd16(p + 6);
  ParsedFrame f;
  std::memcpy(f.src_mac.b, p + 8, 6);
  f.src_ip = rd32(p + 14);
  const uint32_t target_ip = rd32(p + 24);
  if (op == 1 && target_ip == local.ip && f.src_ip != local.ip) {
    f.kind = FrameKind::kArpRequest;
  } else if (op == 2 && target_ip == local.ip) {
    f.kind = FrameKind::kArpReply;
  } else {
    return dropped(FrameDrop::kForeign);
  }
  (void)src;
  return f;
}

ParsedFrame parse_udp(const uint8_t* ip, size_t len, const LocalAddr& local, CsumStatus ip_csum,
                      CsumStatus l4_csum) {
  if (len < kIpv4Header) return dropped(FrameDrop::kTruncated);
  const size_t ihl = size_t{ip[0] & 0x0fu} * 4;
  const size_t total = rd16(ip + 2);
  if ((ip[0] >> 4) != 4 || ihl < kIpv4Header || total < ihl)
    return dropped(FrameDrop::kBadIpHeader);
  if (total > len || ihl > len) return dropped(FrameDrop::kTruncated);
  if (ip_csum == CsumStatus::kBad ||
      (ip_csum == CsumStatus::kUnknown && csum_finish(csum_add(ip, ihl, 0)) != 0)) {
    return dropped(FrameDrop::kBadIpChecksum);
  }
  if (rd32(ip + 16) != local.ip) return dropped(FrameDrop::kForeign);
  if ((rd16(ip + 6) & 0x3fff) != 0) return dropped(FrameDrop::kIpFragment);
  if (ip[9] != 17) return dropped(FrameDrop::kForeign);
  const uint8_t* udp = ip + ihl;
  const size_t l4_len = total - ihl;
  if (l4_len < kUdpHeader) return dropped(FrameDrop::kTruncated);
  const size_t udp_len = rd16(udp + 4);
  if (udp_len < kUdpHeader || udp_len > l4_len) return dropped(FrameDrop::kTruncated);
  if (udp_len != l4_len) return dropped(FrameDrop::kBadIpHeader);
  ParsedFrame f;
  f.src_ip = rd32(ip + 12);
  f.src_port = rd16(udp);
  f.dst_port = rd16(udp + 2);
  if (f.dst_port < local.first_port || f.dst_port - local.first_port >= local.n_ports) {
    return dropped(FrameDrop::kForeign);
  }
  if (rd16(udp + 6) != 0) {
    if (l4_csum == CsumStatus::kBad) return dropped(FrameDrop::kBadUdpChecksum);
    if (l4_csum == CsumStatus::kUnknown) {
      const uint32_t s = csum_add(udp, udp_len, pseudo_sum(f.src_ip, local.ip, uint32_t(udp_len)));
      if (csum_finish(s) != 0) return dropped(FrameDrop::kBadUdpChecksum);
    }
  }
  f.kind = FrameKind::kUdp;
  f.payload = udp + kUdpHeader;
  f.payload_len = static_cast<uint32_t>(udp_len - kUdpHeader);
  return f;
}

}  // namespace

std::string_view frame_drop_name(FrameDrop d) {
  switch (d) {
    case FrameDrop::kNone:
      return "none";
    case FrameDrop::kTruncated:
      return "truncated_frame";
    case FrameDrop::kBadIpHeader:
      return "bad_ip_header";
    case FrameDrop::kIpFragment:
      return "ip_fragment";
    case FrameDrop::kBadIpChecksum:
      return "bad_ip_checksum";
    case FrameDrop::kBadUdpChecksum:
      return "bad_udp_checksum";
    case FrameDrop::kForeign:
      return "foreign";
  }
  return "unknown";
}

uint32_t csum_add(const uint8_t* p, size_t n, uint32_t sum) {
  // One's complement sums do not depend on byte order (RFC 1071 §2(B)): add native 32-bit
  // words into 64 bits (SIMD, the reduction engine's instruction set), fold, then swap into
  // network order.
  uint64_t s = reduce::sum_u32_words(p, n / 4);
  size_t i = n / 4 * 4;
  while (s >> 16) s = (s & 0xffff) + (s >> 16);
  if constexpr (std::endian::native == std::endian::little) s = ((s & 0xff) << 8) | (s >> 8);
  uint64_t t = uint64_t{sum} + s;
  for (; i + 2 <= n; i += 2) t += rd16(p + i);
  if (i < n) t += uint32_t{p[i]} << 8;
  while (t >> 32) t = (t & 0xffffffffu) + (t >> 32);
  return static_cast<uint32_t>(t);
}

uint16_t csum_finish(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum & 0xffff);
}

uint16_t udp_checksum(uint32_t src_ip, uint32_t dst_ip, uint16_t src_port, uint16_t dst_port,
                      uint32_t payload_len, uint32_t payload_sum) {
  const uint32_t udp_len = payload_len + kUdpHeader;
  uint64_t s =
      uint64_t{payload_sum} + pseudo_sum(src_ip, dst_ip, udp_len) + src_port + dst_port + udp_len;
  while (s >> 32) s = (s & 0xffffffffu) + (s >> 32);
  const uint16_t c = csum_finish(static_cast<uint32_t>(s));
  return c == 0 ? 0xffff : c;
}

ParsedFrame parse_frame(const uint8_t* frame, size_t len, const LocalAddr& local,
                        CsumStatus ip_csum, CsumStatus l4_csum) {
  if (len < kEthHeader) return dropped(FrameDrop::kTruncated);
  MacAddr dst, src;
  std::memcpy(dst.b, frame, 6);
  std::memcpy(src.b, frame + 6, 6);
  size_t off = kEthHeader;
  uint16_t type = rd16(frame + 12);
  uint16_t vlan = 0;
  if (type == kEtherVlan) {
    if (len < kEthHeader + kVlanTag) return dropped(FrameDrop::kTruncated);
    vlan = rd16(frame + 14) & 0x0fff;
    type = rd16(frame + 16);
    off += kVlanTag;
  }
  if (vlan != local.vlan) return dropped(FrameDrop::kForeign);
  ParsedFrame f;
  if (type == kEtherArp && (dst.is_broadcast() || dst == local.mac)) {
    f = parse_arp(frame + off, len - off, local, src);
  } else if (type == kEtherIpv4 && dst == local.mac) {
    f = parse_udp(frame + off, len - off, local, ip_csum, l4_csum);
    f.src_mac = src;
  } else {
    return dropped(FrameDrop::kForeign);
  }
  return f;
}

namespace {

// Ethernet header from `local` to `dst` (VLAN-tagged when local.vlan != 0); returns its size.
size_t build_eth(uint8_t* out, const LocalAddr& local, const MacAddr& dst, uint16_t ethertype) {
  std::memcpy(out, dst.b, 6);
  std::memcpy(out + 6, local.mac.b, 6);
  size_t off = 12;
  if (local.vlan != 0) {
    wr16(out + off, kEtherVlan);
    wr16(out + off + 2, local.vlan);
    off += kVlanTag;
  }
  wr16(out + off, ethertype);
  return off + 2;
}

}  // namespace

size_t build_udp_headers(uint8_t* out, const LocalAddr& local, const UdpHeaderSpec& s) {
  const size_t off = build_eth(out, local, s.dst_mac, kEtherIpv4);
  uint8_t* ip = out + off;
  const uint32_t udp_len = s.payload_len + kUdpHeader;
  ip[0] = 0x45;
  ip[1] = 0;
  wr16(ip + 2, static_cast<uint16_t>(udp_len + kIpv4Header));
  wr16(ip + 4, s.ip_id);
  wr16(ip + 6, 0x4000);  // DF
  ip[8] = s.ttl;
  ip[9] = 17;
  wr16(ip + 10, 0);
  wr32(ip + 12, local.ip);
  wr32(ip + 16, s.dst_ip);
  if (s.ip_csum) wr16(ip + 10, csum_finish(csum_add(ip, kIpv4Header, 0)));
  uint8_t* udp = ip + kIpv4Header;
  wr16(udp, s.src_port);
  wr16(udp + 2, s.dst_port);
  wr16(udp + 4, static_cast<uint16_t>(udp_len));
  wr16(udp + 6, s.udp_csum);
  return off + kIpv4Header + kUdpHeader;
}

MacAddr multicast_mac(uint32_t group) {
  return MacAddr{{0x01, 0x00, 0x5e, static_cast<uint8_t>((group >> 16) & 0x7f),
                  static_cast<uint8_t>(group >> 8), static_cast<uint8_t>(group)}};
}

size_t build_arp(uint8_t* out, const LocalAddr& local, uint16_t op, const MacAddr& target_mac,
                 uint32_t target_ip) {
  const MacAddr bcast{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}};
  const size_t off = build_eth(out, local, op == 1 ? bcast : target_mac, kEtherArp);
  uint8_t* a = out + off;
  wr16(a, 1);
  wr16(a + 2, kEtherIpv4);
  a[4] = 6;
  a[5] = 4;
  wr16(a + 6, op);
  std::memcpy(a + 8, local.mac.b, 6);
  wr32(a + 14, local.ip);
  std::memcpy(a + 18, (op == 1 ? MacAddr{} : target_mac).b, 6);
  wr32(a + 24, target_ip);
  const size_t len = off + kArpBody;
  const size_t min = kMinFrame + (local.vlan != 0 ? kVlanTag : 0);
  if (len < min) std::memset(out + len, 0, min - len);
  return len < min ? min : len;
}

}  // namespace conflux::agg::dpdk
