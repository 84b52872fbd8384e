// SPDX-License-Identifier: Apache-2.0
// SendComm: the sending end of one transport connection.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "net/comm.h"
#include "net/wire.h"

namespace conflux::net {

class SendComm final : public CommCore {
 public:
  // Builds the comm over established sockets and starts its helper threads.
  // Called by Connector::poll(); not meant for other callers.
  static Status create(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, std::string peer,
                       std::unique_ptr<SendComm>* out);
  ~SendComm() override;

  // Posts one message of `size` bytes (0 allowed) with `tag`. Never blocks. Sets *req to
  // nullptr when kMaxRequests requests are in flight (try again after test() released one).
  // `data` must stay valid and unchanged until test() reports done. Caller: the one thread
  // driving this comm. Returns the comm's error once it has failed.
  Status isend(const void* data, size_t size, int tag, Request** req);

 private:
  SendComm(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, std::string peer);

  bool pumpControl() override;
  short controlEvents() override;
  // Headers behind a half-sent message wait for it: lane 0 then sleeps on POLLOUT
  // (controlEvents) instead of finding "work" it cannot do and spinning until the peer reads.
  bool controlQueued() const override { return cur_ == nullptr && !ctrlQueue_.empty(); }
  bool controlWanted() const override { return cur_ != nullptr || !ctrlQueue_.empty(); }
  // A header half sent is lane 0's (it polls for POLLOUT): only new ones are the caller's.
  bool callerHasWork() override { return !ctrlQueue_.empty(); }
  void onControlEvents(short revents) override;
  std::string describeControl() const override;

  const CommOptions opts_;
  SpscRing<Request*> ctrlQueue_{kMaxRequests};  // caller -> lane 0: headers to send
  uint32_t nextSeq_ = 0;                        // caller thread

  // Lane 0, or a caller in its step (CommCore's ctrlMu_).
  Request* cur_ = nullptr;
  uint8_t hdr_[wire::kMsgHeaderBytes];
  size_t inline_ = 0;  // payload bytes that follow hdr_ on the control socket
  size_t off_ = 0;     // of the header and that payload, bytes already sent
  bool ctrlClosed_ = false;
};

}  // namespace conflux::net
