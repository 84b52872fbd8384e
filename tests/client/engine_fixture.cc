// SPDX-License-Identifier: Apache-2.0
#include "engine_fixture.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <string>

namespace conflux::client::testing {

ClientConfig fake_engine_config(const std::vector<FakeAggregator*>& aggs, uint32_t n,
                                uint32_t rank) {
  ClientConfig c;
  for (FakeAggregator* a : aggs) c.aggregators.push_back({"127.0.0.1", a->control_port()});
  c.job_key = 42;
  c.n_workers = n;
  c.rank = rank;
  c.window_slots = 4;
  c.payload_bytes = 64;
  c.bind_addr = "127.0.0.1";
  c.spin_us = 0;
  c.join_timeout = std::chrono::seconds(5);
  return c;
}

std::vector<std::unique_ptr<Engine>> make_engines(const std::vector<FakeAggregator*>& aggs,
                                                  uint32_t n,
                                                  const std::function<void(ClientConfig&)>& tweak) {
  std::vector<std::future<std::unique_ptr<Engine>>> fs;
  for (uint32_t r = 0; r < n; ++r) {
    ClientConfig c = fake_engine_config(aggs, n, r);
    if (tweak) tweak(c);
    fs.push_back(std::async(std::launch::async, [c] {
      std::string err;
      auto e = Engine::create(c, &err);
      EXPECT_NE(e, nullptr) << err;
      return e;
    }));
  }
  std::vector<std::unique_ptr<Engine>> out;
  for (auto& f : fs) out.push_back(f.get());
  return out;
}

}  // namespace conflux::client::testing
