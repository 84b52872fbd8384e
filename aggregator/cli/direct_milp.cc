// SPDX-License-Identifier: Apache-2.0
// The selection program of `conflux plan --fabric direct`, solved by GLPK's branch and cut.
//
// Integer counts, K = the fewest ports any worker has (every topology uses at least one port
// of every worker): rings Rp, segment rings Rs, trees T with Rp + Rs + T <= K; memberships
// M_c per port class c (P_c ports, N_c workers), at most one per worker and segment ring
// (M_c <= N_c * Rs). Spread round-robin, the N_c workers of a class fit their ports exactly
// when
//   M_c >= N_c * (2 * (Rp + Rs) + T - P_c).
// A segment device holds up to g = E_d - 2 members; a segment ring holds at most q = N / g
// full devices and, when r = N mod g > 0, one partial device of up to r members: with F full
// and H partial devices, sum_c M_c <= g F + r H, F <= q Rs, H <= Rs, F + H >= Rs (every
// segment ring has a device). Devices: F + H + T * (a tree's devices) <= the budget.
// Two passes: the first maximises algbw = Rp * r.ring + Rs * r.segment + T * r.tree; the
// second keeps that algbw and minimises the devices, so that a plan never spends a device
// it does not need. The program's size depends on the number of port classes only.
#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "aggregator/cli/direct_model.h"
#include "fmt/format.h"

namespace conflux::cli::direct {
namespace {

struct ProbDeleter {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};
using Prob = std::unique_ptr<glp_prob, ProbDeleter>;

// Builds the sparse matrix row by row (GLPK's 1-based triplets).
class Program {
 public:
  Program() : p_(glp_create_prob()) { glp_set_obj_dir(p_.get(), GLP_MAX); }

  int column(int kind, double lo, double hi, double objective) {
    const int j = glp_add_cols(p_.get(), 1);
    glp_set_col_kind(p_.get(), j, kind);
    if (kind != GLP_BV) glp_set_col_bnds(p_.get(), j, lo < hi ? GLP_DB : GLP_FX, lo, hi);
    glp_set_obj_coef(p_.get(), j, objective);
    return j;
  }
  // sum coef * column, bounded by `type` (GLP_UP, GLP_LO) at `bound`.
  void row(const std::vector<std::pair<int, double>>& terms, int type, double bound) {
    const int i = glp_add_rows(p_.get(), 1);
    glp_set_row_bnds(p_.get(), i, type, bound, bound);
    for (const auto& [j, coef] : terms) {
      ia_.push_back(i);
      ja_.push_back(j);
      ar_.push_back(coef);
    }
  }
  glp_prob* load() {
    glp_load_matrix(p_.get(), static_cast<int>(ia_.size()) - 1, ia_.data(), ja_.data(), ar_.data());
    return p_.get();
  }
  // A new objective: `dir` (GLP_MIN, GLP_MAX) of sum coef * column; the others get 0.
  void objective(int dir, const std::vector<std::pair<int, double>>& terms) {
    glp_set_obj_dir(p_.get(), dir);
    for (int j = 1; j <= glp_get_num_cols(p_.get()); ++j) glp_set_obj_coef(p_.get(), j, 0);
    for (const auto& [j, coef] : terms) glp_set_obj_coef(p_.get(), j, coef);
  }

