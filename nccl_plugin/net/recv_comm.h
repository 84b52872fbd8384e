// SPDX-License-Identifier: Apache-2.0
// RecvComm: the receiving end of one transport connection.
//
// Matching: messages are taken in the order the sender posted them. Each one goes to the
// oldest posted irecv that still has an unfilled part with the message's tag. If none has
// while a posted irecv waits for another tag, the message is *unexpected*: NCCL shares one
// connection among several senders (PXN, maxRecvs > 1, tag = sender) and posts the next grouped
// irecv only after the current group completed, so a sender that runs ahead must not stand in front
// of the others' messages. An unexpected message is read into a buffer of its own (its data sockets
// keep flowing) and copied into the first irecv part later posted with its tag; messages of one tag
// still match in order. Up to kMaxUnexpected messages / kMaxUnexpectedBytes are buffered per
// connection; beyond that the control thread waits for a matching irecv, as it does while no irecv
// is posted at all (the sender's data then waits in the kernel: no copy for a receiver that is
// merely late).
#pragma once

#include <atomic>
#include <deque>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include "net/comm.h"
#include "net/wire.h"

namespace conflux::net {

inline constexpr int kMaxUnexpected = kMaxRequests;
inline constexpr size_t kMaxUnexpectedBytes = size_t{64} << 20;

class RecvComm final : public CommCore {
 public:
  // Builds the comm over established sockets and starts its helper threads. `senderMinChunk`
  // comes from the sender's hello. Called by ListenComm::accept(); not meant for other callers.
  static Status create(Fd ctrl, std::vector<Fd> data, const CommOptions& opts,
                       size_t senderMinChunk, std::string peer, std::unique_ptr<RecvComm>* out);
  ~RecvComm() override;

  // Posts a grouped receive of n (1..kMaxRecvs) messages: part i takes a message with tag
  // tags[i] of at most sizes[i] bytes into data[i]. Never blocks; *req = nullptr when
  // kMaxRequests requests are in flight. Buffers must stay valid until test() reports done;
  // test() then reports the sizes actually received. A message larger than its part fails the
  // comm with kInvalidUsage. Caller: the one thread driving this comm.
  Status irecv(int n, void* const* data, const size_t* sizes, const int* tags, Request** req);

 private:
  RecvComm(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, size_t senderMinChunk,
           std::string peer);

  bool pumpControl() override;
  short controlEvents() override;
  bool controlQueued() const override { return !posted_.empty() || copyReady(); }
  bool controlWanted() const override {
    return !posted_.empty() || !pending_.empty() || inlineReq_ != nullptr ||
           copiesWaiting_.load(std::memory_order_relaxed) > 0;
  }
  // The peek's verdict stands for the step's first header (callerPeeked_): one peek per
  // inline message, not two. Lane 0 may take that message in between; then the step reads
  // whatever follows, which is correct, only perhaps a bulk header lane 0 would have taken.
  bool callerHasWork() override {
    if (inlinePartial_.load(std::memory_order_relaxed)) {  // the rest of a message being read
      callerPeeked_ = false;
      return true;
    }
    if (copiesWaiting_.load(std::memory_order_relaxed) > 0) {  // a buffered message to copy
      callerPeeked_ = false;
      return true;
    }
    callerPeeked_ = posted_.empty() && callerTakesNext();
    return callerPeeked_ || !posted_.empty();
  }
  void onControlEvents(short) override {}
  std::string describeControl() const override;

  // Reads (part of) the next header; returns false when it would block (or, in a caller's
  // step, when the next message is not the caller's: callerTakesNext).
  bool readHeader(bool* progress);
  // Reads (the rest of) a matched inline message's payload straight into its part; returns
  // false when it would block, true once the message is complete.
  bool readInline(bool* progress);
  bool callerTakesNext();
  // Assigns the buffered header to a posted part, or to a buffer of its own when no posted
  // part has its tag (unexpected); returns false when it must wait for an irecv.
  bool matchHeader();
  // Sends the message of the buffered header to `dst` (chunks to the data sockets, or the
  // inline payload next on the control socket), counted in r->remaining; consumes the header.
  bool acceptMessage(Request* r, char* dst);
  bool bufferUnexpected();
  // A newly posted irecv takes the buffered messages of its parts' tags, oldest first.
  void adoptUnexpected(Request* r);
  // Copies every matched unexpected message whose bytes are all in; true if any was.
  bool finishCopies();
  bool copyReady() const;

  // A message that came before any irecv part with its tag (see the top of this file).
  struct Unexpected {
    int tag = 0;
    size_t size = 0;
    std::unique_ptr<char[]> buf;
    Request hold;               // its units (chunks, inline payload), as for a posted part
    Request* target = nullptr;  // the irecv part it was matched to (nullptr: none yet)
    int part = -1;
  };

  const size_t minChunk_;
  SpscRing<Request*> posted_{kMaxRequests};  // caller -> lane 0: new irecvs

  // Lane 0, or a caller in its step (CommCore's ctrlMu_).
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
  std::list<Unexpected> unexpected_;  // arrival order
  size_t unexpectedBytes_ = 0;
  bool unexpectedFullLogged_ = false;
  std::atomic<int> copiesWaiting_{0};  // matched unexpected messages not yet copied
};

}  // namespace conflux::net
