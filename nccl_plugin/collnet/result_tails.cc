// SPDX-License-Identifier: Apache-2.0
#include "collnet/result_tails.h"

#include <algorithm>

namespace conflux::collnet {

void ResultTails::keep(uint32_t seq, const uint8_t* result, size_t total) {
  Tail t;
  add(seq, result, total, std::move(t));
}

void ResultTails::keep_input(uint32_t seq, const uint8_t* input, size_t total, DType dtype, Op op,
                             const std::vector<std::pair<size_t, size_t>>& owned) {
  Tail t;
  t.input = true;
  t.dtype = dtype;
  t.op = op;
  t.owned = owned;
  add(seq, input, total, std::move(t));
}

void ResultTails::adopt(uint32_t seq, size_t total, std::unique_ptr<uint8_t[]> end) {
  if (window_ == 0 || total == 0 || end == nullptr) return;
  Tail t;
  t.seq = seq;
  t.total = total;
  t.size = end_bytes(total);
  t.offset = total - t.size;
  t.data = std::move(end);
  push(std::move(t));
}

void ResultTails::add(uint32_t seq, const uint8_t* data, size_t total, Tail t) {
  if (window_ == 0 || total == 0) return;
  t.seq = seq;
  t.total = total;
  // Whole elements: an input end is reduced again element by element.
  const size_t esize = t.input ? dtype_size(t.dtype) : 1;
  t.size = std::min(total, window_ / esize * esize);
  t.offset = total - t.size;
  t.data.reset(new uint8_t[t.size]);
  std::copy(data + t.offset, data + total, t.data.get());
  push(std::move(t));
}

void ResultTails::push(Tail t) {
  if (!tails_.empty()) newer_total_ += t.total;
  tails_.push_back(std::move(t));
  // The oldest tail can go once the newer ones alone cover the window.
  while (tails_.size() > 1 && newer_total_ >= window_) {
    tails_.pop_front();
    newer_total_ -= tails_.front().total;
  }
}

const ResultTails::Tail* ResultTails::find(uint32_t seq) const {
  for (const Tail& t : tails_) {
    if (t.seq == seq) return &t;
  }
  return nullptr;
}

}  // namespace conflux::collnet
