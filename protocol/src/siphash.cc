// SPDX-License-Identifier: Apache-2.0
// SipHash-2-4 (Aumasson & Bernstein), written from the published algorithm description,
// and the Join authentication MAC built on it.
#include <array>
#include <cstring>
#include <vector>

#include "conflux/protocol/byteorder.h"
#include "conflux/protocol/control.h"

namespace conflux::proto {
namespace {

inline uint64_t rotl(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

struct SipState {
  uint64_t v0, v1, v2, v3;
  void round() {
    v0 += v1;
    v1 = rotl(v1, 13);
    v1 ^= v0;
    v0 = rotl(v0, 32);
    v2 += v3;
    v3 = rotl(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl(v1, 17);
    v1 ^= v2;
    v2 = rotl(v2, 32);
  }
  void absorb(uint64_t m) {
    v3 ^= m;
    round();
    round();
    v0 ^= m;
  }
};

uint64_t load_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

uint64_t siphash24(uint64_t k0, uint64_t k1, std::span<const uint8_t> data) {
  SipState s{k0 ^ 0x736f6d6570736575ULL, k1 ^ 0x646f72616e646f6dULL, k0 ^ 0x6c7967656e657261ULL,
             k1 ^ 0x7465646279746573ULL};
  const size_t n = data.size();
  const size_t whole = n & ~size_t{7};
  for (size_t i = 0; i < whole; i += 8) s.absorb(load_le64(data.data() + i));
  uint64_t last = uint64_t{n & 0xff} << 56;
  for (size_t i = 0; i < (n & 7); ++i) last |= uint64_t{data[whole + i]} << (8 * i);
  s.absorb(last);
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; ++i) s.round();
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

uint64_t join_mac(std::string_view secret, uint64_t nonce, const Join& j) {
  if (secret.empty()) return 0;
  const std::span<const uint8_t> sec(reinterpret_cast<const uint8_t*>(secret.data()),
                                     secret.size());
  // Derive a 128-bit key from the secret of any length.
  const uint64_t k0 = siphash24(0, 0, sec);
  const uint64_t k1 = siphash24(0, 1, sec);
  // The tree extension (SPEC.md §7), when present, is authenticated too: weight, served and
  // the data ports follow the 28 bytes of a plain Join.
  const size_t up_bytes = j.served_up.empty() ? 0 : 2 + 2 * j.served_up.size();
  std::vector<uint8_t> msg(j.has_tree_extension() ? 34 + 2 * j.data_ports.size() + up_bytes : 28);
  store_be<uint64_t>(msg.data(), nonce);
  store_be<uint64_t>(msg.data() + 8, j.job_key);
  store_be<uint32_t>(msg.data() + 16, j.n_workers);
  store_be<uint32_t>(msg.data() + 20, j.rank);
  store_be<uint16_t>(msg.data() + 24, j.udp_port);
  msg[26] = j.flags;
  msg[27] = 0x4a;  // domain separator: 'J'oin
  if (j.has_tree_extension()) {
    store_be<uint16_t>(msg.data() + 28, j.weight);
    store_be<uint16_t>(msg.data() + 30, j.served);
    store_be<uint16_t>(msg.data() + 32, static_cast<uint16_t>(j.data_ports.size()));
    for (size_t i = 0; i < j.data_ports.size(); ++i) {
      store_be<uint16_t>(msg.data() + 34 + 2 * i, j.data_ports[i]);
    }
    if (!j.served_up.empty()) {  // deeper trees: the levels above, as on the wire
      uint8_t* up = msg.data() + 34 + 2 * j.data_ports.size();
      store_be<uint16_t>(up, static_cast<uint16_t>(j.served_up.size()));
      for (size_t i = 0; i < j.served_up.size(); ++i) {
        store_be<uint16_t>(up + 2 + 2 * i, j.served_up[i]);
      }
    }
  }
  if ((j.flags & kJoinFlagVersions) != 0) {  // the versions extension, authenticated too
    msg.push_back(j.min_version);
    msg.push_back(j.max_version);
  }
  const uint64_t mac = siphash24(k0, k1, msg);
  return mac == 0 ? 1 : mac;  // 0 is reserved for "no authentication"
}

}  // namespace conflux::proto
