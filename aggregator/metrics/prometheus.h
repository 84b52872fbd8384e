// SPDX-License-Identifier: Apache-2.0
// Prometheus text exposition (format 0.0.4) of every confluxd metric. The list of names is
// documented in aggregator/README.md (a test checks that every name rendered is documented).
// Called on the control thread (it iterates the live jobs of the JobTable).
#pragma once

#include <string>

#include "aggregator/control/control_counters.h"
#include "aggregator/dataplane/dataplane.h"
#include "aggregator/engine/job_table.h"

namespace conflux::agg {

std::string render_metrics(const Dataplane& dp, const JobTable& jobs, const ControlCounters& cc);

}  // namespace conflux::agg
