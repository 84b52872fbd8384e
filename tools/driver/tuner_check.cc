// SPDX-License-Identifier: Apache-2.0
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
  return c == 'C' ? "CollNet" : c == 'N' ? "NCCL's algorithms" : "NCCL's table unchanged";
}

// Cost tables shaped as NCCL fills them (src/enqueue.cc): unavailable entries -1.
enum class Shape {
  kOneGpuPerNode,  // Tree/Ring (all protocols), CollNetChain and CollNetDirect (Simple)
  kNvSwitch,       // several GPUs per node: CollNetChain off; CollNetDirect and NVLS offered
};
constexpr int kTree = 0, kNvls = 4;

void fill(Shape shape, float (&t)[kAlgos][kProtos]) {
  for (auto& row : t)
    for (float& v : row) v = nccl::kNcclAlgoProtoIgnore;
  for (int p = 0; p < kProtos; ++p) {
    t[kTree][p] = 120.0f + p;
    t[nccl::kNcclAlgoRing][p] = 100.0f + p;
  }
  t[nccl::kNcclAlgoCollNetDirect][nccl::kNcclProtoSimple] = 90.0f;
  if (shape == Shape::kOneGpuPerNode) {
    t[nccl::kNcclAlgoCollNetChain][nccl::kNcclProtoSimple] = 80.0f;
  } else {
    t[kNvls][nccl::kNcclProtoSimple] = 70.0f;
  }
}

// 'C': one entry through the aggregators made the cheapest (0) and nothing else touched;
// 'N': every entry through them made unavailable and the others untouched; 'L': unchanged;
// '?': anything else (e.g. steered away from CollNetChain while CollNetDirect stays open).
char classify(Shape shape, const float (&t)[kAlgos][kProtos]) {
  float before[kAlgos][kProtos];
  fill(shape, before);
  const auto through = [](int a) {
    return a == nccl::kNcclAlgoCollNetChain || a == nccl::kNcclAlgoCollNetDirect || a == kNvls;
  };
  int zeroed = 0, closed = 0, open = 0, other_changed = 0;
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      const bool was = before[a][p] != nccl::kNcclAlgoProtoIgnore;
      if (!through(a)) {
        other_changed += t[a][p] != before[a][p];
        continue;
      }
      if (!was) {
        other_changed += t[a][p] != before[a][p];  // an unavailable entry must stay so
        continue;
      }
      zeroed += t[a][p] == 0.0f;
      closed += t[a][p] == nccl::kNcclAlgoProtoIgnore;
      open += t[a][p] != nccl::kNcclAlgoProtoIgnore;
    }
  }
  if (other_changed > 0) return '?';
  if (zeroed == 1) return 'C';
  if (open == 0 && closed > 0) return 'N';
  if (zeroed == 0 && closed == 0) return 'L';
  return '?';
}

// The tuner's choice for 4 B .. 1 GiB on one table shape, one char per size.
Status choices(const nccl::ncclTuner_v5_t* tuner, void* ctx, Shape shape, int rank,
               std::string* out) {
  out->clear();
  for (int k = kFirstShift; k <= kLastShift; ++k) {
    float table[kAlgos][kProtos];
    fill(shape, table);
    int channels = 0;
    const int rc =
        tuner->getCollInfo(ctx, nccl::kNcclFuncAllReduce, size_t{1} << k, 1,
                           reinterpret_cast<float**>(table), kAlgos, kProtos, 0, &channels);
    if (rc != 0) return call_failed(rank, "tuner.getCollInfo", rc);
    *out += classify(shape, table);
  }
  return Status();
}

std::string summarize(const std::string& mine) {
  std::string summary;
  for (size_t i = 0; i < mine.size();) {
    size_t j = i;
    while (j + 1 < mine.size() && mine[j + 1] == mine[i]) ++j;
    if (!summary.empty()) summary += ", ";
    summary += std::string(choice_text(mine[i])) + " for " +
               size_text(size_t{1} << (kFirstShift + i)) + ".." +
               size_text(size_t{1} << (kFirstShift + j));
    i = j + 1;
  }
  return summary;
}

// Every rank's choices must be those of rank 0 (or NCCL hangs), and well formed.
Status agree(Bootstrap* bs, const std::string& mine, const char* what) {
  std::vector<std::string> all;
  CFX_TRY(bs->allgather(mine, &all));
  for (size_t r = 0; r < all.size(); ++r) {
    for (size_t i = 0; i < mine.size(); ++i) {
      const std::string size = size_text(size_t{1} << (kFirstShift + i));
      if (all[r].size() != mine.size() || all[r][i] != all[0][i]) {
        return internal_error("tuner (" + std::string(what) + "): rank 0 and rank " +
                              std::to_string(r) + " chose differently for an AllReduce of " + size +
                              " (NCCL would hang)");
      }
      if (all[r][i] == '?') {
        return internal_error("tuner (" + std::string(what) + "): an AllReduce of " + size +
                              " leaves a way through the aggregators open, or edits an entry "
                              "that is not the aggregators'");
      }
    }
  }
  return Status();
}

}  // namespace

Status check_tuner(const nccl::ncclTuner_v5_t* tuner, uint64_t comm_id, int nranks, Bootstrap* bs,
                   std::string* summary) {
  const int rank = bs->rank();
  const size_t nodes = static_cast<size_t>(nranks);
  // One rank per node, as the driver's ranks are (each its own process and "node"): the
  // choice must be the same whether NCCL offers CollNetChain or CollNetDirect and NVLS.
  void* ctx = nullptr;
  DRV_CALL(rank, "tuner.init",
           tuner->init(&ctx, comm_id, nodes, nodes, driver_logger, nullptr, nullptr));
  std::string chain, nvswitch;
  Status st = choices(tuner, ctx, Shape::kOneGpuPerNode, rank, &chain);
  if (st.ok()) st = choices(tuner, ctx, Shape::kNvSwitch, rank, &nvswitch);
  DRV_CALL(rank, "tuner.finalize", tuner->finalize(ctx));
  CFX_TRY(st);
  CFX_TRY(agree(bs, chain, "CollNetChain offered"));
  CFX_TRY(agree(bs, nvswitch, "CollNetDirect and NVLS offered"));
  if (chain != nvswitch) {
    return internal_error("tuner: CollNetChain offered: " + summarize(chain) +
                          "; CollNetDirect and NVLS offered: " + summarize(nvswitch) +
                          " (the same communicator must choose alike)");
  }
  // 8 ranks per node on NVSwitch nodes, as NCCL would init a tuner of the same nodes.
  DRV_CALL(rank, "tuner.init(8 ranks per node)",
           tuner->init(&ctx, comm_id ^ 0x8, 8 * nodes, nodes, driver_logger, nullptr, nullptr));
  std::string eight;
  st = choices(tuner, ctx, Shape::kNvSwitch, rank, &eight);
  DRV_CALL(rank, "tuner.finalize", tuner->finalize(ctx));
  CFX_TRY(st);
  CFX_TRY(agree(bs, eight, "8 ranks per node, CollNetDirect and NVLS offered"));
  *summary = summarize(chain) +
             "\ntuner, 8 ranks per node (CollNetDirect and NVLS offered): " + summarize(eight);
  return Status();
}

}  // namespace conflux::driver
