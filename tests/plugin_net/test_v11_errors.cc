// SPDX-License-Identifier: Apache-2.0
// Failure paths through the v11 ABI: refused memory types, truncation, dead peers, bad
// parameters, bad pointers. Every case must return an error code, never hang or crash.
#include <dlfcn.h>

#include <csignal>

#include "plugin_harness.h"
#include "tests/common/wait_until.h"

namespace cfxtest {
namespace {

constexpr size_t k64M = size_t{64} << 20;

TEST_F(V11Test, CudaAndDmaBufRegistrationAreRefusedCleanly) {
  Pair p;
  connect(&p);
  char buf[64];
  void* mh = reinterpret_cast<void*>(0x1);
  LogCapture::clear();
  EXPECT_EQ(net->regMr(p.send, buf, sizeof buf, NCCL_PTR_CUDA, &mh), ncclInternalError);
  EXPECT_EQ(mh, nullptr);
  EXPECT_TRUE(LogCapture::contains("NET/Conflux")) << "refusal must be logged";
  EXPECT_EQ(net->regMrDmaBuf(p.recv, buf, sizeof buf, NCCL_PTR_DMABUF, 0, -1, &mh),
            ncclInternalError);
  ASSERT_EQ(net->regMr(p.recv, buf, sizeof buf, NCCL_PTR_HOST, &mh), ncclSuccess);
  EXPECT_NE(mh, nullptr);
  EXPECT_EQ(net->deregMr(p.recv, mh), ncclSuccess);
  close(p);
}

TEST_F(V11Test, FlushAndConsumedAreNoOpsForHostMemory) {
  Pair p;
  connect(&p);
  char buf[16];
  void* data[1] = {buf};
  int sizes[1] = {16};
  void* req = reinterpret_cast<void*>(0x1);
  EXPECT_EQ(net->iflush(p.recv, 1, data, sizes, nullptr, &req), ncclSuccess);
  EXPECT_EQ(req, nullptr);
  EXPECT_EQ(net->irecvConsumed(p.recv, 1, nullptr), ncclSuccess);
  close(p);
}

TEST_F(V11Test, MessageLargerThanReceiveIsReportedAsInvalidUsage) {
  Pair p;
  connect(&p);
  std::vector<unsigned char> out(200000, 3), in(1000);
  void* d[1] = {in.data()};
  size_t s[1] = {in.size()};
  int t[1] = {1};
  void *rreq = nullptr, *sreq = nullptr;
  ASSERT_EQ(net->irecv(p.recv, 1, d, s, t, nullptr, nullptr, &rreq), ncclSuccess);
  ASSERT_EQ(net->isend(p.send, out.data(), out.size(), 1, nullptr, nullptr, &sreq), ncclSuccess);
  EXPECT_EQ(waitRequest(net, rreq, nullptr, 5.0), ncclInvalidUsage);
  close(p);
}

TEST_F(V11Test, SenderClosedMidMessageFailsTheReceive) {
  Pair p;
  connect(&p);
  std::vector<unsigned char> out(k64M, 1), in(k64M);
  void* sreq = nullptr;
  ASSERT_EQ(net->isend(p.send, out.data(), out.size(), 3, nullptr, nullptr, &sreq), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // part of it is in flight
  ASSERT_EQ(net->closeSend(p.send), ncclSuccess);
  p.send = nullptr;
  void* d[1] = {in.data()};
  size_t s[1] = {in.size()};
  int t[1] = {3};
  void* rreq = nullptr;
  ASSERT_EQ(net->irecv(p.recv, 1, d, s, t, nullptr, nullptr, &rreq), ncclSuccess);
  // A failure, not the 5 s limit (waitRequest answers ncclInProgress then).
  ncclResult_t r = waitRequest(net, rreq, nullptr, 5.0);
  EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError) << "got " << r;
  close(p);
}

// Closing the receiver fails the pending send. The comm's helper thread logs that at INFO;
// the warning comes once, when NCCL is handed the error (a receive still posted when a peer
// closes at teardown is no news).
TEST_F(V11Test, ReceiverClosedFailsThePendingSendWithOneWarning) {
  const auto count = [](const std::string& level) {
    std::lock_guard<std::mutex> lock(LogCapture::mu());
    int n = 0;
    for (const std::string& l : LogCapture::lines()) {
      n += l.rfind(level, 0) == 0 && l.find("send comm with") != std::string::npos;
    }
    return n;
  };
  Pair p;
  connect(&p);
  LogCapture::clear();
  std::vector<unsigned char> out(k64M, 1);
  void* sreq = nullptr;
  ASSERT_EQ(net->isend(p.send, out.data(), out.size(), 3, nullptr, nullptr, &sreq), ncclSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(net->closeRecv(p.recv), ncclSuccess);
  p.recv = nullptr;
  conflux::test::wait_until([&] { return count("3 ") > 0; }, std::chrono::seconds(5));
  EXPECT_EQ(count("3 "), 1) << "the helper thread logs the failure at INFO";
  EXPECT_EQ(count("2 "), 0) << "no warning before NCCL hears of it";
  ncclResult_t r = waitRequest(net, sreq, nullptr, 5.0);
  EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError) << "got " << r;
  EXPECT_EQ(count("2 "), 1);
  // Later sends fail at once, with no second warning.
  void* again = nullptr;
  EXPECT_NE(net->isend(p.send, out.data(), 10, 3, nullptr, nullptr, &again), ncclSuccess);
  EXPECT_EQ(count("2 "), 1) << "one warning per comm";
  close(p);
}

// A forked sender process is killed (SIGKILL) in the middle of a 64 MiB message.
TEST_F(V11Test, KilledPeerProcessFailsTheReceive) {
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* listenComm = nullptr;
  ASSERT_EQ(net->listen(ctx, dev, handle, &listenComm), ncclSuccess);
  pid_t child = fork();
  if (child == 0) {
    void* cctx = nullptr;
    ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
    CHILD_CHECK(net->init(&cctx, 7, &cfg, nullptr, nullptr) == ncclSuccess);
    void* send = nullptr;
    while (send == nullptr)
      CHILD_CHECK(net->connect(cctx, dev, handle, &send, nullptr) == ncclSuccess);
    std::vector<unsigned char> out(k64M, 9);
    void* req = nullptr;
    CHILD_CHECK(net->isend(send, out.data(), out.size(), 1, nullptr, nullptr, &req) == ncclSuccess);
    for (;;) pause();  // wait to be killed
  }
  ASSERT_GT(child, 0);
  void* recv = nullptr;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (recv == nullptr && Clock::now() < deadline) {
    ASSERT_EQ(net->accept(listenComm, &recv, nullptr), ncclSuccess);
  }
  ASSERT_NE(recv, nullptr);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the child fills the sockets
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::vector<unsigned char> in(k64M);
  void* d[1] = {in.data()};
  size_t s[1] = {in.size()};
  int t[1] = {1};
  void* rreq = nullptr;
  ASSERT_EQ(net->irecv(recv, 1, d, s, t, nullptr, nullptr, &rreq), ncclSuccess);
  // A failure, not the 5 s limit (waitRequest answers ncclInProgress then).
  ncclResult_t r = waitRequest(net, rreq, nullptr, 5.0);
  EXPECT_TRUE(r == ncclRemoteError || r == ncclSystemError) << "got " << r;
  EXPECT_EQ(net->closeRecv(recv), ncclSuccess);
  EXPECT_EQ(net->closeListen(listenComm), ncclSuccess);
}

TEST_F(V11Test, BadPointersReturnErrorsInsteadOfCrashing) {
  int done = 0;
  void* req = nullptr;
  EXPECT_NE(net->test(nullptr, &done, nullptr), ncclSuccess);
  EXPECT_NE(net->isend(nullptr, nullptr, 0, 0, nullptr, nullptr, &req), ncclSuccess);
  EXPECT_NE(net->closeSend(nullptr), ncclSuccess);
  EXPECT_NE(net->closeListen(nullptr), ncclSuccess);
  char garbage[NCCL_NET_HANDLE_MAXSIZE] = {};
  void* send = nullptr;
  EXPECT_EQ(net->connect(ctx, dev, garbage, &send, nullptr), ncclInvalidArgument);
  EXPECT_EQ(send, nullptr);
}

// Parameters are read at the first init of a process: check in a fresh forked child.
TEST(V11Params, InvalidValueFailsInitAndNamesTheVariable) {
  ncclNet_v11_t* net = Plugin::get().v11;
  ASSERT_NE(net, nullptr);
  for (const char* bad : {"lots", "17", "-1"}) {
    int rc = runInChild([&] {
      setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
      setenv("CONFLUX_NTHREADS", bad, 1);
      void* ctx = nullptr;
      ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
      CHILD_CHECK(net->init(&ctx, 1, &cfg, &LogCapture::logger, nullptr) == ncclInvalidArgument);
      CHILD_CHECK(LogCapture::contains("CONFLUX_NTHREADS"));
      // NCCL then finalizes the null context the failed init left: quietly.
      CHILD_CHECK(ctx == nullptr);
      CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
      CHILD_CHECK(!LogCapture::contains("invalid context"));
      unsetenv("CONFLUX_NTHREADS");  // a later init reads the environment again
      CHILD_CHECK(net->init(&ctx, 1, &cfg, &LogCapture::logger, nullptr) == ncclSuccess);
      CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
    });
    EXPECT_EQ(rc, 0) << "CONFLUX_NTHREADS=" << bad << ": child failed at check " << rc;
  }
  int rc = runInChild([&] {
    setenv("CONFLUX_MIN_CHUNKSIZE", "12Q", 1);
    void* ctx = nullptr;
    CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) == ncclInvalidArgument);
    CHILD_CHECK(LogCapture::contains("CONFLUX_MIN_CHUNKSIZE"));
  });
  EXPECT_EQ(rc, 0);
}