 private:
  Prob p_;
  std::vector<int> ia_{0}, ja_{0};
  std::vector<double> ar_{0};
};

struct Columns {
  int rings = 0, segs = 0, trees = 0, full = 0, partial = 0;
  std::vector<int> members;  // per class
};

Columns add_columns(Program& prog, const Input& in, const Rates& r) {
  const int k = in.min_ports();
  const int n = in.worker_count();
  Columns c;
  // A kind the input leaves out (--topologies) is fixed at 0, and the rings at --max-rings.
  const auto most = [&](Kind kind) { return allows(in, kind) ? k : 0; };
  const int rings =
      in.max_rings >= 0 ? std::min(most(Kind::kRing), in.max_rings) : most(Kind::kRing);
  c.rings = prog.column(GLP_IV, 0, rings, r.ring);
  c.segs = prog.column(GLP_IV, 0, most(Kind::kSegmentRing), r.segment);
  c.trees = prog.column(GLP_IV, 0, most(Kind::kTree), r.tree);
  c.full = prog.column(GLP_IV, 0, k * (n / r.group), 0);
  c.partial = prog.column(GLP_IV, 0, n % r.group > 0 ? k : 0, 0);
  for (const PortClass& pc : in.workers)
    c.members.push_back(prog.column(GLP_IV, 0, pc.count * k, 0));
  return c;
}

void add_rows(Program& prog, const Input& in, const Rates& r, const Columns& c) {
  const int n = in.worker_count();
  prog.row({{c.rings, 1}, {c.segs, 1}, {c.trees, 1}}, GLP_UP, in.min_ports());
  std::vector<std::pair<int, double>> held{{c.full, -r.group}, {c.partial, -(n % r.group)}};
  for (size_t cls = 0; cls < in.workers.size(); ++cls) {
    const double count = in.workers[cls].count;
    prog.row({{c.members[cls], 1}, {c.segs, -count}}, GLP_UP, 0);
    prog.row({{c.members[cls], 1}, {c.rings, -2 * count}, {c.segs, -2 * count}, {c.trees, -count}},
             GLP_LO, -count * in.workers[cls].ports);
    held.emplace_back(c.members[cls], 1);
  }
  prog.row(held, GLP_UP, 0);  // the members fit the devices
  prog.row({{c.full, 1}, {c.segs, -(n / r.group)}}, GLP_UP, 0);
  prog.row({{c.partial, 1}, {c.segs, -1}}, GLP_UP, 0);
  prog.row({{c.full, 1}, {c.partial, 1}, {c.segs, -1}}, GLP_LO, 0);
  prog.row({{c.full, 1}, {c.partial, 1}, {c.trees, r.tree_devices}}, GLP_UP, in.device_budget);
}

// The relative gap at the solver's last look, kept for a run stopped by the time limit.
void remember_gap(glp_tree* tree, void* info) {
  const double gap = glp_ios_mip_gap(tree);
  if (std::isfinite(gap)) *static_cast<double*>(info) = gap;
}

Selection read(glp_prob* p, const Columns& c) {
  const auto value = [&](int j) { return static_cast<int>(std::lround(glp_mip_col_val(p, j))); };
  Selection s;
  s.rings = value(c.rings);
  s.segment_rings = value(c.segs);
  s.trees = value(c.trees);
  s.full = value(c.full);
  s.partial = value(c.partial);
  for (int j : c.members) s.members.push_back(value(j));
  return s;
}

// One branch-and-cut run within what is left of the time limit; false when it found no
// integer solution. `gap` keeps the gap of a run the limit stopped.
bool run(glp_prob* p, double seconds_left, double& gap, bool& optimal) {
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.presolve = GLP_ON;
  parm.msg_lev = GLP_MSG_OFF;
  parm.mip_gap = 0;
  parm.tm_lim = static_cast<int>(std::clamp(seconds_left * 1000, 1.0, 2e9));
  parm.cb_func = remember_gap;
  parm.cb_info = &gap;
  glp_intopt(p, &parm);
  const int status = glp_mip_status(p);
  optimal = status == GLP_OPT;
  return status == GLP_OPT || status == GLP_FEAS;
}

}  // namespace

Selection select(const Input& in, const Rates& r) {
  const auto start = std::chrono::steady_clock::now();
  const auto left = [&] {
    return in.time_limit_s -
           std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  glp_term_out(GLP_OFF);
  Program prog;
  const Columns c = add_columns(prog, in, r);
  add_rows(prog, in, r, c);
  glp_prob* p = prog.load();
  double gap = 1;
  bool optimal = false;
  if (!run(p, left(), gap, optimal)) {
    // Every variable 0 is a solution, so this is the limit, not an infeasible input.
    throw PlanError(
        fmt::format("the solver found no plan within {:g} s (--time-limit)", in.time_limit_s));
  }
  Selection s = read(p, c);
  s.optimal = optimal;
  s.gap = optimal ? 0 : gap;
  // Second pass: the same algbw (to the solver's tolerance) with the fewest devices.
  const double best = glp_mip_obj_val(p);
  const std::vector<std::pair<int, double>> algbw{
      {c.rings, r.ring}, {c.segs, r.segment}, {c.trees, r.tree}};
  const std::vector<std::pair<int, double>> devices{
      {c.full, 1}, {c.partial, 1}, {c.trees, r.tree_devices}};
  prog.row(algbw, GLP_LO, best - 1e-7 * best);
  prog.objective(GLP_MIN, devices);
  double gap2 = 1;
  bool optimal2 = false;
  if (left() > 0 && run(prog.load(), left(), gap2, optimal2)) {
    s = read(p, c);
    s.optimal = optimal && optimal2;
    s.gap = optimal ? 0 : gap;
  }
  s.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace conflux::cli::direct
