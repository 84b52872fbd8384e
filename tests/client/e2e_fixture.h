// SPDX-License-Identifier: Apache-2.0
// The fixtures of the end-to-end tests: a temp dir, and one confluxd (started by the test).
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_harness.h"

namespace conflux::client::e2e {

// A temp dir per test, kept when the test failed (its logs, for inspection).
class TempDirFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = temp_dir();
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }
  // Starts daemon d with its files in dir_/name (created); "" or an error.
  std::string start_in(const std::string& name, DaemonProcess& d,
                       const std::vector<std::string>& args) {
    const std::string sub = dir_ + "/" + name;
    std::filesystem::create_directories(sub);
    return d.start(sub, args);
  }
  std::string dir_;
};

class DaemonFixture : public TempDirFixture {
 protected:
  void TearDown() override {
    d_.stop();
    TempDirFixture::TearDown();
  }
  void start_daemon(std::vector<std::string> extra = {}) {
    const std::string err = d_.start(dir_, extra);
    ASSERT_EQ(err, "");
  }
  DaemonProcess d_;
};

}  // namespace conflux::client::e2e
