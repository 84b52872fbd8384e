// Exports ncclTunerPlugin_v5 (NCCL 2.28): NCCL finds it in the net plugin library when
// NCCL_TUNER_PLUGIN is unset. Policy: tuner/tuner.h.
#include "nccl/tuner_v5.h"

#include "abi/adapter_util.h"
#include "abi/export.h"
#include "collnet/coll_comm.h"
#include "core/params.h"
#include "core/plugin_state.h"
#include "tuner/tuner.h"

namespace conflux::abi {
namespace {

struct TunerContext {
  static constexpr uint32_t kMagic = 0x54554e45;
  uint32_t magic = kMagic;
  tuner::TunerPolicy policy;
};

ncclResult_t init(void** ctx, uint64_t, size_t nRanks, size_t nNodes, ncclDebugLogger_t log,
                  ncclNvlDomainInfo_v5_t*, ncclTunerConstants_v5_t*) {
  return guard("tuner init", [&] {
    if (ctx == nullptr) return net::Status::kInvalidArgument;
    *ctx = nullptr;
    plugin::installNcclLogger(log);
    plugin::Config cfg;
    std::string error;
    const net::Status st = plugin::loadConfig(&cfg, &error);
    if (st != net::Status::kOk) {
      CFX_WARN(net::kLogEnv, "tuner: %s", error.c_str());
      return st;
    }
    auto* c = new TunerContext;
    c->policy.min_bytes = cfg.tunerCollnetMinBytes;
    c->policy.max_bytes = cfg.tunerCollnetMaxBytes;
    c->policy.nnodes = nNodes;
    CFX_INFO(net::kLogInit, "tuner: %zu ranks on %zu nodes; CollNet for AllReduce of %zu B..%s",
             nRanks, nNodes, c->policy.min_bytes,
             c->policy.max_bytes == 0 ? "any size" : std::to_string(c->policy.max_bytes).c_str());
    *ctx = c;
    return net::Status::kOk;
  });
}

ncclResult_t getCollInfo(void* ctx, int collType, size_t nBytes, int, float** collCostTable,
                         int numAlgo, int numProto, int, int*) {
  return guard("tuner getCollInfo", [&] {
    auto* c = static_cast<TunerContext*>(ctx);
    if (c == nullptr || c->magic != TunerContext::kMagic) return net::Status::kInvalidArgument;
    bool offered = false;
    if (collCostTable != nullptr && numAlgo > kNcclAlgoCollNetChain &&
        numProto > kNcclProtoSimple) {
      const auto* table = reinterpret_cast<const float*>(collCostTable);
      offered = table[kNcclAlgoCollNetChain * numProto + kNcclProtoSimple] != kNcclAlgoProtoIgnore;
    }
    const tuner::Choice choice =
        tuner::decide(c->policy, collType, nBytes, offered, collnet::CollComm::live_count() > 0,
                      collnet::CollComm::usable_count() > 0);
    tuner::apply(choice, collCostTable, numAlgo, numProto);
    return net::Status::kOk;
  });
}

ncclResult_t finalize(void* ctx) {
  return guard("tuner finalize", [&] {
    auto* c = static_cast<TunerContext*>(ctx);
    if (c == nullptr || c->magic != TunerContext::kMagic) return net::Status::kInvalidArgument;
    c->magic = 0;
    delete c;
    return net::Status::kOk;
  });
}

}  // namespace
}  // namespace conflux::abi

using namespace conflux::abi;

extern "C" {
CONFLUX_EXPORT ncclTuner_v5_t ncclTunerPlugin_v5 = {
    "Conflux",
    init,
    getCollInfo,
    finalize,
};
}  // extern "C"
