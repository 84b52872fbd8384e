// The tuner in the net plugin's library, called as NCCL 2.28 calls it for a communicator:
// init (after CollNet is connected) with the communicator's id, then getCollInfo for each
// AllReduce size with NCCL's cost table. NCCL needs every rank to choose the same algorithm
// for a collective, so the driver asks every rank for every power-of-two size from 4 B to
// 1 GiB, with CollNetChain/Simple offered, and fails unless all ranks chose alike.
#pragma once

#include <cstdint>
#include <string>

#include "driver/bootstrap.h"
#include "driver/status.h"
#include "nccl/tuner_v5.h"

namespace conflux::driver {

// `summary` gets the choices, e.g. "NCCL's algorithms for 4 B..32 KiB, CollNetChain for
// 64 KiB..1 GiB". An error names the first size at which two ranks chose apart, or the call
// that failed.
Status check_tuner(const nccl::ncclTuner_v5_t* tuner, uint64_t comm_id, int nranks, Bootstrap* bs,
                   std::string* summary);

}  // namespace conflux::driver
