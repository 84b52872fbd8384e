// SPDX-License-Identifier: Apache-2.0
// Fixed epoll ids of the control thread's non-connection descriptors (connections use
// ids >= 16, see ControlPlane::next_id_).
#pragma once

#include "aggregator/control/job_manager.h"

namespace conflux::agg {

inline constexpr ConnId kControlListener = 1;
inline constexpr ConnId kMetricsListener = 2;
inline constexpr ConnId kStopEvent = 3;
inline constexpr ConnId kUplinkEvent = 4;  // a leaf's UplinkClient has news (aggregator/tree)

}  // namespace conflux::agg
