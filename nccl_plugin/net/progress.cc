// SPDX-License-Identifier: Apache-2.0
#include "net/progress.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <numeric>
#include <string>
#include <system_error>

#include "conflux/common/thread_name.h"
#include "net/comm.h"
#include "net/log.h"

namespace conflux::net {

namespace {

void signal(const Fd& fd) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t r = ::write(fd.get(), &one, sizeof one);
}

}  // namespace

ProgressEngine& ProgressEngine::instance() {
  // Never destroyed: a process may exit, or unload the plugin, with comms (and so threads)
  // still running. It lives in static storage, and a slot frees what it holds when its thread
  // stops, so that with no comm open the engine holds no heap memory (nothing for a leak
  // checker to report once the library is unloaded).
  alignas(ProgressEngine) static unsigned char storage[sizeof(ProgressEngine)];
  static ProgressEngine* engine = new (storage) ProgressEngine();
  return *engine;
}

ProgressEngine::ProgressEngine() : pid_(::getpid()) {}

// A child of fork() inherits the slots but none of the threads, and possibly a slot mutex that
// a parent's thread held: fresh slots are made over the old ones, which are abandoned as they
// are (not destroyed: their std::thread objects would terminate the process).
void ProgressEngine::resetAfterFork() {
  for (Slot& s : slots_) new (&s) Slot();
  pid_ = ::getpid();
}

Status ProgressEngine::attach(CommCore* comm, int lanes, int threads, std::vector<int>* threadOf) {
  std::lock_guard<std::mutex> lc(lifecycleMu_);
  if (pid_ != ::getpid()) resetAfterFork();
  const int n = std::clamp(std::max(threads, lanes), 1, kMaxThreads);
  lanes = std::min(lanes, n);
  std::vector<int> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  // Least loaded first; ties to the lower index, so that few threads run while few lanes do.
  std::stable_sort(order.begin(), order.end(),
                   [this](int a, int b) { return slot(a).lanes.size() < slot(b).lanes.size(); });
  threadOf->assign(order.begin(), order.begin() + lanes);
  for (int i = 0; i < lanes; ++i) {
    const int t = (*threadOf)[size_t(i)];
    Slot& s = slot(t);
    if (!s.thread.joinable()) {
      // Made once and kept while the slot's thread stops and starts again: a lane of a comm
      // being closed may still wake a thread that just stopped, and must not write into a
      // descriptor closed (and perhaps reused) meanwhile. A stale wake-up only costs a pass.
      if (!s.wakeFd.valid()) s.wakeFd.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
      if (!s.wakeFd.valid()) {
        CFX_WARN(kLogNet, "eventfd failed: %s", std::strerror(errno));
        detachLocked(comm);
        return Status::kSystemError;
      }
      s.stop = false;
      try {
        s.thread = std::thread([this, &s, t] {
          name_this_thread("cfx-net" + std::to_string(t));
          run(s);
        });
      } catch (const std::system_error& e) {
        CFX_WARN(kLogNet, "cannot start a helper thread: %s", e.what());
        detachLocked(comm);
        return Status::kSystemError;
      }
    }
    s.waiting.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(s.mu);
      s.lanes.push_back(Lane{comm, i, true});
      ++s.epoch;
    }
    s.waiting.fetch_sub(1, std::memory_order_relaxed);
    signal(s.wakeFd);  // it may sleep on a poll set without this comm's sockets
  }
  return Status::kOk;
}

void ProgressEngine::detach(CommCore* comm) {
  std::lock_guard<std::mutex> lc(lifecycleMu_);
  if (pid_ != ::getpid()) resetAfterFork();  // a parent's comm: its lanes went with the parent
  detachLocked(comm);
}

