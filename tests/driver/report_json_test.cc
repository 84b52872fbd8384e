// SPDX-License-Identifier: Apache-2.0
// The driver's --json report, byte for byte as it was before nlohmann::json wrote it (the
// expected texts were captured from the hand-written writer on the same inputs).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "driver/report.h"

namespace conflux::driver {
namespace {

TEST(DriverReportJson, AsBefore) {
  RunInfo info;
  info.add("plugin", "/opt/lib/libnccl-net-conflux.so");
  info.add("cmd \"x\"", "a\\b\tc\nd \x01 \xc3\xa9");
  const std::vector<std::string> notes = {"one note", "two\nlines"};
  const std::vector<Row> rows = {{Mode::kCollNet, 4096, 1024, DType::kFloat32, Op::kSum, false,
                                  12.3456789, 0.331778, 0.58061, 0, 0.0123456, 1.5},
                                 {Mode::kRing, 1 << 20, 1 << 19, DType::kBfloat16, Op::kMax, true,
                                  987.5, 1.06183, 2, 3, -1, 0}};
  EXPECT_EQ(
      report_json(info, rows, notes),
      R"j({)j"
      "\n"
      R"j(  "format": "conflux-nccl-driver/1",)j"
      "\n"
      R"j(  "environment": {)j"
      "\n"
      R"j(    "plugin": "/opt/lib/libnccl-net-conflux.so",)j"
      "\n"
      R"j(    "cmd \"x\"": "a\\b\tc\nd \u0001 é")j"
      "\n"
      R"j(  },)j"
      "\n"
      R"j(  "notes": [)j"
      "\n"
      R"j(    "one note",)j"
      "\n"
      R"j(    "two\nlines")j"
      "\n"
      R"j(  ],)j"
      "\n"
      R"j(  "rows": [)j"
      "\n"
      R"j(    {"mode": "collnet", "bytes": 4096, "count": 1024, "dtype": "float", "op": "sum", "inplace": false, "time_us": 12.3457, "algbw": 0.331778, "busbw": 0.58061, "wrong": 0, "host_cpu_s_per_gb": 0.0123456},)j"
      "\n"
      R"j(    {"mode": "ring", "bytes": 1048576, "count": 524288, "dtype": "bfloat16", "op": "max", "inplace": true, "time_us": 987.5, "algbw": 1.06183, "busbw": 2, "wrong": 3, "host_cpu_s_per_gb": -1})j"
      "\n"
      R"j(  ])j"
      "\n"
      R"j(})j"
      "\n");
  EXPECT_EQ(report_json(RunInfo{}, {}, {}), R"j({)j"
                                            "\n"
                                            R"j(  "format": "conflux-nccl-driver/1",)j"
                                            "\n"
                                            R"j(  "environment": {)j"
                                            "\n"
                                            R"j(  },)j"
                                            "\n"
                                            R"j(  "notes": [)j"
                                            "\n"
                                            R"j(  ],)j"
                                            "\n"
                                            R"j(  "rows": [)j"
                                            "\n"
                                            R"j(  ])j"
                                            "\n"
                                            R"j(})j"
                                            "\n");
}

// printf("%.6g") wrote an exponent from 1e6 on; the report now writes the same number in full.
TEST(DriverReportJson, LargeNumbersInFull) {
  const std::vector<Row> rows = {
      {Mode::kRing, 1, 1, DType::kFloat32, Op::kSum, false, 1234567.8, 0.5, 1e6, 0, 2.5e-7, 0}};
  const std::string text = report_json(RunInfo{}, rows, {});
  EXPECT_NE(text.find(R"j("time_us": 1234570, "algbw": 0.5, "busbw": 1000000,)j"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(R"j("host_cpu_s_per_gb": 2.5e-07})j"), std::string::npos) << text;
}

}  // namespace
}  // namespace conflux::driver
