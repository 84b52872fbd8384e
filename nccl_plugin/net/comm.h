// SPDX-License-Identifier: Apache-2.0
// CommCore: what a send and a receive connection share — the sockets, the lanes that move
// bytes, the request pool, and the sticky error state.
//
// Lanes: a comm has `nthreads` lanes (CommOptions::nthreads), which the process's
// ProgressEngine (net/progress.h) runs on its shared helper threads, each lane of a comm on a
// different thread, from start() until shutdown() (or the destructor). Data socket i belongs to
// lane i % nthreads; lane 0 also owns the control socket. A thread runs a lane when it has work
// and sleeps in poll() when none of its lanes has; the caller wakes a lane through the engine
// when it hands it work. The caller (the one thread that drives this comm: NCCL's proxy
// thread, or a CollNet engine thread) calls isend/irecv/test; those never block.
//
// Caller progress (CommOptions::callerProgress, the default): isend, irecv and test also run
// lane 0's control work (pumpControl: headers and inline messages) on the caller's thread,
// as NCCL's socket transport does its I/O in test(), so a small message crosses no helper
// thread on either side. Whoever holds ctrlMu_ does that work; the caller only tries the
// lock, and wakes lane 0 when it could not take it, when work is left, or when lane 0's
// thread sleeps on control events that no longer fit. Data sockets stay with their lanes.
#pragma once

#include <poll.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "net/request.h"
#include "net/socket.h"
#include "net/spsc_ring.h"
#include "net/status.h"

namespace conflux::net {

// Resolved per-connection settings (no "auto" values left).
struct CommOptions {
  int nthreads = 1;  // lanes: helper threads that may move this comm's bytes at once
  int nsocksPerThread = 2;
  size_t minChunkBytes = 64 * 1024;
  size_t inlineBytes = 64 * 1024;  // <= kMaxInlineBytes
  int socketBufBytes = 0;          // 0 = kernel default (autotuning)
  // The caller also moves the control socket's bytes (headers, inline messages) in
  // isend/irecv/test, as NCCL's socket transport does its I/O in test(): see CommCore.
  bool callerProgress = true;
  // A request still pending this long logs the connection's state once (stallReport); 0: never.
  int stallWarnMs = 60'000;
  // The ProgressEngine's threads for the whole process (at least nthreads); the first comm
  // that starts them sets the count.
  int progressThreads = 4;
};

class CommCore {
 public:
  CommCore(const CommCore&) = delete;
  CommCore& operator=(const CommCore&) = delete;
  virtual ~CommCore();

  // Non-blocking completion check; caller thread. On done, sizes[0..n) (n = 1 for a send,
  // the irecv's n for a receive) get the bytes carried and `req` is released.
  // A request that cannot complete because the comm failed returns the comm's error.
  Status test(Request* req, bool* done, size_t* sizes);

  // Takes the lanes off the helper threads; idempotent. Pending requests never complete after
  // it. Any thread but a helper thread. Blocks while a helper thread finishes a step
  // (microseconds), or joins a thread left without lanes (milliseconds).
  void shutdown();

  int numDataSockets() const { return int(data_.size()); }
  int numLanes() const { return int(lanes_.size()); }
  Status error() const { return Status(error_.load(std::memory_order_acquire)); }
  // Logs the failure as a warning, once: the NCCL-facing layer calls it when it hands the
  // comm's error to NCCL. fail() itself only writes an INFO line, since a failure nobody
  // asks about (a peer closing while a receive is still posted at teardown) is no news.
  void warnFailure();
  const std::string& peerName() const { return peer_; }

  // The state of this connection, one line: the request, both ends' queues, what lane 0
  // waits for, each data socket's queued tasks and the bytes in the kernel's buffers. For hang
  // reports (test() logs it once when a request has been pending CommOptions::stallWarnMs).
  std::string stallReport(const Request* req);

  static constexpr uint32_t kMagic = 0x434f4d4d;  // sanity check for pointers from NCCL
  bool valid() const { return magic_ == kMagic; }
  bool isSend() const { return dir_ == Direction::kSend; }

 protected:
  enum class Direction { kSend, kRecv };

  CommCore(Direction dir, Fd ctrl, std::vector<Fd> data, const CommOptions& opts, std::string peer);

  // Puts the lanes on the helper threads; called once by the derived factory after
  // construction.
  Status start();

