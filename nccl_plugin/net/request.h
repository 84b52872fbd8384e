// SPDX-License-Identifier: Apache-2.0
// Requests and data-socket tasks of the TCP transport (internal to net/).
#pragma once

#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace conflux::net {

inline constexpr int kMaxRecvs = 8;                  // most messages one grouped irecv may take
inline constexpr int kMaxRequests = 32 * kMaxRecvs;  // requests in flight per comm
// Largest payload carried on the control socket, right behind its header. Neither end
// buffers it: the sender writes it from the caller's buffer, the receiver reads it into the
// matched irecv's buffer.
inline constexpr size_t kMaxInlineBytes = 512 * 1024;

class CommCore;

// CLOCK_MONOTONIC_COARSE in ns: a few ns to read, tick-sized (ms) resolution.
inline int64_t coarseNowNs() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One isend, or one grouped irecv of up to kMaxRecvs messages.
// Ownership: the thread that calls isend/irecv/test (the "caller") allocates and releases it;
// helper threads only decrement `remaining`, and that decrement is their last access.
struct Request {
  struct Part {
    char* data = nullptr;
    size_t posted = 0;  // send: message size; recv: buffer capacity
    size_t actual = 0;  // bytes carried (recv: set when the header is matched)
    int tag = 0;
    bool matched = false;  // recv: a message was assigned to this part (control thread only)
  };

  CommCore* comm = nullptr;
  int n = 0;
  Part parts[kMaxRecvs];
  std::atomic<int64_t> remaining{0};  // outstanding units (headers + chunks); 0 = done
  uint32_t seq = 0;                   // send: message sequence number
  int64_t postedNs = 0;               // CLOCK_MONOTONIC_COARSE at allocation (caller)
  uint32_t polls = 0;                 // test() calls that found it pending (caller)
  int poolIndex = -1;
  bool inUse = false;
};

// Fixed pool of kMaxRequests; caller thread only.
class RequestPool {
 public:
  explicit RequestPool(CommCore* comm) : slots_(kMaxRequests) {
    free_.reserve(kMaxRequests);
    for (int i = kMaxRequests - 1; i >= 0; --i) {
      slots_[i].comm = comm;
      slots_[i].poolIndex = i;
      free_.push_back(i);
    }
  }
  Request* allocate() {
    if (free_.empty()) return nullptr;
    Request* r = &slots_[free_.back()];
    free_.pop_back();
    r->inUse = true;
    r->postedNs = coarseNowNs();  // for the stall report (CommCore::test)
    r->polls = 0;
    return r;
  }
  void release(Request* r) {
    r->inUse = false;
    free_.push_back(r->poolIndex);
  }
  bool owns(const Request* r) const {
    return r >= slots_.data() && r < slots_.data() + slots_.size();
  }

 private:
  std::vector<Request> slots_;
  std::vector<int> free_;
};

// A contiguous piece of one message assigned to one data socket.
struct Task {
  char* ptr = nullptr;
  size_t len = 0;
  Request* req = nullptr;
};

// How a message of `size` bytes is cut into chunks over `nsocks` data sockets. Both ends
// compute the same split from (size, seq) and the sender's minChunk (sent in the hello).
struct Chunk {
  size_t offset;
  size_t len;
  int socket;
};

inline int splitMessage(size_t size, int nsocks, size_t minChunk, uint32_t seq, Chunk* out) {
  if (size == 0) return 0;
  size_t want = (size + minChunk - 1) / minChunk;
  size_t nchunks = want < size_t(nsocks) ? want : size_t(nsocks);
  size_t chunk = (size + nchunks - 1) / nchunks;
  chunk = (chunk + 63) & ~size_t{63};  // cache-line multiples keep copies aligned
  int n = 0;
  for (size_t off = 0; off < size; off += chunk, ++n) {
    out[n] = Chunk{off, size - off < chunk ? size - off : chunk, int((seq + n) % uint32_t(nsocks))};
  }
  return n;
}

}  // namespace conflux::net
