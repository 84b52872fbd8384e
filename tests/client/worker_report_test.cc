// SPDX-License-Identifier: Apache-2.0
// conflux-allreduce-worker's --json report, byte for byte as it was before nlohmann::json wrote
// it (the expected texts were captured from the hand-written writer on the same inputs), and
// json_number, which the end-to-end tests read it with.
#include "worker/worker_report.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "conflux/protocol/data.h"
#include "json_number.h"

namespace conflux::tools {
namespace {

inline WorkerOptions golden_worker_options() {
  WorkerOptions o;
  o.client.rank = 1;
  o.client.n_workers = 4;
  o.client.deterministic = true;
  o.iters = 20;
  o.inputs = InputKind::kRandom;
  return o;
}

inline std::vector<ResultRow> golden_worker_rows() {
  ResultRow a;
  a.bytes = 4096;
  a.count = 1024;
  a.time_us = 52.75;
  a.algbw = 0.0776493;
  a.busbw = 0.116474;
  a.checked = true;
  ResultRow b;
  b.dtype = DType::kBfloat16;
  b.op = Op::kMax;
  b.bytes = 1 << 20;
  b.count = 1 << 19;
  b.time_us = 812.333333;
  b.algbw = 1.29082;
  b.busbw = 1.93623;
  b.wrong = 2;
  return {a, b};
}

inline client::EngineStats golden_worker_stats() {
  client::EngineStats s;
  s.packets_sent = 1000;
  s.packets_received = 998;
  s.bytes_sent = 8192000;
  s.bytes_received = 8175616;
  s.retransmits = 4;
  s.fast_retransmits = 1;
  s.results_accepted = 996;
  s.results_duplicated = 2;
  s.fault_dropped = 3;
  s.gso_sends = 120;
  s.multicast_results = 7;
  s.caller_steps = 11;
  s.drops[1] = 5;
  s.drops[proto::kNumDropReasons - 1] = 6;
  return s;
}

TEST(WorkerReportJson, AsBefore) {
  const client::EngineStats stats = golden_worker_stats();
  EXPECT_EQ(
      worker_report_json(golden_worker_options(), golden_worker_rows(), &stats, "", true),
      R"j({"rank":1,"nranks":4,"deterministic":true,"iters":20,"inputs":"random","ok":true,"error":"","results":[{"dtype":"float","op":"sum","bytes":4096,"count":1024,"time_us":52.75,"algbw_gbps":0.0776493,"busbw_gbps":0.116474,"checked":true,"wrong":0},)j"
      R"j({"dtype":"bfloat16","op":"max","bytes":1048576,"count":524288,"time_us":812.333,"algbw_gbps":1.29082,"busbw_gbps":1.93623,"checked":false,"wrong":2}],"stats":{"packets_sent":1000,"packets_received":998,"bytes_sent":8192000,"bytes_received":8175616,"retransmits":4,"fast_retransmits":1,"results_accepted":996,"results_duplicated":2,"send_errors":0,"fault_dropped":3,"fault_duplicated":0,"fault_reordered":0,"gso_sends":120,"gso_fallbacks":0,"gro_receives":0,"multicast_results":7,"caller_steps":11,"drops":{"truncated":5,"bad_mac":6}}})j"
      "\n");
  EXPECT_EQ(
      worker_report_json(golden_worker_options(), {}, nullptr, "join refused: \"bad\" secret",
                         false),
      R"j({"rank":1,"nranks":4,"deterministic":true,"iters":20,"inputs":"random","ok":false,"error":"join refused: \"bad\" secret","results":[]})j"
      "\n");
}

TEST(WorkerReportJson, JsonNumberReadsTheReport) {
  using client::e2e::json_number;
  const client::EngineStats stats = golden_worker_stats();
  const std::string text =
      worker_report_json(golden_worker_options(), golden_worker_rows(), &stats, "", true);
  EXPECT_EQ(json_number(text, "bytes_received"), 8175616);
  EXPECT_EQ(json_number(text, "time_us"), 52.75);  // the first row's
  EXPECT_EQ(json_number(text, "bad_mac"), 6);
  EXPECT_EQ(json_number(text, "no_such_key"), -1);
  EXPECT_EQ(json_number(text, "error"), -1);           // a string, not a number
  EXPECT_EQ(json_number("{\"rank\": 1", "rank"), -1);  // not JSON
  EXPECT_EQ(json_number("", "rank"), -1);
}

}  // namespace
}  // namespace conflux::tools
