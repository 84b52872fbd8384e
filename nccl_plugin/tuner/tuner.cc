#include "tuner/tuner.h"

#include "nccl/tuner_v5.h"

namespace conflux::tuner {

Choice decide(const TunerPolicy& p, int coll_type, size_t nbytes, bool collnet_offered,
              bool collnet_live, bool aggregators_usable) {
  if (coll_type != nccl::kNcclFuncAllReduce || p.nnodes < 2 || !collnet_offered || !collnet_live) {
    return Choice::kLeave;
  }
  if (!aggregators_usable) return Choice::kNotCollNet;
  const bool in_range = nbytes >= p.min_bytes && (p.max_bytes == 0 || nbytes <= p.max_bytes);
  return in_range ? Choice::kCollNetChain : Choice::kNotCollNet;
}

void apply(Choice c, float** cost_table, int num_algo, int num_proto) {
  if (c == Choice::kLeave || cost_table == nullptr) return;
  if (num_algo <= nccl::kNcclAlgoCollNetChain || num_proto <= nccl::kNcclProtoSimple) return;
  auto* table = reinterpret_cast<float*>(cost_table);
  const auto at = [&](int algo, int proto) -> float& { return table[algo * num_proto + proto]; };
  if (c == Choice::kCollNetChain) {
    at(nccl::kNcclAlgoCollNetChain, nccl::kNcclProtoSimple) = 0.0f;
  } else {
    at(nccl::kNcclAlgoCollNetChain, nccl::kNcclProtoSimple) = nccl::kNcclAlgoProtoIgnore;
  }
}

}  // namespace conflux::tuner
