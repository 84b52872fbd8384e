// RecvComm: the receiving end of one transport connection.
//
// Matching: messages are taken in the order the sender posted them. Each one goes to the
// oldest posted irecv that still has an unfilled part with the message's tag; if none has,
// the control thread waits (later messages wait behind it) until such an irecv is posted.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "net/comm.h"
#include "net/wire.h"

namespace conflux::net {

class RecvComm final : public CommCore {
 public:
  // Builds the comm over established sockets and starts its helper threads. `senderMinChunk`
  // comes from the sender's hello. Called by ListenComm::accept(); not meant for other callers.
  static Status create(Fd ctrl, std::vector<Fd> data, int nthreads, bool callerProgress,
                       size_t senderMinChunk, std::string peer, std::unique_ptr<RecvComm>* out);
  ~RecvComm() override;

  // Posts a grouped receive of n (1..kMaxRecvs) messages: part i takes a message with tag
  // tags[i] of at most sizes[i] bytes into data[i]. Never blocks; *req = nullptr when
  // kMaxRequests requests are in flight. Buffers must stay valid until test() reports done;
  // test() then reports the sizes actually received. A message larger than its part fails the
  // comm with kInvalidUsage. Caller: the one thread driving this comm.
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, Request** req);

 private:
  RecvComm(Fd ctrl, std::vector<Fd> data, int nthreads, bool callerProgress, size_t senderMinChunk,
           std::string peer);

  bool pumpControl() override;
  short controlEvents() override;
  bool controlQueued() const override { return !posted_.empty(); }
  bool controlWanted() const override {
    return !posted_.empty() || !pending_.empty() || inlineReq_ != nullptr;
  }
  // The peek's verdict stands for the step's first header (callerPeeked_): one peek per
  // inline message, not two. Thread 0 may take that message in between; then the step reads
  // whatever follows, which is correct, only perhaps a bulk header thread 0 would have taken.
  bool callerHasWork() override {
    if (inlinePartial_.load(std::memory_order_relaxed)) {  // the rest of a message being read
      callerPeeked_ = false;
      return true;
    }
    callerPeeked_ = posted_.empty() && callerTakesNext();
    return callerPeeked_ || !posted_.empty();
  }
  void onControlEvents(short) override {}

  // Reads (part of) the next header; returns false when it would block (or, in a caller's
  // step, when the next message is not the caller's: callerTakesNext).
  bool readHeader(bool* progress);
  // Reads (the rest of) a matched inline message's payload straight into its part; returns
  // false when it would block, true once the message is complete.
  bool readInline(bool* progress);
  bool callerTakesNext();
  // Assigns the buffered header to a posted part; returns false if no part matches yet.
  bool matchHeader();

  const size_t minChunk_;
  SpscRing<Request*> posted_{kMaxRequests};  // caller -> thread 0: new irecvs

  // Thread 0, or a caller in its step (CommCore's ctrlMu_).
  std::deque<Request*> pending_;  // irecvs with unmatched parts, in posting order
  uint8_t hdrBuf_[wire::kMsgHeaderBytes];
  size_t hdrGot_ = 0;
  wire::MsgHeader hdr_;
  bool hdrValid_ = false;      // hdr_ complete, not yet matched
  bool callerPeeked_ = false;  // the caller's thread only: callerHasWork saw an inline message
  // The matched inline message whose payload is being read (nullptr: none), where its next
  // bytes go and how many are still to come.
  Request* inlineReq_ = nullptr;
  char* inlineDst_ = nullptr;
  size_t inlineLeft_ = 0;
  std::atomic<bool> inlinePartial_{false};  // inlineReq_ != nullptr, for callerHasWork
  bool ctrlEof_ = false;
  uint32_t expectSeq_ = 0;
};

}  // namespace conflux::net
