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

inline void stream_copy(uint8_t* dst, const uint8_t* src, size_t n) {
  if (n == 0) return;  // src or dst may then be null, which memcpy does not allow
#if defined(__x86_64__)
  constexpr size_t kMinStreamed = 1024;  // below this a plain copy is as cheap
  if (n >= kMinStreamed) {
    const size_t head = (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15;
    std::memcpy(dst, src, head);
    dst += head;
    src += head;
    n -= head;
    for (; n >= 64; n -= 64, dst += 64, src += 64) {
      const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src));
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 16));
      const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 32));
      const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 48));
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst), a);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 16), b);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 32), c);
      _mm_stream_si128(reinterpret_cast<__m128i*>(dst + 48), d);
    }
    std::memcpy(dst, src, n);
    _mm_sfence();
    return;
  }
#endif
  std::memcpy(dst, src, n);
}

}  // namespace conflux::client
