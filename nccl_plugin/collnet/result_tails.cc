#include "collnet/result_tails.h"

#include <algorithm>

namespace conflux::collnet {

void ResultTails::keep(uint32_t seq, const uint8_t* result, size_t total) {
  if (window_ == 0 || total == 0) return;
  Tail t;
  t.seq = seq;
  t.total = total;
  const size_t n = std::min(total, window_);
  t.offset = total - n;
  t.bytes.assign(result + t.offset, result + total);
  if (!tails_.empty()) newer_total_ += total;
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
