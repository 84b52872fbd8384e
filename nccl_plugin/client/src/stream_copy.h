// SPDX-License-Identifier: Apache-2.0
// stream_copy: memcpy for a destination that is not read again soon from this core's cache:
// the failover's copy of each result's end (result_tails.h), and the result of a large
// request. On x86-64 it writes with non-temporal (streaming) stores: the copy does not first
// read the destination's cache lines from memory, nor evict the lines the engine works on. Ends
// with a store fence, so a release store after it publishes the bytes as it would after a memcpy
// (streaming stores are weakly ordered). Elsewhere it is memcpy.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace conflux::client {

// Results of at least this many bytes are written to the caller's buffer with stream_copy:
// more than a core's L2 holds, so the caller would read them from memory anyway.
inline constexpr uint64_t kStreamedResultBytes = 256 << 10;
// Below this many bytes a plain copy is as cheap as a streamed one.
inline constexpr size_t kMinStreamedBytes = 1024;

namespace detail {

// Copies n bytes from src to dst, and to `also` when it is not null (then equally aligned to 16
// bytes as dst), reading src once: plain copies of the unaligned head and the tail, 64-byte
// blocks with streaming stores between, and a store fence at the end. x86-64, n > 0.
inline void stream_to(uint8_t* dst, uint8_t* also, const uint8_t* src, size_t n) {
#if defined(__x86_64__)
  const size_t head = std::min(n, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  const auto plain = [&](size_t bytes) {
    std::memcpy(dst, src, bytes);
    if (also != nullptr) std::memcpy(also, src, bytes);
  };
  const auto advance = [&](size_t bytes) {
    dst += bytes;
    src += bytes;
    n -= bytes;
    if (also != nullptr) also += bytes;
  };
  plain(head);
  advance(head);
  for (; n >= 64; advance(64)) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    for (uint8_t* out : {dst, also}) {
      if (out == nullptr) continue;
      _mm_stream_si128(reinterpret_cast<__m128i*>(out), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + 48), d);
    }
  }
  plain(n);
  _mm_sfence();
#else
  (void)dst, (void)also, (void)src, (void)n;
#endif
}

}  // namespace detail

inline void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n == 0) return;  // src or dst may then be null, which memcpy does not allow
#if defined(__x86_64__)
  if (n >= kMinStreamedBytes) {
    detail::stream_to(dst, nullptr, src, n);
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

// stream_copy(dst, src, n) and stream_copy(also, src, n) in one pass that reads src once: the
// engine writes a result to the caller's buffer and to the failover's copy of its end
// (result_tails.h). When the two destinations are not equally aligned (to 16 bytes) it makes
// the two copies.
inline void stream_copy_twice(uint8_t* dst, uint8_t* also, const uint8_t* src, size_t n) {
  if (n == 0) return;
#if defined(__x86_64__)
  const auto misalign = [](const uint8_t* p) { return reinterpret_cast<uintptr_t>(p) & 15; };
  if (n >= kMinStreamedBytes && misalign(dst) == misalign(also)) {
    detail::stream_to(dst, also, src, n);
    return;
  }
#endif
  stream_copy(dst, src, n);
  stream_copy(also, src, n);
}

}  // namespace conflux::client
