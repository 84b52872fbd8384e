// SPDX-License-Identifier: Apache-2.0
// Endpoint parsing and config validation.
#include <gtest/gtest.h>

#include "conflux/client/config.h"

namespace conflux::client {
namespace {

TEST(ParseEndpoints, ParsesAList) {
  std::vector<Endpoint> eps;
  std::string err;
  ASSERT_TRUE(parse_endpoints("127.0.0.1:7470, agg-2.example:80 ,h:65535", &eps, &err)) << err;
  ASSERT_EQ(eps.size(), 3u);
  EXPECT_EQ(eps[0], (Endpoint{"127.0.0.1", 7470}));
  EXPECT_EQ(eps[1], (Endpoint{"agg-2.example", 80}));
  EXPECT_EQ(eps[2], (Endpoint{"h", 65535}));
  EXPECT_EQ(eps[1].to_string(), "agg-2.example:80");
}

TEST(ParseEndpoints, RejectsBadInputWithAMessage) {
  std::vector<Endpoint> eps;
  for (const char* bad : {"", " ", "h", "h:", ":80", "h:0", "h:65536", "h:12x", "h:-1", "a:1,,b:2",
                          "a:1,", "a:1,a:1", "::1:80"}) {
    std::string err;
    EXPECT_FALSE(parse_endpoints(bad, &eps, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
    EXPECT_TRUE(eps.empty()) << bad;
  }
  std::string err;
  parse_endpoints("a:1,b:x", &eps, &err);
  EXPECT_NE(err.find("b:x"), std::string::npos) << err;
}

// A reduction tree's chain (SPEC.md §7): "leaf>mid>...", the leaf contacted, the rest counted.
TEST(ParseEndpoints, ChainsUpATreeNameTheLevelsAbove) {
  std::vector<Endpoint> eps;
  std::string err;
  ASSERT_TRUE(parse_endpoints("10.0.0.1:7470 > 10.0.1.1:7470>r:1, b:2", &eps, &err)) << err;
  ASSERT_EQ(eps.size(), 2u);
  EXPECT_EQ(eps[0].to_string(), "10.0.0.1:7470");
  EXPECT_EQ(eps[0].above, (std::vector<std::string>{"10.0.1.1:7470", "r:1"}));
  EXPECT_TRUE(eps[1].above.empty());
  for (const char* bad : {"a:1>", "a:1>m", ">a:1", "a:1>m:0", "a:1>m:1,a:1",
                          "a:1>b:1>c:1>d:1>e:1>f:1>g:1>h:1>i:1>j:1"}) {
    EXPECT_FALSE(parse_endpoints(bad, &eps, &err)) << bad;
    EXPECT_FALSE(err.empty()) << bad;
  }
  parse_endpoints("a:1>m:x", &eps, &err);
  EXPECT_NE(err.find("m:x"), std::string::npos) << err;
}

// The counts above a leaf grow level by level, from the leaf's to the job's.
TEST(Validate, ServedUpRanksGrowUpTheTree) {
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", 7470}};
  c.n_workers = 8;
  c.served_ranks = {2};
  c.served_up_ranks = {{4, 8}};
  EXPECT_TRUE(validate(c).ok()) << validate(c).message();
  c.served_up_ranks = {{1}};
  EXPECT_FALSE(validate(c).ok());
  c.served_up_ranks = {{4, 3}};
  EXPECT_FALSE(validate(c).ok());
  c.served_up_ranks = {{9}};
  EXPECT_FALSE(validate(c).ok());
  c.served_ranks.clear();
  c.served_up_ranks = {{4}};
  EXPECT_FALSE(validate(c).ok()) << "levels above need the leaf's count";
}

TEST(Validate, StripeWeightsOnePerAggregatorEachAtLeastOne) {
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", 7470}, {"127.0.0.1", 7471}};
  c.n_workers = 2;
  c.stripe_weights = {3, 1};
  EXPECT_TRUE(validate(c).ok()) << validate(c).message();
  c.stripe_weights = {3};
  EXPECT_NE(validate(c).message().find("one weight per aggregator (1 for 2)"), std::string::npos)
      << validate(c).message();
  c.stripe_weights = {3, 0};
  EXPECT_NE(validate(c).message().find("must be >= 1"), std::string::npos);
  c.stripe_weights = {4000, 97};
  EXPECT_EQ(validate(c).code(), Status::Code::kInvalidArgument);
  EXPECT_NE(validate(c).message().find("add up to 4097"), std::string::npos);
}

ClientConfig good() {
  ClientConfig c;
  c.aggregators = {{"127.0.0.1", 7470}};
  c.n_workers = 2;
  c.rank = 1;
  return c;
}

TEST(ValidateConfig, AcceptsDefaultsAndRejectsEachBadField) {
  EXPECT_TRUE(validate(good()).ok()) << validate(good()).message();
  auto bad = [](auto mutate) {
    ClientConfig c = good();
    mutate(c);
    return !validate(c).ok();
  };
  EXPECT_TRUE(bad([](ClientConfig& c) { c.aggregators.clear(); }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.n_workers = 0; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.n_workers = 1025; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.rank = 2; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.window_slots = 0; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.payload_bytes = 0; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.payload_bytes = 61441; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.rto_max = std::chrono::microseconds(1); }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.bind_addr = "localhost"; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.faults.drop = 1.5; }));
  EXPECT_TRUE(bad([](ClientConfig& c) { c.faults.drop = 0.6, c.faults.dup = 0.6; }));
}

}  // namespace
}  // namespace conflux::client
