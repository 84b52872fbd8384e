// SPDX-License-Identifier: Apache-2.0
// Bounds-checked sequential big-endian reader/writer for control message bodies.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "conflux/protocol/byteorder.h"

namespace conflux::proto {

class Writer {
 public:
  explicit Writer(std::vector<uint8_t>& out) : out_(out) {}
  template <typename T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    store_be<T>(out_.data() + at, v);
  }
  void bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }

 private:
  std::vector<uint8_t>& out_;
};

// Every get() on a short buffer sets the failure flag and returns 0; check ok() once.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}
  template <typename T>
  T get() {
    if (pos_ + sizeof(T) > in_.size()) {
      failed_ = true;
      return T{};
    }
    T v = load_be<T>(in_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }
  std::span<const uint8_t> bytes(size_t n) {
    if (pos_ + n > in_.size()) {
      failed_ = true;
      return {};
    }
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }
  // The bytes not read yet (empty after a failed read).
  std::span<const uint8_t> rest() const {
    return failed_ ? std::span<const uint8_t>{} : in_.subspan(pos_);
  }
  // True when every read fitted and the body was consumed exactly.
  bool ok_and_done() const { return !failed_ && pos_ == in_.size(); }
  // True when every read fitted and bytes remain (an optional trailing part follows).
  bool more() const { return !failed_ && pos_ < in_.size(); }

 private:
  std::span<const uint8_t> in_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace conflux::proto
