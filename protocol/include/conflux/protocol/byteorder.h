// SPDX-License-Identifier: Apache-2.0
// Explicit big-endian (network order) loads and stores for wire fields.
// Memory may be unaligned; these compile to a load plus a byte swap.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

namespace conflux::proto {

template <typename T>
constexpr T bswap(T v) {
  if constexpr (sizeof(T) == 2) {
    return static_cast<T>(__builtin_bswap16(static_cast<uint16_t>(v)));
  } else if constexpr (sizeof(T) == 4) {
    return static_cast<T>(__builtin_bswap32(static_cast<uint32_t>(v)));
  } else if constexpr (sizeof(T) == 8) {
    return static_cast<T>(__builtin_bswap64(static_cast<uint64_t>(v)));
  } else {
    return v;
  }
}

template <typename T>
inline T load_be(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
    v = bswap(v);
  }
  return v;
}

template <typename T>
inline void store_be(uint8_t* p, T v) {
  if constexpr (std::endian::native == std::endian::little && sizeof(T) > 1) {
    v = bswap(v);
  }
  std::memcpy(p, &v, sizeof(T));
}

}  // namespace conflux::proto
