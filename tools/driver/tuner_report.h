// --tuner-report: what the plugin's tuner (ncclTunerPlugin_v5) would make NCCL choose for each
// of the run's AllReduce sizes, asked while a CollNet communicator is open (the tuner reads
// what it measured, nccl_plugin/collnet/path_estimate.h).
#pragma once

#include <cstddef>
#include <vector>

#include "driver/status.h"
#include "nccl/tuner_v5.h"

namespace conflux::driver {

// Calls init, getCollInfo once per size (AllReduce, a cost table in which every algorithm and
// protocol is available at the same cost, as for a communicator of `nranks` nodes) and
// finalize; prints "# tuner: AllReduce of N B -> CollNet | not CollNet | left to NCCL".
Status tuner_report(const nccl::ncclTuner_v5_t* tuner, int nranks,
                    const std::vector<size_t>& sizes);

}  // namespace conflux::driver
