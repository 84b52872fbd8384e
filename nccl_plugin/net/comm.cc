#include "net/comm.h"

#include <linux/sockios.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <string>

#include "conflux/common/thread_name.h"
#include "net/log.h"

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
      stallWarnNs_(int64_t(opts.stallWarnMs) * 1'000'000) {
  for (Fd& f : data) data_.push_back(std::make_unique<DataSocket>(std::move(f)));
  const int nthreads = opts.nthreads;
  int nw = nthreads < 1 ? 1 : (nthreads > int(data_.size()) ? int(data_.size()) : nthreads);
  for (int w = 0; w < nw; ++w) workers_.push_back(std::make_unique<Worker>());
  for (int i = 0; i < int(data_.size()); ++i) workers_[ownerOf(i)]->sockets.push_back(i);
}

CommCore::~CommCore() {
  shutdown();
  magic_ = 0;
}

Status CommCore::start() {
  for (auto& w : workers_) {
    w->wakeFd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (!w->wakeFd.valid()) {
      CFX_WARN(kLogNet, "eventfd failed: %s", std::strerror(errno));
      return Status::kSystemError;
    }
  }
  for (int w = 0; w < int(workers_.size()); ++w) {
    workers_[w]->thread = std::thread([this, w] {
      name_this_thread("cfx-net" + std::to_string(w));
      run(w);
    });
  }
  return Status::kOk;
}

void CommCore::shutdown() {
  std::call_once(shutdownOnce_, [this] {
    stop_.store(true, std::memory_order_release);
    for (auto& w : workers_) {
      if (w->wakeFd.valid()) {
        uint64_t one = 1;
        [[maybe_unused]] ssize_t r = ::write(w->wakeFd.get(), &one, sizeof one);
      }
    }
    for (auto& w : workers_) {
      if (w->thread.joinable()) w->thread.join();
    }
  });
}

bool CommCore::pushTask(int socket, const Task& t) { return data_[socket]->queue.push(t); }

void CommCore::wakeWorker(int w) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  Worker& k = *workers_[w];
  if (k.sleeping.load(std::memory_order_seq_cst)) {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t r = ::write(k.wakeFd.get(), &one, sizeof one);
  }
}

void CommCore::callerStep() {
  if (!callerProgress_) {
    wakeWorker(0);
    return;
  }
  if (!callerHasWork()) return;
  std::unique_lock<std::mutex> lk(ctrlMu_, std::try_to_lock);
  if (!lk.owns_lock()) {
    wakeWorker(0);  // thread 0 is at it, or checking before it sleeps: it must look again
    return;
  }
  if (!failed() && controlWanted()) {
    inCallerStep_ = true;
    pumpControl();
    inCallerStep_ = false;
  }
  // Thread 0 polls the control socket for what it needed when it went to sleep; the step may
  // have changed that (a header half sent, a header read that no receive matches yet).
  const bool stale = controlQueued() || controlEvents() != polledCtrl_;
  lk.unlock();
  if (stale) wakeWorker(0);
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
  // Thread 0 holds ctrlMu_ only for short stretches; a lock held for long is news itself.
  std::unique_lock<std::mutex> lk(ctrlMu_, std::defer_lock);
  for (int i = 0; i < 1000 && !lk.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (lk.owns_lock()) {
    out += describeControl();
    std::snprintf(buf, sizeof buf, "; thread 0 polls the control socket for %#x",
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
  for (int w = 0; w < int(workers_.size()); ++w) {
    std::snprintf(buf, sizeof buf, "; thread %d %s", w,
                  workers_[w]->sleeping.load(std::memory_order_relaxed) ? "asleep" : "awake");
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
bool CommCore::workQueued(const Worker& me) const {
  for (int i : me.sockets) {
    if (!data_[i]->hasCur && !data_[i]->queue.empty()) return true;
  }
  return &me == workers_[0].get() && controlQueued();
}

void CommCore::run(int w) {
  Worker& me = *workers_[w];
  while (!stop_.load(std::memory_order_acquire)) {
    if (!failed()) {
      bool progress = false;
      for (int i : me.sockets) progress |= pumpSocket(*data_[i], i);
      if (w == 0) {
        std::lock_guard<std::mutex> lk(ctrlMu_);
        progress |= pumpControl();
      }
      if (progress) continue;
    }
    sleep(w);
  }
}

// Blocks in poll() until a socket is ready, the peer closes, or the caller wakes us.
void CommCore::sleep(int w) {
  Worker& me = *workers_[w];
  me.sleeping.store(true, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  // Thread 0's control state is shared with callers (callerStep): look at it under the lock.
  std::unique_lock<std::mutex> ctrlLock(ctrlMu_, std::defer_lock);
  if (w == 0) ctrlLock.lock();
  if (stop_.load(std::memory_order_acquire) || (!failed() && workQueued(me))) {
    me.sleeping.store(false, std::memory_order_relaxed);
    return;
  }
  pollfd fds[1 + 64 + 1];
  int idx[1 + 64 + 1];  // data socket index, -1 eventfd, -2 control
  int n = 0;
  fds[n] = {me.wakeFd.get(), POLLIN, 0};
  idx[n++] = -1;
  if (!failed()) {
    for (int i : me.sockets) {
      DataSocket& s = *data_[i];
      short ev = 0;
      if (s.hasCur) {
        ev = dir_ == Direction::kSend ? POLLOUT : POLLIN;
      } else if (s.idleWatch) {
        ev = dir_ == Direction::kSend ? short(POLLIN | POLLRDHUP) : short(POLLRDHUP);
      }
      if (ev == 0) continue;
      fds[n] = {s.fd.get(), ev, 0};
      idx[n++] = i;
    }
    short cev = w == 0 ? controlEvents() : 0;
    if (w == 0) polledCtrl_ = cev;
    if (cev != 0) {
      fds[n] = {ctrl_.get(), cev, 0};
      idx[n++] = -2;
    }
  }
  if (ctrlLock.owns_lock()) ctrlLock.unlock();
  int r = ::poll(fds, nfds_t(n), -1);
  me.sleeping.store(false, std::memory_order_relaxed);
  for (int i : me.sockets) data_[i]->blocked = false;
  if (r <= 0) return;
  for (int k = 0; k < n; ++k) {
    if (fds[k].revents == 0) continue;
    if (idx[k] == -1) {
      uint64_t v;
      [[maybe_unused]] ssize_t rr = ::read(me.wakeFd.get(), &v, sizeof v);
    } else if (idx[k] == -2) {
      std::lock_guard<std::mutex> lk(ctrlMu_);
      onControlEvents(fds[k].revents);
    } else {
      DataSocket& s = *data_[idx[k]];
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
