// SPDX-License-Identifier: Apache-2.0
// The v8 adapter (int sizes, process-wide init without finalize), run in a forked child so
// its permanent process reference does not leak into the other tests.
#include "plugin_harness.h"

namespace cfxtest {
namespace {

TEST(V8Adapter, InitPropertiesAndIntSizedTransfer) {
  ncclNet_v8_t* net = Plugin::get().v8;
  ASSERT_NE(net, nullptr);
  int rc = runInChild([net] {
    setenv("CONFLUX_SOCKET_IFNAME", "lo", 1);
    CHILD_CHECK(net->init(&LogCapture::logger) == ncclSuccess);
    CHILD_CHECK(net->init(&LogCapture::logger) == ncclSuccess);  // NCCL may init again
    int ndev = 0;
    CHILD_CHECK(net->devices(&ndev) == ncclSuccess && ndev >= 1);
    ncclNetProperties_v8_t props{};
    CHILD_CHECK(net->getProperties(0, &props) == ncclSuccess);
    CHILD_CHECK(std::strcmp(props.name, "lo") == 0);
    CHILD_CHECK(props.ptrSupport == NCCL_PTR_HOST &&
                props.maxRecvs == 1);  // CONFLUX_NET_MAX_RECVS's default
    CHILD_CHECK(props.netDeviceType == NCCL_NET_DEVICE_HOST);

    char handle[NCCL_NET_HANDLE_MAXSIZE];
    void* listenComm = nullptr;
    CHILD_CHECK(net->listen(0, handle, &listenComm) == ncclSuccess);
    void *send = nullptr, *recv = nullptr;
    for (int i = 0; i < 1000000 && (send == nullptr || recv == nullptr); ++i) {
      if (send == nullptr) CHILD_CHECK(net->connect(0, handle, &send, nullptr) == ncclSuccess);
      if (recv == nullptr) CHILD_CHECK(net->accept(listenComm, &recv, nullptr) == ncclSuccess);
    }
    CHILD_CHECK(send != nullptr && recv != nullptr);

    std::vector<unsigned char> out(300001), in(400000);
    fillPattern(out, 5);
    void* d[1] = {in.data()};
    int sizes[1] = {int(in.size())};
    int tags[1] = {4};
    void *rreq = nullptr, *sreq = nullptr;
    CHILD_CHECK(net->irecv(recv, 1, d, sizes, tags, nullptr, &rreq) == ncclSuccess && rreq);
    CHILD_CHECK(net->isend(send, out.data(), int(out.size()), 4, nullptr, &sreq) == ncclSuccess);
    int got[8] = {0};
    CHILD_CHECK(waitRequest(net, sreq, nullptr) == ncclSuccess);
    CHILD_CHECK(waitRequest(net, rreq, got) == ncclSuccess);
    CHILD_CHECK(got[0] == int(out.size()));
    CHILD_CHECK(std::memcmp(out.data(), in.data(), out.size()) == 0);
    CHILD_CHECK(net->isend(send, out.data(), -1, 4, nullptr, &sreq) == ncclInvalidArgument);
    CHILD_CHECK(net->closeSend(send) == ncclSuccess);
    CHILD_CHECK(net->closeRecv(recv) == ncclSuccess);
    CHILD_CHECK(net->closeListen(listenComm) == ncclSuccess);
  });
  EXPECT_EQ(rc, 0) << "child failed at check " << rc;
}

}  // namespace
}  // namespace cfxtest
