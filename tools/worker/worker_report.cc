// SPDX-License-Identifier: Apache-2.0
#include "worker/worker_report.h"

#include "conflux/common/json_text.h"
#include "conflux/protocol/data.h"

namespace conflux::tools {
namespace {

json::Json stats_json(const client::EngineStats& s) {
  json::Json drops = json::Json::object();
  for (int i = 1; i < proto::kNumDropReasons; ++i) {
    if (s.drops[i] != 0)
      drops[proto::drop_reason_name(static_cast<proto::DropReason>(i))] = s.drops[i];
  }
  return {{"packets_sent", s.packets_sent},
          {"packets_received", s.packets_received},
          {"bytes_sent", s.bytes_sent},
          {"bytes_received", s.bytes_received},
          {"retransmits", s.retransmits},
          {"fast_retransmits", s.fast_retransmits},
          {"results_accepted", s.results_accepted},
          {"results_duplicated", s.results_duplicated},
          {"send_errors", s.send_errors},
          {"fault_dropped", s.fault_dropped},
          {"fault_duplicated", s.fault_duplicated},
          {"fault_reordered", s.fault_reordered},
          {"gso_sends", s.gso_sends},
          {"gso_fallbacks", s.gso_fallbacks},
          {"gro_receives", s.gro_receives},
          {"multicast_results", s.multicast_results},
          {"caller_steps", s.caller_steps},
          {"drops", std::move(drops)}};
}

}  // namespace

std::string worker_report_json(const WorkerOptions& o, const std::vector<ResultRow>& rows,
                               const client::EngineStats* stats, const std::string& error,
                               bool ok) {
  json::Json results = json::Json::array();
  for (const ResultRow& r : rows) {
    results.push_back({{"dtype", dtype_name(r.dtype)},
                       {"op", op_name(r.op)},
                       {"bytes", r.bytes},
                       {"count", r.count},
                       {"time_us", json::sig6(r.time_us)},
                       {"algbw_gbps", json::sig6(r.algbw)},
                       {"busbw_gbps", json::sig6(r.busbw)},
                       {"checked", r.checked},
                       {"wrong", r.wrong}});
  }
  json::Json out = {{"rank", o.client.rank},
                    {"nranks", o.client.n_workers},
                    {"deterministic", o.client.deterministic},
                    {"iters", o.iters},
                    {"inputs", o.inputs == InputKind::kExact ? "exact" : "random"},
                    {"ok", ok},
                    {"error", error},
                    {"results", std::move(results)}};
  if (stats != nullptr) out["stats"] = stats_json(*stats);
  return json::compact(out) + "\n";
}

}  // namespace conflux::tools
