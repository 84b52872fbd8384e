#include "collnet/path_estimate.h"

#include <algorithm>
#include <mutex>
#include <vector>

namespace conflux::collnet {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<PathEstimateSlot*> slots;
  uint64_t writes = 0;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: slots may outlive static destructors
  return *r;
}

}  // namespace

PathEstimateSlot::PathEstimateSlot(int nranks) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  e_.nranks = nranks;
  stamp_ = ++r.writes;
  r.slots.push_back(this);
}

PathEstimateSlot::~PathEstimateSlot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.slots.erase(std::remove(r.slots.begin(), r.slots.end(), this), r.slots.end());
}

void PathEstimateSlot::set_model(double s_per_byte, double hop_s, double link_bps) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  e_.s_per_byte = s_per_byte;
  e_.hop_s = hop_s;
  e_.link_bps = link_bps;
  stamp_ = ++r.writes;
}

void PathEstimateSlot::add_latency(double seconds) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  e_.latency_s = e_.latency_s == 0 ? seconds : e_.latency_s + (seconds - e_.latency_s) / 8;
  stamp_ = ++r.writes;
}

PathEstimate PathEstimateSlot::get() const {
  std::lock_guard<std::mutex> lk(registry().mu);
  return e_;
}

std::optional<PathEstimate> PathEstimateSlot::latest() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  const PathEstimateSlot* best = nullptr;
  for (const PathEstimateSlot* s : r.slots) {
    if (best == nullptr || s->stamp_ > best->stamp_) best = s;
  }
  if (best == nullptr) return std::nullopt;
  return best->e_;
}

}  // namespace conflux::collnet
