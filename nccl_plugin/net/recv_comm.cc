// SPDX-License-Identifier: Apache-2.0
#include "net/recv_comm.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "net/log.h"

namespace conflux::net {

RecvComm::RecvComm(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, size_t senderMinChunk,
                   std::string peer)
    : CommCore(Direction::kRecv, std::move(ctrl), std::move(data), opts, std::move(peer)),
      minChunk_(senderMinChunk) {}

RecvComm::~RecvComm() { shutdown(); }

Status RecvComm::create(Fd ctrl, std::vector<Fd> data, const CommOptions& opts,
                        size_t senderMinChunk, std::string peer, std::unique_ptr<RecvComm>* out) {
  std::unique_ptr<RecvComm> c(
      new RecvComm(std::move(ctrl), std::move(data), opts, senderMinChunk, std::move(peer)));
  CFX_RETURN_IF_ERROR(c->start());
  *out = std::move(c);
  return Status::kOk;
}

Status RecvComm::irecv(int n, void* const* data, const size_t* sizes, const int* tags,
                       Request** req) {
  *req = nullptr;
  if (failed()) return error();
  if (n < 1 || n > kMaxRecvs || data == nullptr || sizes == nullptr || tags == nullptr) {
    CFX_WARN(kLogNet, "irecv: invalid arguments (n=%d, max %d)", n, kMaxRecvs);
    return Status::kInvalidArgument;
  }
  for (int i = 0; i < n; ++i) {
    if (sizes[i] > 0 && data[i] == nullptr) {
      CFX_WARN(kLogNet, "irecv: null buffer for part %d of %zu bytes", i, sizes[i]);
      return Status::kInvalidArgument;
    }
  }
  Request* r = pool_.allocate();
  if (r == nullptr) return Status::kOk;  // full: NCCL retries
  r->n = n;
  for (int i = 0; i < n; ++i) {
    r->parts[i] = Request::Part{static_cast<char*>(data[i]), sizes[i], 0, tags[i], false};
  }
  r->remaining.store(n, std::memory_order_relaxed);  // one unit per part until matched
  if (!posted_.push(r)) {
    fail(Status::kInternalError, "posted-receive queue overflow");
    return error();
  }
  callerStep();  // matches a header that came already, or lane 0 is woken
  *req = r;
  return Status::kOk;
}

bool RecvComm::readHeader(bool* progress) {
  while (!hdrValid_) {
    if (inCallerStep_ && hdrGot_ == 0 && !std::exchange(callerPeeked_, false) &&
        !callerTakesNext()) {
      return false;
    }
    const ssize_t r =
        ::recv(ctrl_.get(), hdrBuf_ + hdrGot_, wire::kMsgHeaderBytes - hdrGot_, MSG_DONTWAIT);
    if (r <= 0) {
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
      if (r < 0 && errno == EINTR) continue;
      if (r == 0 && hdrGot_ == 0) {
        ctrlEof_ = true;  // orderly close between messages
        return false;
      }
      fail(Status::kRemoteError, "control socket: %s in the middle of a message header",
           r == 0 ? "peer closed the connection" : std::strerror(errno));
      return false;
    }
    *progress = true;
    hdrGot_ += size_t(r);
    if (hdrGot_ < wire::kMsgHeaderBytes) continue;
    if (!wire::decodeMsgHeader(hdrBuf_, &hdr_) || hdr_.seq != expectSeq_ ||
        ((hdr_.flags & wire::kMsgInline) && hdr_.size > kMaxInlineBytes)) {
      fail(Status::kRemoteError, "malformed message header (seq %u expected)", expectSeq_);
      return false;
    }
    hdrValid_ = true;
  }
  return true;
}

bool RecvComm::readInline(bool* progress) {
  while (inlineLeft_ > 0) {
    const ssize_t r = ::recv(ctrl_.get(), inlineDst_, inlineLeft_, MSG_DONTWAIT);
    if (r > 0) {
      *progress = true;
      inlineDst_ += r;
      inlineLeft_ -= size_t(r);
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
    if (r < 0 && errno == EINTR) continue;
    fail(Status::kRemoteError, "control socket: %s in the middle of a message",
         r == 0 ? "peer closed the connection" : std::strerror(errno));
    return false;
  }
  Request* done = std::exchange(inlineReq_, nullptr);
  inlinePartial_.store(false, std::memory_order_relaxed);
  done->remaining.fetch_sub(1, std::memory_order_acq_rel);  // the header's unit; last access
  return true;
}

// A caller's step takes only inline messages: the next header, peeked, says whether it is one.
// A bulk message's header stays for lane 0, which moves the data on its sockets right after
// (a caller matching it would have to wake lane 0 for that: a hand-off more, not fewer).
// Nothing there, or the end of the stream: nothing for the caller either (lane 0's poll
// reports an end).
bool RecvComm::callerTakesNext() {
  uint8_t peek[wire::kMsgHeaderBytes];
  const ssize_t r = ::recv(ctrl_.get(), peek, sizeof peek, MSG_DONTWAIT | MSG_PEEK);
  if (r <= 0) return false;
  if (r < ssize_t(sizeof peek)) return true;  // part of a header: read what is there
  wire::MsgHeader h;
  return wire::decodeMsgHeader(peek, &h) && (h.flags & wire::kMsgInline) != 0;
}

bool RecvComm::matchHeader() {
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    Request* r = *it;
    for (int i = 0; i < r->n; ++i) {
      Request::Part& p = r->parts[i];
      if (p.matched || p.tag != hdr_.tag) continue;
      if (hdr_.size > p.posted) {
        fail(Status::kInvalidUsage,
             "message truncated: %llu bytes sent for a %zu-byte receive "
             "(tag %d)",
             static_cast<unsigned long long>(hdr_.size), p.posted, hdr_.tag);
        return false;
      }
      p.matched = true;
      p.actual = hdr_.size;
      bool allMatched =
          std::all_of(r->parts, r->parts + r->n, [](const Request::Part& q) { return q.matched; });
      if (allMatched) pending_.erase(it);  // before the decrement: r may be freed right after
      return acceptMessage(r, p.data);
    }
  }
  // Buffered only while a posted receive waits for another tag: that receive's message may be
  // behind this one. With no receive posted the header waits, and so does the sender's data
  // in the kernel (no copy, no memory for a receiver that is merely late).
  return !pending_.empty() && bufferUnexpected();
}

bool RecvComm::acceptMessage(Request* r, char* dst) {
  const bool inl = (hdr_.flags & wire::kMsgInline) != 0;
  Chunk chunks[64];
  const int nchunks =
      inl ? 0 : splitMessage(hdr_.size, numDataSockets(), minChunk_, hdr_.seq, chunks);
  r->remaining.fetch_add(nchunks, std::memory_order_relaxed);
  uint64_t wake = 0;
  for (int c = 0; c < nchunks; ++c) {
    if (!pushTask(chunks[c].socket, Task{dst + chunks[c].offset, chunks[c].len, r})) {
      fail(Status::kInternalError, "data socket queue overflow");
      return false;
    }
    wake |= uint64_t{1} << ownerOf(chunks[c].socket);
  }
  hdrValid_ = false;
  hdrGot_ = 0;
  ++expectSeq_;
  if (inl && hdr_.size > 0) {  // its payload follows on this socket: readInline
    inlineReq_ = r;
    inlineDst_ = dst;
    inlineLeft_ = hdr_.size;
    inlinePartial_.store(true, std::memory_order_relaxed);
    return true;
  }
  r->remaining.fetch_sub(1, std::memory_order_acq_rel);  // the header's unit
  // Lane 0 too: a caller may be running this (CommCore::callerStep); lane 0 running it
  // itself is awake, and wakeLane costs no wake-up then.
  for (int w = 0; w < numLanes(); ++w) {
    if (wake & (uint64_t{1} << w)) wakeLane(w);
  }
  return true;
}

bool RecvComm::bufferUnexpected() {
  if (int(unexpected_.size()) >= kMaxUnexpected ||
      hdr_.size > kMaxUnexpectedBytes - unexpectedBytes_) {  // no overflow: bytes <= the cap
    if (!std::exchange(unexpectedFullLogged_, true)) {
      CFX_INFO(kLogNet,
               "recv comm from %s: %zu messages (%zu bytes) arrived before a receive for them; "
               "tag %d waits for its irecv",
               peerName().c_str(), unexpected_.size(), unexpectedBytes_, hdr_.tag);
    }
    return false;
  }
  Unexpected& u = unexpected_.emplace_back();
  u.tag = hdr_.tag;
  u.size = hdr_.size;
  u.buf.reset(new (std::nothrow) char[hdr_.size > 0 ? hdr_.size : 1]);
  if (u.buf == nullptr) {
    unexpected_.pop_back();
    fail(Status::kSystemError, "out of memory buffering a %llu-byte message (tag %d)",
         static_cast<unsigned long long>(hdr_.size), hdr_.tag);
    return false;
  }
  u.hold.comm = this;
  u.hold.remaining.store(1, std::memory_order_relaxed);  // the header's unit
  unexpectedBytes_ += u.size;
  return acceptMessage(&u.hold, u.buf.get());
}

void RecvComm::adoptUnexpected(Request* r) {
  for (int i = 0; i < r->n; ++i) {
    Request::Part& p = r->parts[i];
    for (Unexpected& u : unexpected_) {
      if (u.target != nullptr || u.tag != p.tag) continue;
      if (u.size > p.posted) {
        fail(Status::kInvalidUsage,
             "message truncated: %zu bytes sent for a %zu-byte receive (tag %d)", u.size, p.posted,
             p.tag);
        return;
      }
      p.matched = true;
      p.actual = u.size;
      u.target = r;
      u.part = i;
      copiesWaiting_.fetch_add(1, std::memory_order_relaxed);
      break;
    }
  }
}

bool RecvComm::copyReady() const {
  if (copiesWaiting_.load(std::memory_order_relaxed) == 0) return false;
  for (const Unexpected& u : unexpected_) {
    if (u.target != nullptr && u.hold.remaining.load(std::memory_order_acquire) == 0) return true;
  }
  return false;
}

bool RecvComm::finishCopies() {
  if (copiesWaiting_.load(std::memory_order_relaxed) == 0) return false;
  bool progress = false;
  for (auto it = unexpected_.begin(); it != unexpected_.end();) {
    if (it->target == nullptr || it->hold.remaining.load(std::memory_order_acquire) != 0) {
      ++it;
      continue;
    }
    if (it->size > 0) std::memcpy(it->target->parts[it->part].data, it->buf.get(), it->size);
    Request* r = it->target;
    unexpectedBytes_ -= it->size;
    it = unexpected_.erase(it);
    copiesWaiting_.fetch_sub(1, std::memory_order_relaxed);
    r->remaining.fetch_sub(1, std::memory_order_acq_rel);  // the part's unit; last access
    progress = true;
  }
  return progress;
}

bool RecvComm::pumpControl() {
  bool progress = false;
  Request* r;
  while (posted_.pop(&r)) {
    if (!unexpected_.empty()) adoptUnexpected(r);
    if (!std::all_of(r->parts, r->parts + r->n, [](const Request::Part& q) { return q.matched; }))
      pending_.push_back(r);
    progress = true;
  }
  progress |= finishCopies();
  for (;;) {
    if (inlineReq_ != nullptr && !readInline(&progress)) break;
    if (!readHeader(&progress)) break;
    if (!matchHeader()) return progress;
    progress = true;
  }
  if (ctrlEof_ && !failed() && !pending_.empty()) {
    fail(Status::kRemoteError, "peer closed the connection with %zu receive(s) pending",
         pending_.size());
  }
  return progress;
}

std::string RecvComm::describeControl() const {
  char buf[200];
  std::string header = "its header not yet read";
  if (hdrValid_) {
    std::snprintf(buf, sizeof buf,
                  "its header read (waiting for an irecv with its tag: %d, %llu bytes%s)", hdr_.tag,
                  static_cast<unsigned long long>(hdr_.size),
                  (hdr_.flags & wire::kMsgInline) != 0 ? ", inline" : "");
    header = buf;
  } else if (inlineReq_ != nullptr) {
    std::snprintf(buf, sizeof buf, "its inline payload being read (%zu bytes to come)",
                  inlineLeft_);
    header = buf;
  } else if (hdrGot_ > 0) {
    header = "its header partly read";
  }
  char head[600];
  std::snprintf(head, sizeof head,
                "%zu irecv(s) posted but not yet seen, %zu waiting for messages; next message #%u, "
                "%s; %zu unexpected message(s) buffered (%zu bytes, %d matched)%s",
                posted_.size(), pending_.size(), expectSeq_, header.c_str(), unexpected_.size(),
                unexpectedBytes_, copiesWaiting_.load(std::memory_order_relaxed),
                ctrlEof_ ? "; the peer closed the control socket" : "");
  std::string out = head;
  for (const Request* r : pending_) {  // the tags each waiting irecv still needs
    out += " [";
    for (int i = 0; i < r->n; ++i) {
      if (r->parts[i].matched) continue;
      std::snprintf(buf, sizeof buf, "%stag %d", out.back() == '[' ? "" : ", ", r->parts[i].tag);
      out += buf;
    }
    out += "]";
    if (out.size() > 2000) break;
  }
  return out;
}

short RecvComm::controlEvents() {
  if (hdrValid_ || ctrlEof_) return 0;  // waiting for an irecv to match, or nothing more comes
  return POLLIN;
}

}  // namespace conflux::net
