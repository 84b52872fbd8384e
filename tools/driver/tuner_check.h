// SPDX-License-Identifier: Apache-2.0
// The tuner in the net plugin's library, called as NCCL 2.28 calls it for a communicator:
// init (after CollNet is connected) with the communicator's id, then getCollInfo for each
// AllReduce size with NCCL's cost table. NCCL needs every rank to choose the same algorithm
// for a collective, so the driver asks every rank for every power-of-two size from 4 B to
// 1 GiB, with tables shaped as NCCL fills them (unavailable entries -1): CollNetChain offered
// (one GPU per node), and CollNetDirect and NVLS offered without CollNetChain (NVSwitch nodes;
// NVLS across nodes runs over CollNet), each for the communicator and for one of 8 ranks per
// node. It fails unless all ranks chose alike, the communicator chose alike on both shapes,
// and every choice either opened one way through the aggregators or closed all of them.
#pragma once

#include <cstdint>
#include <string>

#include "driver/bootstrap.h"
#include "driver/status.h"
#include "nccl/tuner_v5.h"

namespace conflux::driver {

// `summary` gets the choices, e.g. "NCCL's algorithms for 4 B..32 KiB, CollNet for
// 64 KiB..1 GiB", and a second line with those of 8 ranks per node. An error names the first size
// at which two ranks chose apart, or the call that failed.
Status check_tuner(const nccl::ncclTuner_v5_t* tuner, uint64_t comm_id, int nranks, Bootstrap* bs,
                   std::string* summary);

}  // namespace conflux::driver
