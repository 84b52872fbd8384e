// SPDX-License-Identifier: Apache-2.0
#include "tuner/tuner.h"

#include "nccl/tuner_v6.h"

namespace conflux::tuner {

Choice decide(const TunerPolicy& p, int coll_type, size_t nbytes, bool collnet_offered,
              std::optional<bool> measured) {
  if (p.leave_all || coll_type != nccl::kNcclFuncAllReduce || p.nnodes < 2 || !collnet_offered) {
    return Choice::kLeave;
  }
  bool collnet = true;
  if (p.fixed()) {
    collnet = nbytes >= p.min_bytes && (p.max_bytes == 0 || nbytes <= p.max_bytes);
  } else if (measured.has_value()) {
    collnet = *measured;
  } else {
    collnet = !p.ring_only;
  }
  return collnet ? Choice::kCollNet : Choice::kNotCollNet;
}

std::string describe(const std::function<bool(size_t)>& collnet) {
  std::string out;
  std::optional<bool> last;
  for (int k = 0; k <= 40; ++k) {
    const size_t bytes = size_t{1} << k;
    const bool c = collnet(bytes);
    if (last == c) continue;
    if (last.has_value()) out += ", ";
    out += (c ? "CollNet from " : "NCCL's algorithms from ") + std::to_string(bytes) + " B";
    last = c;
  }
  return out;
}

bool through_aggregators(int algo, size_t nnodes) {
  return algo == nccl::kNcclAlgoCollNetChain || algo == nccl::kNcclAlgoCollNetDirect ||
         (algo == nccl::kNcclAlgoNvls && nnodes > 1);
}

bool collnet_offered(float** cost_table, int num_algo, int num_proto, size_t nnodes) {
  if (cost_table == nullptr) return false;
  const auto* table = reinterpret_cast<const float*>(cost_table);
  for (int a = 0; a < num_algo; ++a) {
    if (!through_aggregators(a, nnodes)) continue;
    for (int p = 0; p < num_proto; ++p) {
      if (table[a * num_proto + p] != nccl::kNcclAlgoProtoIgnore) return true;
    }
  }
  return false;
}

size_t chunk_size(const TunerPolicy& p, int coll_type, size_t nbytes, int algo, int proto,
                  int nchannels, size_t nccl_chunk) {
  const bool collnet = algo == nccl::kNcclAlgoCollNetChain || algo == nccl::kNcclAlgoCollNetDirect;
  if (p.leave_all || coll_type != nccl::kNcclFuncAllReduce || !collnet ||
      proto != nccl::kNcclProtoSimple || nchannels < 1 || nbytes == 0) {
    return nccl_chunk;
  }
  constexpr size_t grain = nccl::kNcclProtoSimpleGrainBytes;
  const size_t n = static_cast<size_t>(nchannels);
  const size_t share = nbytes / n + (nbytes % n != 0 ? 1 : 0);
  if (share >= nccl_chunk) return nccl_chunk;  // a loop or more: NCCL's pipeline stands
  const size_t trimmed = share / grain * grain + (share % grain != 0 ? grain : 0);
  return trimmed < nccl_chunk ? trimmed : nccl_chunk;
}

void apply(Choice c, float** cost_table, int num_algo, int num_proto, size_t nnodes) {
  if (c == Choice::kLeave || cost_table == nullptr) return;
  auto* table = reinterpret_cast<float*>(cost_table);
  const auto offered = [](float v) { return v != nccl::kNcclAlgoProtoIgnore; };
  if (c == Choice::kCollNet) {
    // The aggregators' entry NCCL itself finds cheapest; on a tie CollNetChain, then
    // CollNetDirect, then NVLS, and Simple before the other protocols.
    static constexpr int kOrder[] = {nccl::kNcclAlgoCollNetChain, nccl::kNcclAlgoCollNetDirect,
                                     nccl::kNcclAlgoNvls};
    float* best = nullptr;
    const auto consider = [&](int a, int p) {
      float& v = table[a * num_proto + p];
      if (offered(v) && (best == nullptr || v < *best)) best = &v;
    };
    for (int a : kOrder) {
      if (a >= num_algo || !through_aggregators(a, nnodes)) continue;
      if (nccl::kNcclProtoSimple < num_proto) consider(a, nccl::kNcclProtoSimple);
      for (int p = 0; p < num_proto; ++p) {
        if (p != nccl::kNcclProtoSimple) consider(a, p);
      }
    }
    if (best != nullptr) *best = 0.0f;
    return;
  }
  bool other = false;
  for (int a = 0; a < num_algo && !other; ++a) {
    if (through_aggregators(a, nnodes)) continue;
    for (int p = 0; p < num_proto; ++p) other = other || offered(table[a * num_proto + p]);
  }
  // Only the aggregators' entries are available (NCCL_ALGO=allreduce:collnetchain): leave
  // them, or NCCL would find no algorithm at all.
  if (!other) return;
  for (int a = 0; a < num_algo; ++a) {
    if (!through_aggregators(a, nnodes)) continue;
    for (int p = 0; p < num_proto; ++p) table[a * num_proto + p] = nccl::kNcclAlgoProtoIgnore;
  }
}

}  // namespace conflux::tuner