void ProgressEngine::detachLocked(CommCore* comm) {
  for (int t = 0; t < kMaxThreads; ++t) {
    Slot& s = slot(t);
    if (!s.thread.joinable()) continue;
    bool removed = false;
    s.waiting.fetch_add(1, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lk(s.mu);
      const auto gone = std::remove_if(s.lanes.begin(), s.lanes.end(),
                                       [comm](const Lane& l) { return l.comm == comm; });
      removed = gone != s.lanes.end();
      s.lanes.erase(gone, s.lanes.end());
      if (removed) ++s.epoch;
      if (s.lanes.empty()) s.stop = true;
    }
    s.waiting.fetch_sub(1, std::memory_order_relaxed);
    if (!removed) continue;
    signal(s.wakeFd);
    if (s.stop) {
      s.thread.join();
      std::vector<Lane>().swap(s.lanes);
    }
  }
}

void ProgressEngine::wake(int thread) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  Slot& s = slot(thread);
  if (s.sleeping.load(std::memory_order_seq_cst)) signal(s.wakeFd);
}

bool ProgressEngine::asleep(int thread) const {
  return slot(thread).sleeping.load(std::memory_order_relaxed);
}

int ProgressEngine::running() {
  std::lock_guard<std::mutex> lc(lifecycleMu_);
  if (pid_ != ::getpid()) return 0;  // a parent's threads
  return int(std::count_if(slots_.begin(), slots_.end(),
                           [](const Slot& s) { return s.thread.joinable(); }));
}

void ProgressEngine::run(Slot& s) {
  std::vector<pollfd> fds;
  std::vector<size_t> begin;  // the poll entries of lane i: [begin[i], begin[i + 1])
  std::unique_lock<std::mutex> lk(s.mu);
  while (!s.stop) {
    bool progress = false;
    for (Lane& l : s.lanes) {
      if (!l.active && !l.comm->takeLaneWanted(l.lane)) continue;
      l.active = l.comm->stepLane(l.lane);
      progress |= l.active;
    }
    if (progress) {
      if (s.waiting.load(std::memory_order_relaxed) > 0) {  // let attach/detach in
        lk.unlock();
        std::this_thread::yield();
        lk.lock();
      }
      continue;
    }
    // Nothing moved: sleep on every lane's sockets. `sleeping` is set before the lanes are
    // looked at, so a caller's wake after that look finds it set and signals.
    s.sleeping.store(true, std::memory_order_seq_cst);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    fds.assign(1, pollfd{s.wakeFd.get(), POLLIN, 0});
    begin.clear();
    bool idle = true;
    for (Lane& l : s.lanes) {
      begin.push_back(fds.size());
      if (!l.comm->pollSetOfLane(l.lane, &fds)) {
        l.active = true;
        idle = false;
      }
    }
    begin.push_back(fds.size());
    if (!idle) {
      s.sleeping.store(false, std::memory_order_relaxed);
      continue;
    }
    const uint64_t epoch = s.epoch;
    lk.unlock();
    const int r = ::poll(fds.data(), nfds_t(fds.size()), -1);
    s.sleeping.store(false, std::memory_order_relaxed);
    if (r > 0 && fds[0].revents != 0) {
      uint64_t v;
      [[maybe_unused]] ssize_t rr = ::read(s.wakeFd.get(), &v, sizeof v);
    }
    lk.lock();
    // Lanes attached or detached meanwhile: the entries no longer match; every lane looks
    // again (poll reports what is still ready next time).
    const bool current = s.epoch == epoch && r > 0;
    for (size_t i = 0; i < s.lanes.size(); ++i) {
      Lane& l = s.lanes[i];
      if (!current) {
        l.comm->lanePolled(l.lane, nullptr, 0);
        l.active = true;
        continue;
      }
      const pollfd* mine = fds.data() + begin[i];
      const size_t n = begin[i + 1] - begin[i];
      if (std::any_of(mine, mine + n, [](const pollfd& p) { return p.revents != 0; })) {
        l.comm->lanePolled(l.lane, mine, n);
        l.active = true;
      }
    }
  }
}

}  // namespace conflux::net
