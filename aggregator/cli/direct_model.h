// SPDX-License-Identifier: Apache-2.0
// Inside `conflux plan --fabric direct` (direct_plan.h): the rates of the topologies, the
// mixed-integer program that selects them (direct_milp.cc) and the circuits that wire a
// selection (direct_wiring.cc).
#pragma once

#include <vector>

#include "aggregator/cli/direct_plan.h"

namespace conflux::cli::direct {

// Each topology kind's algbw on this input, and the sizes that fix its device count.
struct Rates {
  double ring = 0, segment = 0, tree = 0;  // Gbit/s
  int group = 0;                           // members behind one segment device (E_d - 2)
  int tree_devices = 0;
};
Rates rates(const Input& in);

// What the program selects: how many topologies of each kind, and for the segment rings
// together their memberships per port class (Input::workers order) and their devices: `full`
// devices of up to group members each and `partial` ones of up to (N mod group) members, at
// most one of those per segment ring (a segment ring of all N workers as members needs
// ceil(N / group) devices).
struct Selection {
  int rings = 0, segment_rings = 0, trees = 0;
  std::vector<int> members;
  int full = 0, partial = 0;
  bool optimal = false;
  double gap = 0;
  double solve_s = 0;
};

// Solves the program for in.device_budget. Throws PlanError when the solver finds no
// solution within the time limit.
Selection select(const Input& in, const Rates& r);

// The circuits of a selection, checked: every worker port and device port used at most once,
// within its count. Devices are numbered from 0 across the topologies in order.
std::vector<Circuit> wire(const Input& in, const Rates& r, const Selection& s,
                          std::vector<Topology>& topologies);

}  // namespace conflux::cli::direct
