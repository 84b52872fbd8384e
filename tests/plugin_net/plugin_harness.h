// SPDX-License-Identifier: Apache-2.0
// Test harness: loads the built libnccl-net-conflux.so with dlopen(RTLD_NOW) and drives its
// exported ABI structs exactly the way NCCL's proxy does (non-blocking connect/accept loops,
// test() polling). Only loopback ("lo") is used.
#pragma once

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdarg>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl/net_v11.h"
#include "nccl/net_v8.h"

namespace cfxtest {

using namespace conflux::nccl;

// Captures every line the plugin logs (through the logger given to init).
struct LogCapture {
  static std::mutex& mu() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& lines() {
    static std::vector<std::string> l;
    return l;
  }
  static void logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt,
                     ...) {
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (std::getenv("CONFLUX_TEST_LOG") != nullptr)
      fprintf(stderr, "[log %d] %s\n", int(level), buf);
    std::lock_guard<std::mutex> lock(mu());
    lines().push_back(std::to_string(int(level)) + " " + buf);
  }
  static bool contains(const std::string& needle) {
    std::lock_guard<std::mutex> lock(mu());
    for (const std::string& l : lines()) {
      if (l.find(needle) != std::string::npos) return true;
    }
    return false;
  }
  static void clear() {
    std::lock_guard<std::mutex> lock(mu());
    lines().clear();
  }
};

// The dlopen'ed plugin, loaded once per test process.
struct Plugin {
  void* lib = nullptr;
  ncclNet_v11_t* v11 = nullptr;
  ncclNet_v8_t* v8 = nullptr;

  static Plugin& get() {
    static Plugin p = [] {
      Plugin q;
      q.lib = dlopen(CONFLUX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
      if (q.lib != nullptr) {
        q.v11 = static_cast<ncclNet_v11_t*>(dlsym(q.lib, "ncclNetPlugin_v11"));
        q.v8 = static_cast<ncclNet_v8_t*>(dlsym(q.lib, "ncclNetPlugin_v8"));
      }
      return q;
    }();
    return p;
  }
};

using Clock = std::chrono::steady_clock;

// Polls test() until done, an error, or the timeout; returns the last result (ncclInProgress on
// timeout).
template <typename Net>
ncclResult_t waitRequest(Net* net, void* req, int* sizes, double timeoutSec = 10.0) {
  auto deadline = Clock::now() + std::chrono::duration<double>(timeoutSec);
  for (;;) {
    int done = 0;
    ncclResult_t r = net->test(req, &done, sizes);
    if (r != ncclSuccess || done) return r;
    if (Clock::now() > deadline) return ncclInProgress;
    std::this_thread::yield();
  }
}

// A connected send/recv pair over the v11 API.
struct Pair {
  void* send = nullptr;
  void* recv = nullptr;
};

inline ncclResult_t connectPairV11(ncclNet_v11_t* net, void* ctx, int dev, Pair* out) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ncclResult_t r = net->listen(ctx, dev, handle, &listenComm);
  if (r != ncclSuccess) return r;
  char peerHandle[NCCL_NET_HANDLE_MAXSIZE];  // as if exchanged through NCCL's bootstrap
  std::memcpy(peerHandle, handle, sizeof handle);
  ncclNetDeviceHandle_v11_t* devComm = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (out->send == nullptr || out->recv == nullptr) {
    if (out->send == nullptr) {
      r = net->connect(ctx, dev, peerHandle, &out->send, &devComm);
      if (r != ncclSuccess) break;
    }
    if (out->recv == nullptr) {
      r = net->accept(listenComm, &out->recv, &devComm);
      if (r != ncclSuccess) break;
    }
    if (Clock::now() > deadline) {
      r = ncclInProgress;
      break;
    }
  }
  net->closeListen(listenComm);
  return r;
}

// Fills a buffer with a pattern that depends on `seed` and the position.
inline void fillPattern(std::vector<unsigned char>& b, unsigned seed) {
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>((i * 131 + seed) >> 3);
}

// In a fork()ed child, a failed check exits with the line number (parent reports it).
#define CHILD_CHECK(cond)                   \
  do {                                      \
    if (!(cond)) _exit(__LINE__ % 250 + 1); \
  } while (0)

// Runs `body` in a forked child; returns its exit code (0 = all CHILD_CHECKs passed).
template <typename F>
int runInChild(F&& body) {
  pid_t pid = fork();
  if (pid == 0) {
    body();
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

// Fixture: v11 init with CONFLUX_SOCKET_IFNAME=lo; finalize on teardown.
class V11Test : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
    net = Plugin::get().v11;
    ASSERT_NE(net, nullptr) << dlerror();
    ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    ASSERT_EQ(net->init(&ctx, 42, &config, &LogCapture::logger, nullptr), ncclSuccess);
    int ndev = 0;
    ASSERT_EQ(net->devices(&ndev), ncclSuccess);
    ASSERT_GE(ndev, 1);
    dev = 0;
  }
  void TearDown() override {
    if (ctx != nullptr) {
      EXPECT_EQ(net->finalize(ctx), ncclSuccess);
    }
  }
  void connect(Pair* p) { ASSERT_EQ(connectPairV11(net, ctx, dev, p), ncclSuccess); }
  void close(Pair& p) {
    if (p.send) {
      EXPECT_EQ(net->closeSend(p.send), ncclSuccess);
    }
    if (p.recv) {
      EXPECT_EQ(net->closeRecv(p.recv), ncclSuccess);
    }
    p = Pair{};
  }

  ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;
  int dev = 0;
};

}  // namespace cfxtest
