// SPDX-License-Identifier: Apache-2.0
// The tuner's entry points, shared by the exported tables of every tuner ABI version
// (abi/tuner_v5.cc, abi/tuner_v6.cc). Policy: tuner/tuner.h.
#include "abi/tuner_entries.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "abi/adapter_util.h"
#include "collnet/path_model.h"
#include "core/params.h"
#include "core/plugin_state.h"
#include "nccl/tuner_v6.h"
#include "tuner/tuner.h"

namespace conflux::abi::tuner_entries {
namespace {

struct TunerContext {
  static constexpr uint32_t kMagic = 0x54554e45;
  uint32_t magic = kMagic;
  tuner::TunerPolicy policy;
  // The communicator's CollNet models, agreed at connect (collnet/path_model.h), fixed here.
  // Only with one rank per node: that rank is then the CollNet head of every channel, so
  // every rank holds every model; a rank that heads none would hold none and choose apart.
  std::vector<collnet::PathModel> models;

  std::optional<bool> measured(size_t bytes) const {
    if (models.empty()) return std::nullopt;
    return std::all_of(models.begin(), models.end(),
                       [bytes](const collnet::PathModel& m) { return m.collnet_wins(bytes); });
  }
};

}  // namespace

ncclResult_t init(int version, void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                  ncclDebugLogger_t log) {
  return guard("tuner init", [&] {
    if (ctx == nullptr) return net::Status::kInvalidArgument;
    *ctx = nullptr;
    plugin::installNcclLogger(log);
    plugin::Config cfg;
    std::string error;
    if (plugin::loadConfig(&cfg, &error) != net::Status::kOk) {
      // An init error would fail NCCL's communicator (init.cc): tune nothing instead.
      CFX_WARN(net::kLogEnv, "tuner: %s; NCCL's own algorithm choices stand for this communicator",
               error.c_str());
      auto* c = new TunerContext;
      c->policy.leave_all = true;
      *ctx = c;
      return net::Status::kOk;
    }
    auto* c = new TunerContext;
    c->policy.min_bytes = cfg.tunerCollnetMinBytes;
    c->policy.max_bytes = cfg.tunerCollnetMaxBytes;
    c->policy.nnodes = nNodes;
    c->policy.ring_only = cfg.ringFraction == 1.0;
    // NCCL connects CollNet before it initialises the tuner (ncclCollNetSetup comes first in
    // its transport setup), so this communicator's models, if any, are published by now.
    if (nRanks == nNodes) {
      c->models = collnet::published_models(commId, static_cast<int>(nNodes));
      std::erase_if(c->models, [](const collnet::PathModel& m) { return !m.complete(); });
      // With v6, getChunkSize trims a small AllReduce's chunk to its share per channel
      // (tuner::chunk_size): NCCL's smallest request is then the grain per channel, not a
      // 32 KiB staging region.
      if (version >= 6) {
        for (collnet::PathModel& m : c->models) {
          m.min_request_bytes = std::min(m.min_request_bytes, kNcclProtoSimpleGrainBytes);
        }
      }
    }
    std::string how;
    if (c->policy.fixed()) {
      how = "CONFLUX_TUNER_COLLNET_MIN_BYTES/_MAX_BYTES: ";
    } else if (!c->models.empty()) {
      how = "measured at connect (" + std::to_string(c->models.size()) + " CollNet comm(s)): ";
    } else {
      how = nRanks == nNodes ? "no CollNet model: " : "several ranks per node, fixed: ";
    }
    how += tuner::describe([c](size_t bytes) {
      return tuner::decide(c->policy, kNcclFuncAllReduce, bytes, true, c->measured(bytes)) ==
             tuner::Choice::kCollNet;
    });
    CFX_INFO(net::kLogInit,
             "tuner v%d: %zu ranks on %zu nodes; AllReduce, where NCCL offers CollNet, by %s%s",
             version, nRanks, nNodes, how.c_str(),
             version >= 6 ? "; CollNet chunks trimmed to small AllReduces" : "");
    *ctx = c;
    return net::Status::kOk;
  });
}

ncclResult_t getCollInfo(void* ctx, int collType, size_t nBytes, int, float** collCostTable,
                         int numAlgo, int numProto, int, int*) {
  return guard("tuner getCollInfo", [&] {
    auto* c = static_cast<TunerContext*>(ctx);
    if (c == nullptr || c->magic != TunerContext::kMagic) return net::Status::kInvalidArgument;
    const bool offered = tuner::collnet_offered(collCostTable, numAlgo, numProto, c->policy.nnodes);
    const tuner::Choice choice =
        tuner::decide(c->policy, collType, nBytes, offered, c->measured(nBytes));
    tuner::apply(choice, collCostTable, numAlgo, numProto, c->policy.nnodes);
    return net::Status::kOk;
  });
}

ncclResult_t getChunkSize(void* ctx, int collType, size_t nBytes, int algo, int proto,
                          int nChannels, size_t* chunkSize) {
  return guard("tuner getChunkSize", [&] {
    auto* c = static_cast<TunerContext*>(ctx);
    if (c == nullptr || c->magic != TunerContext::kMagic || chunkSize == nullptr) {
      return net::Status::kInvalidArgument;
    }
    *chunkSize = tuner::chunk_size(c->policy, collType, nBytes, algo, proto, nChannels, *chunkSize);
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

}  // namespace conflux::abi::tuner_entries