// CONFLUX_NET_LATENCY_US is what getProperties reports, for the net and for CollNet alike: a
// setting every rank shares, never a per-host measurement (ranks whose NCCL models differ can
// choose different protocols for one collective and hang).
TEST(V11Params, LatencyIsTheSetting) {
  ncclNet_v11_t* net = Plugin::get().v11;
  auto* coll = static_cast<ncclCollNet_v11_t*>(dlsym(Plugin::get().lib, "ncclCollNetPlugin_v11"));
  ASSERT_NE(net, nullptr);
  ASSERT_NE(coll, nullptr);
  int rc = runInChild([&] {
    setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
    setenv("CONFLUX_NET_LATENCY_US", "25", 1);
    void* ctx = nullptr;
    CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) == ncclSuccess);
    for (int i = 0; i < 2; ++i) {
      ncclNetProperties_v11_t p{};
      CHILD_CHECK(net->getProperties(0, &p) == ncclSuccess);
      CHILD_CHECK(p.latency == 25.0f);
    }
    void* cctx = nullptr;
    CHILD_CHECK(coll->init(&cctx, 1, &LogCapture::logger) == ncclSuccess);
    ncclNetProperties_v11_t cp{};
    CHILD_CHECK(coll->getProperties(0, &cp) == ncclSuccess);
    CHILD_CHECK(cp.latency == 25.0f);
    CHILD_CHECK(coll->finalize(cctx) == ncclSuccess);
    CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
  });
  EXPECT_EQ(rc, 0) << "child failed at check " << rc;
  rc = runInChild([&] {
    setenv("CONFLUX_NET_LATENCY_US", "fast", 1);
    void* ctx = nullptr;
    CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) == ncclInvalidArgument);
    CHILD_CHECK(LogCapture::contains("CONFLUX_NET_LATENCY_US"));
  });
  EXPECT_EQ(rc, 0) << "child failed at check " << rc;
}

