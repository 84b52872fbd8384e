// SPDX-License-Identifier: Apache-2.0
// What the stateful fuzz targets share: an input read as a program (any bytes are a valid one;
// past the end every byte reads 0) and an invariant check that aborts, which libFuzzer and the
// ctest replay both report.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#define CONFLUX_FUZZ_CHECK(cond) \
  do {                           \
    if (!(cond)) {               \
      std::abort();              \
    }                            \
  } while (false)

namespace conflux::fuzz {

class Program {
 public:
  Program(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  bool more() const { return at_ < n_; }
  uint8_t byte() { return at_ < n_ ? p_[at_++] : 0; }
  // The next `want` bytes (fewer at the end).
  std::span<const uint8_t> bytes(size_t want) {
    const size_t n = std::min(want, n_ - at_);
    std::span<const uint8_t> s(p_ + at_, n);
    at_ += n;
    return s;
  }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t at_ = 0;
};

}  // namespace conflux::fuzz
