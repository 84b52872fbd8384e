#include "driver/tuner_check.h"

#include <vector>

#include "driver/plugin.h"

namespace conflux::driver {
namespace {

constexpr int kAlgos = 7;   // NCCL 2.28: Tree, Ring, CollNetDirect, CollNetChain, NVLS, ...
constexpr int kProtos = 3;  // LL, LL128, Simple
constexpr int kFirstShift = 2, kLastShift = 30;

std::string size_text(size_t bytes) {
  if (bytes >= (size_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (size_t{1} << 20)) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (size_t{1} << 10)) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

const char* choice_text(char c) {
  return c == 'C' ? "CollNetChain" : c == 'N' ? "NCCL's algorithms" : "NCCL's table unchanged";
}

}  // namespace

Status check_tuner(const nccl::ncclTuner_v5_t* tuner, uint64_t comm_id, int nranks, Bootstrap* bs,
                   std::string* summary) {
  const int rank = bs->rank();
  void* ctx = nullptr;
  // One rank per node, as the driver's ranks are (each its own process and "node").
  DRV_CALL(rank, "tuner.init",
           tuner->init(&ctx, comm_id, static_cast<size_t>(nranks), static_cast<size_t>(nranks),
                       driver_logger, nullptr, nullptr));
  // Per size: 'C' CollNetChain/Simple made the cheapest (cost 0), 'N' made unavailable (-1),
  // 'L' left as NCCL filled it.
  std::string mine;
  for (int k = kFirstShift; k <= kLastShift; ++k) {
    float table[kAlgos][kProtos];
    for (auto& row : table)
      for (float& v : row) v = 100.0f;
    int channels = 0;
    const int rc =
        tuner->getCollInfo(ctx, nccl::kNcclFuncAllReduce, size_t{1} << k, 1,
                           reinterpret_cast<float**>(table), kAlgos, kProtos, 0, &channels);
    if (rc != 0) {
      tuner->finalize(ctx);
      return call_failed(rank, "tuner.getCollInfo", rc);
    }
    const float chain = table[nccl::kNcclAlgoCollNetChain][nccl::kNcclProtoSimple];
    mine += chain == 0.0f ? 'C' : chain == nccl::kNcclAlgoProtoIgnore ? 'N' : 'L';
  }
  DRV_CALL(rank, "tuner.finalize", tuner->finalize(ctx));
  std::vector<std::string> all;
  DRV_TRY(bs->allgather(mine, &all));
  for (size_t r = 0; r < all.size(); ++r) {
    for (size_t i = 0; i < mine.size(); ++i) {
      if (all[r].size() != mine.size() || all[r][i] != all[0][i]) {
        return Status::Error("tuner: rank 0 and rank " + std::to_string(r) +
                             " chose differently for an AllReduce of " +
                             size_text(size_t{1} << (kFirstShift + i)) + " (NCCL would hang)");
      }
    }
  }
  summary->clear();
  for (size_t i = 0; i < mine.size();) {
    size_t j = i;
    while (j + 1 < mine.size() && mine[j + 1] == mine[i]) ++j;
    if (!summary->empty()) *summary += ", ";
    *summary += std::string(choice_text(mine[i])) + " for " +
                size_text(size_t{1} << (kFirstShift + i)) + ".." +
                size_text(size_t{1} << (kFirstShift + j));
    i = j + 1;
  }
  return Status::Ok();
}

}  // namespace conflux::driver
