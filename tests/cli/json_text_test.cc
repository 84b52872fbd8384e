// SPDX-License-Identifier: Apache-2.0
// conflux/common/json_text.h: the layouts and number forms of the reports.
#include "conflux/common/json_text.h"

#include <gtest/gtest.h>

namespace conflux::json {
namespace {

TEST(JsonText, Layouts) {
  const Json j = {{"a", 1}, {"s", "x, y: \"z\"\n"}, {"l", {1, 2}}, {"o", Json::object()}};
  EXPECT_EQ(compact(j), R"({"a":1,"s":"x, y: \"z\"\n","l":[1,2],"o":{}})");
  EXPECT_EQ(one_line(j), R"({"a": 1, "s": "x, y: \"z\"\n", "l": [1, 2], "o": {}})");
  const Json doc = {
      {"name", "x"}, {"rows", {{{"a", 1}, {"b", 2}}, {{"a", 3}}}}, {"e", Json::array()}};
  EXPECT_EQ(lines(doc),
            "{\n  \"name\": \"x\",\n  \"rows\": [\n    {\"a\": 1, \"b\": 2},\n    "
            "{\"a\": 3}\n  ],\n  \"e\": []\n}");
  EXPECT_EQ(lines(Json{{"e", Json::array()}}, true), "{\n  \"e\": [\n  ]\n}");
}

TEST(JsonText, InvalidUtf8DoesNotThrow) {
  EXPECT_EQ(compact(std::string("a\xff"
                                "b")),
            "\"a\xef\xbf\xbd"
            "b\"");
  EXPECT_EQ(one_line(Json{{"k", std::string("\xc3")}}), "{\"k\": \"\xef\xbf\xbd\"}");
}

TEST(JsonText, NumbersAsPrintfWroteThem) {
  EXPECT_EQ(compact(fixed(1000.25, 1)), "1000.2");  // printf rounds the exact binary value
  EXPECT_EQ(compact(fixed(0.05, 1)), "0.1");
  EXPECT_EQ(compact(fixed(12, 1)), "12.0");
  EXPECT_EQ(compact(fixed(1.5, 4)), "1.5");  // "%.4f" wrote 1.5000
  EXPECT_EQ(compact(sig6(100)), "100");
  EXPECT_EQ(compact(sig6(12.3456789)), "12.3457");
  EXPECT_EQ(compact(sig6(1.5e-7)), "1.5e-07");
  EXPECT_EQ(compact(sig6(1234567.8)), "1234570");  // "%.6g" wrote 1.23457e+06
  EXPECT_EQ(compact(sig6(2e15)), "2e+15");
  EXPECT_EQ(compact(shortest(100)), "100");
  EXPECT_EQ(compact(shortest(0.175)), "0.175");
  EXPECT_EQ(compact(shortest(1e16)), "1e+16");
}

}  // namespace
}  // namespace conflux::json
