#include "collnet/tree_layout.h"

#include <span>

#include "collnet/ring_exchange.h"
#include "conflux/protocol/control.h"

namespace conflux::collnet {
namespace {

constexpr size_t kMaxCompared = 64;

struct Names {
  uint32_t n = 0;
  uint32_t reserved = 0;
  uint64_t hash[kMaxCompared] = {};
};

uint64_t name_hash(const std::string& endpoint) {
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(endpoint.data()),
                                       endpoint.size());
  return proto::siphash24(0x436f6e666c757854ULL, 0x5472656573546f70ULL, bytes);
}

}  // namespace

net::Status served_ranks(net::SendComm* next, net::RecvComm* prev, int rank, int nranks,
                         const std::vector<std::string>& aggregators,
                         std::chrono::milliseconds timeout, std::vector<uint32_t>* served) {
  served->clear();
  Names mine;
  mine.n = static_cast<uint32_t>(std::min(aggregators.size(), kMaxCompared));
  for (uint32_t i = 0; i < mine.n; ++i) mine.hash[i] = name_hash(aggregators[i]);
  std::vector<Names> all(static_cast<size_t>(nranks));
  if (nranks > 1) {
    const net::Status st =
        ring_allgather(next, prev, rank, nranks, &mine, all.data(), sizeof(Names), timeout);
    if (st != net::Status::kOk) return st;
  } else {
    all[0] = mine;
  }
  bool tree = false;
  std::vector<uint32_t> counts(aggregators.size(), 0);
  for (size_t i = 0; i < aggregators.size(); ++i) {
    for (const Names& other : all) {
      if (i < mine.n && i < other.n && other.hash[i] == mine.hash[i]) ++counts[i];
    }
    // Entries past the compared ones count as shared by everyone.
    if (i >= mine.n) counts[i] = static_cast<uint32_t>(nranks);
    tree = tree || counts[i] != static_cast<uint32_t>(nranks);
  }
  if (tree) *served = std::move(counts);
  return net::Status::kOk;
}

}  // namespace conflux::collnet
