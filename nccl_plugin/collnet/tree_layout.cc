// SPDX-License-Identifier: Apache-2.0
#include "collnet/tree_layout.h"

#include <algorithm>
#include <span>

#include "collnet/ring_exchange.h"
#include "conflux/protocol/control.h"

namespace conflux::collnet {
namespace {

constexpr size_t kMaxCompared = 64;  // entries compared
constexpr size_t kMaxChained = 16;   // entries whose chains are compared
constexpr size_t kLevels = proto::kMaxTreeLevelsUp;

// What one rank sends: a hash per entry, and per chained entry a hash per level above (0 =
// no aggregator named there).
struct Names {
  uint32_t n = 0;
  uint32_t reserved = 0;
  uint64_t hash[kMaxCompared] = {};
  uint64_t up[kMaxChained][kLevels] = {};
};

uint64_t name_hash(const std::string& endpoint) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(endpoint.data()),
                                       endpoint.size());
  const uint64_t h = proto::siphash24(0x436f6e666c757854ULL, 0x5472656573546f70ULL, bytes);
  return h == 0 ? 1 : h;  // 0 stands for "none"
}

Names names_of(const AggregatorChains& chains) {
  Names n;
  n.n = static_cast<uint32_t>(std::min(chains.size(), kMaxCompared));
  for (uint32_t i = 0; i < n.n; ++i) {
    n.hash[i] = name_hash(chains[i].front());
    if (i >= kMaxChained) continue;
    for (size_t j = 1; j < chains[i].size() && j <= kLevels; ++j) {
      n.up[i][j - 1] = name_hash(chains[i][j]);
    }
  }
  return n;
}

// The counting, on hashes (count_tree runs it on the chains' hashes too).
TreeCounts count(const std::vector<Names>& all, int rank, size_t entries) {
  const Names& mine = all[static_cast<size_t>(rank)];
  const auto nranks = static_cast<uint32_t>(all.size());
  TreeCounts out;
  out.served.assign(entries, 0);
  out.served_up.assign(entries, {});
  bool tree = false;
  for (size_t i = 0; i < entries; ++i) {
    if (i >= mine.n) {  // past the compared ones: shared by everyone
      out.served[i] = nranks;
      continue;
    }
    // The ranks whose entry i names the same aggregator at a level (`at` picks its hash).
    auto ranks_naming = [&](auto at) {
      return static_cast<uint32_t>(std::count_if(all.begin(), all.end(), [&](const Names& other) {
        return i < other.n && at(other) == at(mine);
      }));
    };
    out.served[i] = ranks_naming([&](const Names& x) { return x.hash[i]; });
    tree = tree || out.served[i] != nranks;
    if (i >= kMaxChained) continue;
    for (size_t j = 0; j < kLevels && mine.up[i][j] != 0; ++j) {
      out.served_up[i].push_back(ranks_naming([&](const Names& x) { return x.up[i][j]; }));
      tree = true;
    }
  }
  if (!tree) return {};
  return out;
}

}  // namespace

TreeCounts count_tree(const std::vector<AggregatorChains>& all, int rank) {
  std::vector<Names> names;
  for (const AggregatorChains& c : all) names.push_back(names_of(c));
  return count(names, rank, all[static_cast<size_t>(rank)].size());
}

net::Status exchange_tree_counts(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                                 const AggregatorChains& chains, std::chrono::milliseconds timeout,
                                 TreeCounts* counts) {
  *counts = {};
  std::vector<Names> all;
  const net::Status st = ring_agree(next, prev, rank, nranks, names_of(chains), &all, timeout);
  if (st != net::Status::kOk) return st;
  *counts = count(all, rank, chains.size());
  return net::Status::kOk;
}

}  // namespace conflux::collnet
