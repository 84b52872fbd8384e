// See tuner_report.h.
#include "driver/tuner_report.h"

#include <cstdio>

#include "driver/plugin.h"

namespace conflux::driver {
namespace {

constexpr int kAlgos = 7;   // NCCL 2.28: Tree, Ring, CollNetDirect, CollNetChain, NVLS, ...
constexpr int kProtos = 3;  // LL, LL128, Simple

}  // namespace

Status tuner_report(const nccl::ncclTuner_v5_t* tuner, int nranks,
                    const std::vector<size_t>& sizes) {
  if (tuner == nullptr) {
    std::printf("# tuner: the plugin exports no ncclTunerPlugin_v5\n");
    return Status::Ok();
  }
  void* ctx = nullptr;
  DRV_CALL(0, "tuner.init",
           tuner->init(&ctx, 0, static_cast<size_t>(nranks), static_cast<size_t>(nranks),
                       driver_logger, nullptr, nullptr));
  for (size_t bytes : sizes) {
    float table[kAlgos][kProtos];
    for (auto& row : table) {
      for (float& cost : row) cost = 1.0f;
    }
    int channels = 1;
    const int rc =
        tuner->getCollInfo(ctx, nccl::kNcclFuncAllReduce, bytes, 1,
                           reinterpret_cast<float**>(table), kAlgos, kProtos, 0, &channels);
    if (rc != 0) {
      (void)tuner->finalize(ctx);
      return call_failed(0, "tuner.getCollInfo", rc);
    }
    const float chain = table[nccl::kNcclAlgoCollNetChain][nccl::kNcclProtoSimple];
    std::printf("# tuner: AllReduce of %zu B -> %s\n", bytes,
                chain == 0.0f                         ? "CollNet"
                : chain == nccl::kNcclAlgoProtoIgnore ? "not CollNet"
                                                      : "left to NCCL");
  }
  std::fflush(stdout);
  DRV_CALL(0, "tuner.finalize", tuner->finalize(ctx));
  return Status::Ok();
}

}  // namespace conflux::driver
