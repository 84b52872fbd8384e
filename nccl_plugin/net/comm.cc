// SPDX-License-Identifier: Apache-2.0
#include "net/comm.h"

#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "net/log.h"
#include "net/progress.h"

namespace conflux::net {

namespace {

// Bytes waiting in a socket's kernel buffer: unread (receive side) or unsent (send side);
// -1 when the kernel does not say.
long queuedBytes(int fd, bool send) {
  int n = 0;
  return ::ioctl(fd, send ? SIOCOUTQ : SIOCINQ, &n) == 0 ? long(n) : -1L;
}

}  // namespace

CommCore::CommCore(Direction dir, Fd ctrl, std::vector<Fd> data, const CommOptions& opts,
                   std::string peer)
    : ctrl_(std::move(ctrl)),
      dir_(dir),
      callerProgress_(opts.callerProgress),
      peer_(std::move(peer)),
      stallWarnNs_(int64_t(opts.stallWarnMs) * 1'000'000),
      progressThreads_(opts.progressThreads) {
  for (Fd& f : data) data_.push_back(std::make_unique<DataSocket>(std::move(f)));
  const int nthreads = opts.nthreads;
  int nl = nthreads < 1 ? 1 : (nthreads > int(data_.size()) ? int(data_.size()) : nthreads);
  for (int l = 0; l < nl; ++l) lanes_.push_back(std::make_unique<Lane>());
  laneThread_.assign(size_t(nl), -1);
  for (int i = 0; i < int(data_.size()); ++i) lanes_[ownerOf(i)]->sockets.push_back(i);
}

CommCore::~CommCore() {
  shutdown();
  magic_ = 0;
}

Status CommCore::start() {
  // attach() fills laneThread_ before any lane can run, so a lane's step that wakes another
  // lane (acceptMessage) finds its thread.
  const Status s =
      ProgressEngine::instance().attach(this, numLanes(), progressThreads_, &laneThread_);
  if (s != Status::kOk) laneThread_.assign(lanes_.size(), -1);
  return s;
}

void CommCore::shutdown() {
  std::call_once(shutdownOnce_, [this] {
    if (laneThread_[0] >= 0) ProgressEngine::instance().detach(this);  // started
  });
}

bool CommCore::pushTask(int socket, const Task& t) { return data_[socket]->queue.push(t); }

void CommCore::wakeLane(int lane) {
  const int t = laneThread_[size_t(lane)];
  if (t < 0) return;  // not started (a factory that failed)
  lanes_[lane]->wanted.store(true, std::memory_order_seq_cst);
  ProgressEngine::instance().wake(t);
}

void CommCore::callerStep() {
  if (!callerProgress_) {
    wakeLane(0);
    return;
  }
  if (!callerHasWork()) return;
  std::unique_lock<std::mutex> lk(ctrlMu_, std::try_to_lock);
  if (!lk.owns_lock()) {
    wakeLane(0);  // lane 0 is at it, or checking before it sleeps: it must look again
    return;
  }
  if (!failed() && controlWanted()) {
    inCallerStep_ = true;
    pumpControl();
    inCallerStep_ = false;
  }
  // Lane 0 polls the control socket for what it needed when it went to sleep; the step may
  // have changed that (a header half sent, a header read that no receive matches yet).
  const bool stale = controlQueued() || controlEvents() != polledCtrl_;
  lk.unlock();
  if (stale) wakeLane(0);
}

void CommCore::fail(Status s, const char* fmt, ...) {
  int expected = int(Status::kOk);
  if (!error_.compare_exchange_strong(expected, int(s), std::memory_order_acq_rel)) return;
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(failMsg_, sizeof failMsg_, fmt, ap);
  va_end(ap);
  failMsgReady_.store(true, std::memory_order_release);
  CFX_INFO(kLogNet, "%s comm with %s failed (%s): %s", dir_ == Direction::kSend ? "send" : "recv",
           peer_.c_str(), toString(s), failMsg_);
}

void CommCore::warnFailure() {
  const Status s = error();
  if (s == Status::kOk || failWarned_.exchange(true, std::memory_order_relaxed)) return;
  // fail() sets error_ first and its message right after; wait out that window.
  while (!failMsgReady_.load(std::memory_order_acquire)) std::this_thread::yield();
  CFX_WARN(kLogNet, "%s comm with %s failed (%s): %s", dir_ == Direction::kSend ? "send" : "recv",
           peer_.c_str(), toString(s), failMsg_);
}

Status CommCore::test(Request* req, bool* done, size_t* sizes) {
  if (req == nullptr || req->comm != this || !pool_.owns(req) || !req->inUse) {
    CFX_WARN(kLogNet, "test() called with an invalid request %p", static_cast<void*>(req));
    return Status::kInvalidArgument;
  }
  *done = false;
  if (req->remaining.load(std::memory_order_acquire) == 0) {
    for (int i = 0; i < req->n; ++i) {
      if (sizes != nullptr) sizes[i] = req->parts[i].actual;
    }
    *done = true;
    pool_.release(req);
    return Status::kOk;
  }
  if (callerProgress_ && !failed()) {
    callerStep();
    if (req->remaining.load(std::memory_order_acquire) == 0) return test(req, done, sizes);
  }
  // NCCL polls test() in a loop: look at the clock once in a while only.
  if ((++req->polls & 1023) == 0 && stallWarnNs_ > 0 && !stallReported_) checkStall(req);
  return error();
}

void CommCore::checkStall(const Request* req) {
  const int64_t waited = coarseNowNs() - req->postedNs;
  if (waited < stallWarnNs_ || failed()) return;
  stallReported_ = true;
  // A peer that is merely late (a rank still computing) looks the same: hence once, and the
  // state, so that a hang report says which side holds what.
  CFX_WARN(kLogNet, "%s comm with %s: a request has been pending for %.1f s: %s",
           isSend() ? "send" : "recv", peer_.c_str(), double(waited) / 1e9,
           stallReport(req).c_str());
}

std::string CommCore::stallReport(const Request* req) {
  std::string out;
  char buf[256];
  if (req != nullptr) {
    if (isSend()) {
      std::snprintf(buf, sizeof buf,
                    "isend of message #%u (%zu bytes, tag %d), %lld unit(s) left; ", req->seq,
                    req->parts[0].posted, req->parts[0].tag,
                    static_cast<long long>(req->remaining.load(std::memory_order_acquire)));
    } else {
      std::snprintf(buf, sizeof buf,
                    "irecv of %d part(s) (first: up to %zu bytes, tag %d), %lld unit(s) left; ",
                    req->n, req->parts[0].posted, req->parts[0].tag,
                    static_cast<long long>(req->remaining.load(std::memory_order_acquire)));
    }
    out += buf;
  }
  // Lane 0 holds ctrlMu_ only for short stretches; a lock held for long is news itself.
  std::unique_lock<std::mutex> lk(ctrlMu_, std::defer_lock);
  for (int i = 0; i < 1000 && !lk.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (lk.owns_lock()) {
    out += describeControl();
    std::snprintf(buf, sizeof buf, "; lane 0 polls the control socket for %#x",
                  unsigned(polledCtrl_));
    out += buf;
    lk.unlock();
  } else {
    out += "control lock held for over 1 s";
  }
  std::snprintf(buf, sizeof buf, "; control socket %ld bytes %s",
                queuedBytes(ctrl_.get(), isSend()), isSend() ? "unsent" : "unread");
  out += buf;
  for (int i = 0; i < int(data_.size()); ++i) {
    // Only what another thread may read: the task queue's length and the kernel's count
    // (the current task belongs to the socket's helper thread).
    const DataSocket& s = *data_[i];
    std::snprintf(buf, sizeof buf, "; data %d: %zu task(s) queued, %ld bytes in the kernel", i,
                  s.queue.size(), queuedBytes(s.fd.get(), isSend()));
    out += buf;
  }
  for (int l = 0; l < numLanes(); ++l) {
    const int t = laneThread_[size_t(l)];
    std::snprintf(buf, sizeof buf, "; lane %d on thread %d, %s", l, t,
                  t >= 0 && ProgressEngine::instance().asleep(t) ? "asleep" : "awake");
    out += buf;
  }
  return out;
}

// Moves bytes of the current task of one socket; returns true if anything progressed.
bool CommCore::pumpSocket(DataSocket& s, int index) {
  if (!s.hasCur) {
    if (!s.queue.pop(&s.cur)) return false;
    s.hasCur = true;
    s.curDone = 0;
    if (!s.idleWatch && dir_ == Direction::kSend) {  // peer closed while this socket was idle
      fail(Status::kRemoteError, "peer closed data socket %d", index);
      return false;
    }
  }
  if (s.blocked) return false;
  char* p = s.cur.ptr + s.curDone;
  size_t n = s.cur.len - s.curDone;
  ssize_t r = dir_ == Direction::kSend ? ::send(s.fd.get(), p, n, MSG_NOSIGNAL | MSG_DONTWAIT)
                                       : ::recv(s.fd.get(), p, n, MSG_DONTWAIT);
  if (r > 0) {
    s.curDone += size_t(r);
    s.blocked = size_t(r) < n;  // socket buffer full / empty: saves a call that would fail
    if (s.curDone == s.cur.len) {
      s.hasCur = false;
      s.cur.req->remaining.fetch_sub(1, std::memory_order_acq_rel);  // last access to the request
    }
    return true;
  }
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    s.blocked = true;
    return false;
  }
  if (r < 0 && errno == EINTR) return true;
  if (r == 0) {
    fail(Status::kRemoteError, "peer closed data socket %d in the middle of a message", index);
  } else {
    fail(Status::kRemoteError, "%s on data socket %d failed: %s",
         dir_ == Direction::kSend ? "send" : "recv", index, std::strerror(errno));
  }
  return false;
}

// Work that can start without waiting for a socket: a queued task on a socket that is idle.
// (Tasks behind a current one wait for that socket's readiness, which poll() reports.)
bool CommCore::workQueued(const Lane& me) const {
  for (int i : me.sockets) {
    if (!data_[i]->hasCur && !data_[i]->queue.empty()) return true;
  }
  return &me == lanes_[0].get() && controlQueued();
}

bool CommCore::takeLaneWanted(int lane) {
  std::atomic<bool>& w = lanes_[lane]->wanted;
  return w.load(std::memory_order_relaxed) && w.exchange(false, std::memory_order_acq_rel);
}

bool CommCore::stepLane(int lane) {
  if (failed()) return false;
  bool progress = false;
  for (int i : lanes_[lane]->sockets) progress |= pumpSocket(*data_[i], i);
  if (lane == 0) {
    std::lock_guard<std::mutex> lk(ctrlMu_);
    progress |= pumpControl();
  }
  return progress;
}

// What the lane's thread polls while idle: each data socket's readiness for its current task,
// or its peer closing while idle, and lane 0's control events.
bool CommCore::pollSetOfLane(int lane, std::vector<pollfd>* fds) {
  Lane& me = *lanes_[lane];
  me.pollIdx.clear();
  if (takeLaneWanted(lane)) return false;
  if (failed()) return true;
  // Lane 0's control state is shared with callers (callerStep): look at it under the lock.
  std::unique_lock<std::mutex> ctrlLock(ctrlMu_, std::defer_lock);
  if (lane == 0) ctrlLock.lock();
  if (workQueued(me)) return false;
  for (int i : me.sockets) {
    DataSocket& s = *data_[i];
    short ev = 0;
    if (s.hasCur) {
      ev = dir_ == Direction::kSend ? POLLOUT : POLLIN;
    } else if (s.idleWatch) {
      ev = dir_ == Direction::kSend ? short(POLLIN | POLLRDHUP) : short(POLLRDHUP);
    }
    if (ev == 0) continue;
    fds->push_back(pollfd{s.fd.get(), ev, 0});
    me.pollIdx.push_back(i);
  }
  if (lane == 0) {
    polledCtrl_ = controlEvents();
    if (polledCtrl_ != 0) {
      fds->push_back(pollfd{ctrl_.get(), polledCtrl_, 0});
      me.pollIdx.push_back(-2);
    }
  }
  return true;
}

void CommCore::lanePolled(int lane, const pollfd* fds, size_t n) {
  Lane& me = *lanes_[lane];
  for (int i : me.sockets) data_[i]->blocked = false;
  if (fds == nullptr) return;
  for (size_t k = 0; k < n && k < me.pollIdx.size(); ++k) {
    if (fds[k].revents == 0) continue;
    if (me.pollIdx[k] == -2) {
      std::lock_guard<std::mutex> lk(ctrlMu_);
      onControlEvents(fds[k].revents);
    } else {
      DataSocket& s = *data_[me.pollIdx[k]];
      // Readiness of an idle socket means the peer closed or reset it: stop watching; a task
      // later assigned to it fails in pumpSocket.
      if (!s.hasCur) s.idleWatch = false;
    }
  }
}

Status test(Request* req, bool* done, size_t* sizes) {
  if (req == nullptr || req->comm == nullptr || !req->comm->valid()) {
    CFX_WARN(kLogNet, "test() called with an invalid request %p", static_cast<void*>(req));
    return Status::kInvalidArgument;
  }
  return req->comm->test(req, done, sizes);
}

Status waitRequest(Request* req, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    bool done = false;
    CFX_RETURN_IF_ERROR(test(req, &done, nullptr));
    if (done) return Status::kOk;
    if (std::chrono::steady_clock::now() > deadline) return Status::kRemoteError;
    std::this_thread::yield();
  }
}

}  // namespace conflux::net
