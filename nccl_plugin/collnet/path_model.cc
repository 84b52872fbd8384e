// SPDX-License-Identifier: Apache-2.0
#include "collnet/path_model.h"

#include <algorithm>
#include <limits>
#include <mutex>

#include "collnet/split.h"

namespace conflux::collnet {
namespace {

struct Published {
  uint64_t comm_id;
  const void* owner;
  PathModel model;
};

std::mutex g_mu;
std::vector<Published> g_models;  // guarded by g_mu

}  // namespace

bool PathModel::complete() const {
  return nranks >= 2 && link_Bps > 0 && hop_s > 0 && collnet_s > 0 && ring_fraction >= 0 &&
         ring_fraction <= 1;
}

double PathModel::collnet_time(size_t user_bytes) const {
  const size_t bytes = std::max(user_bytes, min_request_bytes);
  const double s = static_cast<double>(bytes);
  const double a =
      static_cast<double>(aggregator_elements(bytes, 1, ring_fraction, min_ring_bytes));
  const double ring_share = s - a;
  const double c = ring_bytes_per_byte(nranks);
  const double start = std::max(collnet_s, ring_share > 0 ? ring_latency_s() : 0.0);
  double through_aggregators = 0;
  if (a > 0) {
    through_aggregators =
        capacity_Bps > 0 ? nranks * a / capacity_Bps : std::numeric_limits<double>::infinity();
  }
  return start + std::max(through_aggregators, (a + c * ring_share) / link_Bps);
}

double PathModel::ring_latency_s() const { return 2.0 * (nranks - 1) * hop_s; }

double PathModel::ring_time(size_t bytes) const {
  return ring_latency_s() + ring_bytes_per_byte(nranks) * static_cast<double>(bytes) / link_Bps;
}

double typical_round(std::vector<double> rounds) {
  if (rounds.size() < 2) return 0;
  rounds.erase(rounds.begin());
  const auto mid = rounds.begin() + static_cast<std::ptrdiff_t>(rounds.size() / 2);
  std::nth_element(rounds.begin(), mid, rounds.end());
  return *mid;
}

void publish_model(uint64_t comm_id, const void* owner, const PathModel& m) {
  std::lock_guard<std::mutex> lk(g_mu);
  g_models.push_back({comm_id, owner, m});
}

void withdraw_model(const void* owner) {
  std::lock_guard<std::mutex> lk(g_mu);
  std::erase_if(g_models, [owner](const Published& p) { return p.owner == owner; });
}

std::vector<PathModel> published_models(uint64_t comm_id, int nranks) {
  std::lock_guard<std::mutex> lk(g_mu);
  std::vector<PathModel> out;
  for (const Published& p : g_models) {
    if (p.comm_id == comm_id && p.model.nranks == nranks) out.push_back(p.model);
  }
  return out;
}

}  // namespace conflux::collnet
