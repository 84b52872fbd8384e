// confluxd as a process: ready_file, SIGTERM with workers connected, configuration errors.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "conformance.h"

namespace conflux::agg::testing {
namespace {

using Clock = std::chrono::steady_clock;

pid_t spawn(const std::vector<std::string>& args, const std::string& stderr_path) {
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(CONFLUXD_PATH));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    FILE* f = std::freopen(stderr_path.c_str(), "w", stderr);
    (void)f;
    execv(CONFLUXD_PATH, argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the child to exit; returns its exit code, or -1 after timeout_ms.
int wait_exit(pid_t pid, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  return -1;
}

std::map<std::string, std::string> read_ready(const std::string& path, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::map<std::string, std::string> kv;
  while (Clock::now() < deadline) {
    std::ifstream in(path);
    if (in) {
      std::string line;
      while (std::getline(in, line)) {
        const size_t eq = line.find('=');
        if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
      }
      return kv;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return kv;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class Process : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/confluxd_test_XXXXXX";
    dir_ = mkdtemp(tmpl);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
};

TEST_P(Process, SigtermWithWorkersSaysShutdownAndExitsZero) {
  const std::string ready = dir_ + "/ready";
  const pid_t pid =
      spawn({"--listen", "127.0.0.1", "--control-port", "0", "--data-port", "0", "--metrics-port",
             "0", "--ready-file", ready, "--dataplane", GetParam(), "--log-level", "info"},
            dir_ + "/stderr");
  auto kv = read_ready(ready, 5000);
  ASSERT_EQ(kv.size(), 4u) << slurp(dir_ + "/stderr");
  EXPECT_EQ(kv["pid"], std::to_string(pid));
  EXPECT_EQ(std::count(kv["data_ports"].begin(), kv["data_ports"].end(), ','), 1);  // 2 threads
  const auto control_port = static_cast<uint16_t>(std::stoi(kv["control_port"]));
  int status = 0;
  EXPECT_EQ(http_get(static_cast<uint16_t>(std::stoi(kv["metrics_port"])), "/healthz", &status),
            "ok\n");

  std::vector<std::unique_ptr<Worker>> w;
  for (uint32_t r = 0; r < 2; ++r) {
    w.push_back(std::make_unique<Worker>());
    JoinSpec spec;
    spec.n_workers = 2;
    spec.rank = r;
    ASSERT_TRUE(w.back()->start_join(control_port, spec));
  }
  for (auto& x : w) ASSERT_EQ(x->finish_join(3000), proto::Status::kOk);
  Worker waiting;  // a third connection still in the rendezvous
  JoinSpec other;
  other.job_key = 99;
  other.n_workers = 2;
  ASSERT_TRUE(waiting.start_join(control_port, other));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));

  const auto t0 = Clock::now();
  ASSERT_EQ(kill(pid, SIGTERM), 0);
  for (Worker* x : {w[0].get(), w[1].get(), &waiting}) {
    auto m = x->ctl.recv_skip_heartbeats(2000);
    ASSERT_TRUE(m.has_value());
    ASSERT_TRUE(std::holds_alternative<proto::Shutdown>(*m)) << proto::to_string(*m);
    EXPECT_EQ(std::get<proto::Shutdown>(*m).reason, 0u);
    EXPECT_TRUE(x->ctl.wait_closed(2000));
  }
  EXPECT_EQ(wait_exit(pid, 2000), 0) << slurp(dir_ + "/stderr");
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1500));
}

TEST_P(Process, ConfigurationErrorsExitWithCode2) {
  const pid_t a = spawn({"--threads", "many"}, dir_ + "/a");
  EXPECT_EQ(wait_exit(a, 5000), 2);
  EXPECT_NE(slurp(dir_ + "/a").find("threads"), std::string::npos);
  std::ofstream(dir_ + "/bad.toml") << "contro_port = 1\n";
  const pid_t b = spawn({"--config", dir_ + "/bad.toml"}, dir_ + "/b");
  EXPECT_EQ(wait_exit(b, 5000), 2);
  EXPECT_NE(slurp(dir_ + "/b").find("contro_port"), std::string::npos);
  // A directory given as the config file (issue 14: it used to run on defaults).
  const pid_t c =
      spawn({"--config", dir_, "--control-port", "0", "--data-port", "0", "--metrics-port", "-1"},
            dir_ + "/c");
  EXPECT_EQ(wait_exit(c, 5000), 2);
  EXPECT_NE(slurp(dir_ + "/c").find("'" + dir_ + "' is not a regular file"), std::string::npos)
      << slurp(dir_ + "/c");
}

INSTANTIATE_TEST_SUITE_P(Backends, Process, ::testing::ValuesIn(runnable_backends()),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace conflux::agg::testing
