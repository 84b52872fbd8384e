// SPDX-License-Identifier: Apache-2.0
// CollNet connect, phase 6 (model): the tuner's model of CollNet against NCCL's ring
// (collnet/path_model.h), from the agreed verdicts and the agreed probe times; what the
// aggregators delivered in the bulk probe corrects their advertised capacity, here and as the
// measured split's start.
#pragma once

#include <cstddef>
#include <vector>

#include "collnet/coll_comm.h"
#include "collnet/connect_agree.h"
#include "collnet/connect_measure.h"
#include "collnet/path_model.h"

namespace conflux::plugin::connect {

collnet::PathModel tuner_model(const std::vector<Verdict>& all, const collnet::CollOptions& opts,
                               int nranks, int rank, const ProbeTimes& times, size_t naggregators,
                               collnet::CollComm& comm);

}  // namespace conflux::plugin::connect
