// The selection program of `conflux plan --fabric direct`, solved by GLPK's branch and cut.
//
// Slots k = 0..K-1, K = the fewest ports any worker has (every topology uses at least one port
// of every worker). Per slot: binaries ring_k, seg_k, tree_k (at most one), the segment ring's
// devices dev_k and its members per port class mem_k,c. Per class c (P_c ports, N_c workers),
// every worker uses 2 ports per ring or segment ring and 1 per tree, less 1 per membership;
// spread round-robin, N_c workers fit P_c ports each exactly when
//   sum_k mem_k,c >= N_c * (2 * sum_k (ring_k + seg_k) + sum_k tree_k - P_c).
// Two passes: the first maximises algbw = sum_k (ring_k * r.ring + seg_k * r.segment +
// tree_k * r.tree); the second keeps that algbw and minimises the devices, so that a plan never
// spends a device it does not need.
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
  std::vector<int> ring, seg, tree, dev;
  std::vector<std::vector<int>> mem;  // [slot][class]
};

Columns add_columns(Program& prog, const Input& in, const Rates& r) {
  const int slots = in.min_ports();
  const int n = in.worker_count();
  const int max_seg_devices = (n + r.group - 1) / r.group;
  Columns c;
  for (int k = 0; k < slots; ++k) {
    c.ring.push_back(prog.column(GLP_BV, 0, 1, r.ring));
    c.seg.push_back(prog.column(GLP_BV, 0, 1, r.segment));
    c.tree.push_back(prog.column(GLP_BV, 0, 1, r.tree));
    c.dev.push_back(prog.column(GLP_IV, 0, max_seg_devices, 0));
    std::vector<int>& mem = c.mem.emplace_back();
    for (const PortClass& pc : in.workers) mem.push_back(prog.column(GLP_IV, 0, pc.count, 0));
  }
  return c;
}

void add_rows(Program& prog, const Input& in, const Rates& r, const Columns& c) {
  const size_t slots = c.ring.size();
  const int n = in.worker_count();
  std::vector<std::pair<int, double>> devices;
  for (size_t k = 0; k < slots; ++k) {
    prog.row({{c.ring[k], 1}, {c.seg[k], 1}, {c.tree[k], 1}}, GLP_UP, 1);
    if (k + 1 < slots) {  // used slots first: one solution per selection, not K! of them
      prog.row({{c.ring[k], 1},
                {c.seg[k], 1},
                {c.tree[k], 1},
                {c.ring[k + 1], -1},
                {c.seg[k + 1], -1},
                {c.tree[k + 1], -1}},
               GLP_LO, 0);
    }
    std::vector<std::pair<int, double>> held{{c.dev[k], -r.group}};
    for (size_t cls = 0; cls < in.workers.size(); ++cls) {
      prog.row({{c.mem[k][cls], 1}, {c.seg[k], -in.workers[cls].count}}, GLP_UP, 0);
      held.emplace_back(c.mem[k][cls], 1);
    }
    prog.row(held, GLP_UP, 0);  // members fit the devices' ports
    prog.row({{c.dev[k], 1}, {c.seg[k], -1}}, GLP_LO, 0);
    prog.row({{c.dev[k], 1}, {c.seg[k], -(n + r.group - 1) / r.group}}, GLP_UP, 0);
    devices.emplace_back(c.dev[k], 1);
    devices.emplace_back(c.tree[k], r.tree_devices);
  }
  prog.row(devices, GLP_UP, in.device_budget);
  for (size_t cls = 0; cls < in.workers.size(); ++cls) {
    const double count = in.workers[cls].count;
    std::vector<std::pair<int, double>> ports;
    for (size_t k = 0; k < slots; ++k) {
      ports.emplace_back(c.mem[k][cls], 1);
      ports.emplace_back(c.ring[k], -2 * count);
      ports.emplace_back(c.seg[k], -2 * count);
      ports.emplace_back(c.tree[k], -count);
    }
    prog.row(ports, GLP_LO, -count * in.workers[cls].ports);
  }
}

// The relative gap at the solver's last look, kept for a run stopped by the time limit.
void remember_gap(glp_tree* tree, void* info) {
  const double gap = glp_ios_mip_gap(tree);
  if (std::isfinite(gap)) *static_cast<double*>(info) = gap;
}

Selection read(glp_prob* p, const Input& in, const Columns& c) {
  Selection s;
  const auto value = [&](int j) { return static_cast<int>(std::lround(glp_mip_col_val(p, j))); };
  for (size_t k = 0; k < c.ring.size(); ++k) {
    if (value(c.ring[k])) s.topologies.push_back({Kind::kRing, 0, {}});
    if (value(c.tree[k])) s.topologies.push_back({Kind::kTree, 0, {}});
    if (!value(c.seg[k])) continue;
    Selected seg{Kind::kSegmentRing, value(c.dev[k]), {}};
    for (size_t cls = 0; cls < in.workers.size(); ++cls)
      seg.members.push_back(value(c.mem[k][cls]));
    s.topologies.push_back(std::move(seg));
  }
  std::stable_sort(s.topologies.begin(), s.topologies.end(),
                   [](const Selected& a, const Selected& b) { return a.kind < b.kind; });
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
  Selection s = read(p, in, c);
  s.optimal = optimal;
  s.gap = optimal ? 0 : gap;
  // Second pass: the same algbw (to the solver's tolerance) with the fewest devices.
  const double best = glp_mip_obj_val(p);
  std::vector<std::pair<int, double>> algbw, devices;
  for (size_t k = 0; k < c.ring.size(); ++k) {
    algbw.insert(algbw.end(), {{c.ring[k], r.ring}, {c.seg[k], r.segment}, {c.tree[k], r.tree}});
    devices.insert(devices.end(), {{c.dev[k], 1}, {c.tree[k], r.tree_devices}});
  }
  prog.row(algbw, GLP_LO, best - 1e-7 * best);
  prog.objective(GLP_MIN, devices);
  double gap2 = 1;
  bool optimal2 = false;
  if (left() > 0 && run(prog.load(), left(), gap2, optimal2)) {
    s = read(p, in, c);
    s.optimal = optimal && optimal2;
    s.gap = optimal ? 0 : gap;
  }
  s.solve_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return s;
}

}  // namespace conflux::cli::direct