// CONFLUX_NET_MAX_RECVS is the maxRecvs getProperties declares (every ABI version that has the
// field; 1 when unset), and irecv refuses more parts than declared with ncclInvalidArgument and a
// warning; up to the setting it carries every part. Bad values fail init naming the variable.
TEST(V11Params, MaxRecvsIsTheSettingAndBoundsIrecv) {
  ncclNet_v11_t* net = Plugin::get().v11;
  ncclNet_v8_t* net8 = Plugin::get().v8;
  ASSERT_NE(net, nullptr);
  ASSERT_NE(net8, nullptr);
  for (int setting : {0, 3, 8}) {  // 0: unset, the default (1)
    int rc = runInChild([&] {
      setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
      if (setting == 0) {
        unsetenv("CONFLUX_NET_MAX_RECVS");
      } else {
        setenv("CONFLUX_NET_MAX_RECVS", std::to_string(setting).c_str(), 1);
      }
      const int want = setting == 0 ? 1 : setting;
      void* ctx = nullptr;
      CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) == ncclSuccess);
      ncclNetProperties_v11_t p{};
      CHILD_CHECK(net->getProperties(0, &p) == ncclSuccess);
      CHILD_CHECK(p.maxRecvs == want);
      CHILD_CHECK(net8->init(&LogCapture::logger) == ncclSuccess);
      ncclNetProperties_v8_t p8{};
      CHILD_CHECK(net8->getProperties(0, &p8) == ncclSuccess);
      CHILD_CHECK(p8.maxRecvs == want);
      Pair pr;
      CHILD_CHECK(connectPairV11(net, ctx, 0, &pr) == ncclSuccess);
      constexpr int kParts = 9;
      std::vector<unsigned char> out[kParts], in[kParts];
      void* d[kParts];
      size_t sz[kParts];
      int tags[kParts];
      for (int i = 0; i < kParts; ++i) {
        out[i].resize(1000 + 100 * size_t(i));
        fillPattern(out[i], unsigned(i));
        in[i].assign(out[i].size(), 0);
        d[i] = in[i].data();
        sz[i] = in[i].size();
        tags[i] = 10 + i;
      }
      void* rreq = reinterpret_cast<void*>(0x1);
      LogCapture::clear();
      CHILD_CHECK(net->irecv(pr.recv, want + 1, d, sz, tags, nullptr, nullptr, &rreq) ==
                  ncclInvalidArgument);
      CHILD_CHECK(LogCapture::contains("maxRecvs is " + std::to_string(want)));
      // The refused irecv left the comm usable: `want` parts, one message each.
      CHILD_CHECK(net->irecv(pr.recv, want, d, sz, tags, nullptr, nullptr, &rreq) == ncclSuccess);
      CHILD_CHECK(rreq != nullptr);
      for (int i = 0; i < want; ++i) {
        void* sreq = nullptr;
        CHILD_CHECK(net->isend(pr.send, out[i].data(), out[i].size(), tags[i], nullptr, nullptr,
                               &sreq) == ncclSuccess);
        CHILD_CHECK(sreq != nullptr);
        CHILD_CHECK(waitRequest(net, sreq, nullptr) == ncclSuccess);
      }
      int got[kParts];
      std::fill(got, got + kParts, -1);
      CHILD_CHECK(waitRequest(net, rreq, got) == ncclSuccess);
      for (int i = 0; i < want; ++i) {
        CHILD_CHECK(size_t(got[i]) == out[i].size());
        CHILD_CHECK(in[i] == out[i]);
      }
      CHILD_CHECK(net->closeSend(pr.send) == ncclSuccess);
      CHILD_CHECK(net->closeRecv(pr.recv) == ncclSuccess);
      CHILD_CHECK(net->finalize(ctx) == ncclSuccess);
    });
    EXPECT_EQ(rc, 0) << "CONFLUX_NET_MAX_RECVS=" << setting << ": child failed at check " << rc;
  }
  for (const char* bad : {"0", "9", "x"}) {
    int rc = runInChild([&] {
      setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
      setenv("CONFLUX_NET_MAX_RECVS", bad, 1);
      void* ctx = nullptr;
      CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) == ncclInvalidArgument);
      CHILD_CHECK(LogCapture::contains("CONFLUX_NET_MAX_RECVS"));
    });
    EXPECT_EQ(rc, 0) << "CONFLUX_NET_MAX_RECVS=" << bad << ": child failed at check " << rc;
  }
}

TEST(V11Params, NoMatchingInterfaceFailsInit) {
  ncclNet_v11_t* net = Plugin::get().v11;
  int rc = runInChild([&] {
    setenv("CONFLUX_SOCKET_IFNAME", "=no-such-if0", 1);
    void* ctx = nullptr;
    CHILD_CHECK(net->init(&ctx, 1, nullptr, &LogCapture::logger, nullptr) != ncclSuccess);
  });
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace cfxtest
