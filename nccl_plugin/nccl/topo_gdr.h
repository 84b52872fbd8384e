// SPDX-License-Identifier: Apache-2.0
// NCCL's rule for a NIC's GPUDirect bit (shared/reference: nccl-gdr.md), as a fact about NCCL
// that the driver checks and `conflux check` reports. ncclTopoGetSystem (src/graph/topo.cc)
// describes the CollNet's devices before the net's (2.28; 2.30 puts GIN and RMA first), merges
// descriptions of the same name into one NIC, and keeps the first description's
//   gdr = (ptrSupport & NCCL_PTR_CUDA) || (DMA-BUF usable && (ptrSupport & NCCL_PTR_DMABUF)).
// Both the p2p net and CollNet read that one bit.
#pragma once

#include <string>
#include <vector>

#include "nccl/nccl_types.h"

namespace conflux::nccl {

struct NicDescription {
  std::string name;
  int ptr_support = 0;
};

struct NicGdr {
  std::string name;
  bool gdr = false;
  std::string first;  // which description set it: "CollNet" or "net"
};

inline bool gdr_capable(int ptr_support, bool dmabuf_usable) {
  return (ptr_support & NCCL_PTR_CUDA) != 0 ||
         (dmabuf_usable && (ptr_support & NCCL_PTR_DMABUF) != 0);
}

// `collnet` and `net` in device order; one entry per distinct name, in first-seen order.
inline std::vector<NicGdr> topo_gdr(const std::vector<NicDescription>& collnet,
                                    const std::vector<NicDescription>& net, bool dmabuf_usable) {
  std::vector<NicGdr> nics;
  auto describe = [&](const std::vector<NicDescription>& devs, const char* who) {
    for (const NicDescription& d : devs) {
      bool seen = false;
      for (const NicGdr& n : nics) seen = seen || n.name == d.name;
      if (!seen) nics.push_back({d.name, gdr_capable(d.ptr_support, dmabuf_usable), who});
    }
  };
  describe(collnet, "CollNet");
  describe(net, "net");
  return nics;
}

}  // namespace conflux::nccl
