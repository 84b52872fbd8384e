// The fixture of the end-to-end tests: a temp dir and one confluxd (started by the test).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_harness.h"

namespace conflux::client::e2e {

class DaemonFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    d_.stop();
    // Keep the logs of a failed test for inspection.
    if (!HasFailure()) {
      std::filesystem::remove_all(dir_);
    }
  }
  void start_daemon(std::vector<std::string> extra = {}) {
    const std::string err = d_.start(dir_, extra);
    ASSERT_EQ(err, "");
  }
  std::string dir_;
  DaemonProcess d_;
};

}  // namespace conflux::client::e2e