  // Control-socket work done by lane 0; returns true if anything progressed.
  virtual bool pumpControl() = 0;
  // Events to wait for on the control socket when idle (0 = do not poll it).
  virtual short controlEvents() = 0;
  // True if the caller queued control work that lane 0 has not seen.
  virtual bool controlQueued() const = 0;
  // Poll reported `revents` on the control socket while lane 0 was idle.
  virtual void onControlEvents(short revents) = 0;
  // True if a caller's step could move something now: a header to send, or a posted receive
  // waiting for its header (otherwise the step skips the control socket's syscalls). Under
  // ctrlMu_.
  virtual bool controlWanted() const = 0;
  // Without the lock, a hint: whether a caller's step has anything to do (a new send or
  // receive posted, an inline message arriving). When not, the caller leaves the lock alone,
  // so a caller polling test() in a loop does not keep lane 0 from its work.
  virtual bool callerHasWork() = 0;
  // The direction's own control state for stallReport (under ctrlMu_).
  virtual std::string describeControl() const = 0;

  // Hands `t` to data socket `socket`; producer-side of that socket's ring.
  bool pushTask(int socket, const Task& t);
  // Makes lane `lane` look for work: at once if its thread is awake, else through a wake-up.
  void wakeLane(int lane);
  // Caller progress: one round of lane 0's control work on the caller's thread (see
  // above), or, without caller progress, a wake of lane 0.
  void callerStep();
  int ownerOf(int socket) const { return socket % int(lanes_.size()); }

  // Records the first error (an INFO line; see warnFailure); helper threads then stop
  // moving data.
  void fail(Status s, const char* fmt, ...) __attribute__((format(printf, 3, 4)));
  bool failed() const { return error_.load(std::memory_order_acquire) != int(Status::kOk); }

  Fd ctrl_;
  RequestPool pool_{this};
  const Direction dir_;
  const bool callerProgress_;

 private:
  struct DataSocket {
    explicit DataSocket(Fd f) : fd(std::move(f)), queue(kMaxRequests * kMaxRecvs) {}
    Fd fd;
    SpscRing<Task> queue;
    Task cur;
    size_t curDone = 0;
    bool hasCur = false;
    bool blocked = false;   // last call moved less than asked: wait for poll() before retrying
    bool idleWatch = true;  // poll for peer close while idle; cleared once seen
  };
  struct Lane {
    std::atomic<bool> wanted{false};  // the caller handed it work (wakeLane)
    std::vector<int> sockets;         // its data sockets
    std::vector<int> pollIdx;         // pollSetOfLane's entries: data socket, or -2 control
  };

  // The ProgressEngine's side (on the lane's thread, under that thread's lock).
  friend class ProgressEngine;
  // One round of the lane's work; true if anything moved.
  bool stepLane(int lane);
  // Appends the lane's sockets to poll while idle; false if it has work now instead.
  bool pollSetOfLane(int lane, std::vector<pollfd>* fds);
  // The results of polling what pollSetOfLane appended (nullptr: they no longer apply).
  void lanePolled(int lane, const pollfd* fds, size_t n);
  // Consumes the lane's wanted flag.
  bool takeLaneWanted(int lane);

  void checkStall(const Request* req);
  bool pumpSocket(DataSocket& s, int index);
  bool workQueued(const Lane& me) const;

  uint32_t magic_ = kMagic;
  std::string peer_;
  // Held by whoever runs lane 0's control work (pumpControl, controlEvents,
  // onControlEvents, controlQueued): lane 0's thread, or a caller in callerStep().
  std::mutex ctrlMu_;
  short polledCtrl_ = 0;  // the control events lane 0 sleeps on (under ctrlMu_)
  const int64_t stallWarnNs_;
  bool stallReported_ = false;  // caller thread

 protected:
  bool inCallerStep_ = false;  // pumpControl runs on a caller's thread (under ctrlMu_)
  std::vector<std::unique_ptr<DataSocket>> data_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<int> laneThread_;  // the ProgressEngine thread of each lane (-1: not started)
  int progressThreads_;
  std::atomic<int> error_{int(Status::kOk)};
  char failMsg_[512] = {};                 // written once by fail(), after error_ is set
  std::atomic<bool> failMsgReady_{false};  // failMsg_ is complete
  std::atomic<bool> failWarned_{false};    // warnFailure() has warned
  std::once_flag shutdownOnce_;
};

// Completes `req` of any comm (dispatches on req->comm). See CommCore::test.
Status test(Request* req, bool* done, size_t* sizes);

// Polls test(req) until it is done, fails, or `deadline` passes (kRemoteError), yielding
// between polls. For control-path callers that may block (connect-time exchanges, probes),
// never NCCL's proxy thread.
Status waitRequest(Request* req, std::chrono::steady_clock::time_point deadline);

}  // namespace conflux::net
