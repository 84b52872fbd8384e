// SPDX-License-Identifier: Apache-2.0
// stream_copy and stream_copy_twice (nccl_plugin/client/src/stream_copy.h): the same bytes as
// memcpy for every length around their thresholds and every alignment of source and
// destinations, and nothing written outside the destinations.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "stream_copy.h"

namespace conflux::client {
namespace {

TEST(StreamCopy, CopiesExactlyAtEveryLengthAndAlignment) {
  constexpr size_t kGuard = 64;
  const size_t lengths[] = {0,    1,    15,   16,   63,    64,    1023,      1024,
                            1025, 1039, 4096, 4097, 61440, 61441, 65536 + 17};
  for (size_t len : lengths) {
    for (size_t src_off = 0; src_off < 16; src_off += 5) {
      for (size_t dst_off = 0; dst_off < 16; dst_off += 3) {
        std::vector<uint8_t> src(len + src_off);
        for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 131 + len);
        std::vector<uint8_t> dst(len + dst_off + 2 * kGuard, 0xa5);
        stream_copy(dst.data() + kGuard + dst_off, src.data() + src_off, len);
        for (size_t i = 0; i < len; ++i) {
          ASSERT_EQ(dst[kGuard + dst_off + i], src[src_off + i])
              << "len " << len << " src+" << src_off << " dst+" << dst_off << " at " << i;
        }
        for (size_t i = 0; i < kGuard + dst_off; ++i) ASSERT_EQ(dst[i], 0xa5) << "before, " << len;
        for (size_t i = kGuard + dst_off + len; i < dst.size(); ++i) {
          ASSERT_EQ(dst[i], 0xa5) << "after, len " << len;
        }
      }
    }
  }
}

// Both destinations equally aligned (the fused pass) and not (two copies).
TEST(StreamCopy, CopiesTwiceExactlyAtEveryLengthAndAlignment) {
  constexpr size_t kGuard = 64;
  const size_t lengths[] = {0, 1, 63, 64, 1023, 1024, 1025, 1039, 4097, 61440, 65536 + 17};
  const auto intact = [](const std::vector<uint8_t>& buf, size_t from, size_t to) {
    for (size_t i = from; i < to; ++i) {
      if (buf[i] != 0xa5) return false;
    }
    return true;
  };
  for (size_t len : lengths) {
    std::vector<uint8_t> src(len + 16);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 137 + len);
    for (size_t src_off : {0, 7}) {
      for (size_t dst_off : {0, 5, 15}) {
        for (size_t also_off : {dst_off, size_t{3}}) {
          std::vector<uint8_t> dst(len + 16 + 2 * kGuard, 0xa5), also = dst;
          stream_copy_twice(dst.data() + kGuard + dst_off, also.data() + kGuard + also_off,
                            src.data() + src_off, len);
          for (size_t i = 0; i < len; ++i) {
            ASSERT_EQ(dst[kGuard + dst_off + i], src[src_off + i]) << "len " << len << " at " << i;
            ASSERT_EQ(also[kGuard + also_off + i], src[src_off + i])
                << "len " << len << " dst+" << dst_off << " also+" << also_off << " at " << i;
          }
          ASSERT_TRUE(intact(dst, 0, kGuard + dst_off)) << len;
          ASSERT_TRUE(intact(dst, kGuard + dst_off + len, dst.size())) << len;
          ASSERT_TRUE(intact(also, 0, kGuard + also_off)) << len;
          ASSERT_TRUE(intact(also, kGuard + also_off + len, also.size())) << len;
        }
      }
    }
  }
}

}  // namespace
}  // namespace conflux::client
