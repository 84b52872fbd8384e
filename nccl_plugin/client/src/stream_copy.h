// stream_copy: memcpy for a destination that is not read again soon from this core's cache:
// the failover's copy of each result's end (result_tails.h), and the result of a large
// request. On x86-64 it writes with non-temporal (streaming) stores: the copy does not first
// read the destination's cache lines from memory, nor evict the lines the engine works on. Ends
// with a store fence, so a release store after it publishes the bytes as it would after a memcpy
// (streaming stores are weakly ordered). Elsewhere it is memcpy.
#pragma once

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

// Streams 64-byte blocks from src to dst, and to `also` when it is not null, until fewer than
// 64 bytes remain; dst and `also` 16-byte aligned. Advances the three pointers and n.
inline void stream_blocks(uint8_t*& dst, uint8_t*& also, const uint8_t*& src, size_t& n) {
#if defined(__x86_64__)
  for (; n >= 64; n -= 64, dst += 64, src += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    if (also != nullptr) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(also), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(also + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(also + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(also + 48), d);
      also += 64;
    }
  }
#else
  (void)dst, (void)also, (void)src, (void)n;
#endif
}

inline void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n == 0) return;  // src or dst may then be null, which memcpy does not allow
#if defined(__x86_64__)
  if (n >= kMinStreamedBytes) {
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    uint8_t* none = nullptr;
    stream_blocks(dst, none, src, n);
    std::memcpy(dst, src, n);
    _mm_sfence();
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
    const size_t head = (16 - misalign(dst)) & 15;
    std::memcpy(dst, src, head);
    std::memcpy(also, src, head);
    dst += head;
    also += head;
    src += head;
    n -= head;
    stream_blocks(dst, also, src, n);
    std::memcpy(dst, src, n);
    std::memcpy(also, src, n);
    _mm_sfence();
    return;
  }
#endif
  stream_copy(dst, src, n);
  stream_copy(also, src, n);
}

}  // namespace conflux::client
