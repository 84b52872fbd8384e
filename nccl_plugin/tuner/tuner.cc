#include "tuner/tuner.h"

#include "nccl/tuner_v5.h"

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
  return collnet ? Choice::kCollNetChain : Choice::kNotCollNet;
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

void apply(Choice c, float** cost_table, int num_algo, int num_proto) {
  if (c == Choice::kLeave || cost_table == nullptr) return;
  if (num_algo <= nccl::kNcclAlgoCollNetChain || num_proto <= nccl::kNcclProtoSimple) return;
  auto* table = reinterpret_cast<float*>(cost_table);
  const auto at = [&](int algo, int proto) -> float& { return table[algo * num_proto + proto]; };
  float& chain = at(nccl::kNcclAlgoCollNetChain, nccl::kNcclProtoSimple);
  if (c == Choice::kCollNetChain) {
    chain = 0.0f;
    return;
  }
  for (int a = 0; a < num_algo; ++a) {
    for (int p = 0; p < num_proto; ++p) {
      if (&at(a, p) != &chain && at(a, p) != nccl::kNcclAlgoProtoIgnore) {
        chain = nccl::kNcclAlgoProtoIgnore;
        return;
      }
    }
  }
  // CollNetChain is all NCCL may use (NCCL_ALGO=allreduce:collnetchain): leave it, or NCCL
  // would find no algorithm at all.
}

}  // namespace conflux::tuner
