// SPDX-License-Identifier: Apache-2.0
#include "net/send_comm.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "net/log.h"

namespace conflux::net {

SendComm::SendComm(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, std::string peer)
    : CommCore(Direction::kSend, std::move(ctrl), std::move(data), opts, std::move(peer)),
      opts_(opts) {}

SendComm::~SendComm() { shutdown(); }

Status SendComm::create(Fd ctrl, std::vector<Fd> data, const CommOptions& opts, std::string peer,
                        std::unique_ptr<SendComm>* out) {
  std::unique_ptr<SendComm> c(
      new SendComm(std::move(ctrl), std::move(data), opts, std::move(peer)));
  CFX_RETURN_IF_ERROR(c->start());
  *out = std::move(c);
  return Status::kOk;
}

Status SendComm::isend(const void* data, size_t size, int tag, Request** req) {
  *req = nullptr;
  if (failed()) return error();
  if (size > 0 && data == nullptr) {
    CFX_WARN(kLogNet, "isend: null buffer for %zu bytes", size);
    return Status::kInvalidArgument;
  }
  Request* r = pool_.allocate();
  if (r == nullptr) return Status::kOk;  // full: NCCL retries
  r->n = 1;
  r->parts[0] = Request::Part{static_cast<char*>(const_cast<void*>(data)), size, size, tag, true};
  r->seq = nextSeq_++;
  Chunk chunks[64];
  int nchunks = 0;
  if (size > opts_.inlineBytes) {
    nchunks = splitMessage(size, numDataSockets(), opts_.minChunkBytes, r->seq, chunks);
  }
  r->remaining.store(1 + nchunks, std::memory_order_relaxed);
  uint64_t wake = 0;  // bit l: lane l has new data to move
  for (int i = 0; i < nchunks; ++i) {
    Task t{r->parts[0].data + chunks[i].offset, chunks[i].len, r};
    if (!pushTask(chunks[i].socket, t)) {
      fail(Status::kInternalError, "data socket queue overflow");
      return error();
    }
    wake |= uint64_t{1} << ownerOf(chunks[i].socket);
  }
  if (!ctrlQueue_.push(r)) {
    fail(Status::kInternalError, "control queue overflow");
    return error();
  }
  // An inline message leaves from here (or lane 0 is woken); a bulk one's header goes with
  // its data from lane 0, which the receiver then finds together.
  if (nchunks == 0) {
    callerStep();
  } else {
    wakeLane(0);
  }
  for (int w = 0; w < numLanes(); ++w) {
    if (wake & (uint64_t{1} << w)) wakeLane(w);
  }
  *req = r;
  return Status::kOk;
}

bool SendComm::pumpControl() {
  bool progress = false;
  for (;;) {
    if (cur_ == nullptr) {
      Request* next = nullptr;
      if (inCallerStep_ && ctrlQueue_.front(&next) && next->parts[0].posted > opts_.inlineBytes) {
        return progress;  // a bulk message: lane 0 sends its header with its data (isend)
      }
      if (!ctrlQueue_.pop(&cur_)) return progress;
      if (ctrlClosed_) {
        fail(Status::kRemoteError, "peer closed the connection before message %u", cur_->seq);
        return false;
      }
      const Request::Part& p = cur_->parts[0];
      const bool inl = p.posted <= opts_.inlineBytes;
      wire::encodeMsgHeader({p.tag, p.posted, cur_->seq, inl ? wire::kMsgInline : 0u}, hdr_);
      inline_ = inl ? p.posted : 0;
      off_ = 0;
    }
    // The header and an inline payload leave in one call, the payload from the caller's buffer.
    iovec iov[2];
    int niov = 0;
    if (off_ < wire::kMsgHeaderBytes) {
      iov[niov++] = {hdr_ + off_, wire::kMsgHeaderBytes - off_};
      if (inline_ > 0) iov[niov++] = {cur_->parts[0].data, inline_};
    } else {
      const size_t sent = off_ - wire::kMsgHeaderBytes;
      iov[niov++] = {cur_->parts[0].data + sent, inline_ - sent};
    }
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = size_t(niov);
    ssize_t r = ::sendmsg(ctrl_.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r > 0) {
      progress = true;
      off_ += size_t(r);
      if (off_ == wire::kMsgHeaderBytes + inline_) {
        Request* done = cur_;
        cur_ = nullptr;
        done->remaining.fetch_sub(1, std::memory_order_acq_rel);
      }
      continue;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return progress;
    if (r < 0 && errno == EINTR) continue;
    fail(Status::kRemoteError, "send on control socket failed: %s",
         r == 0 ? "connection closed" : std::strerror(errno));
    return false;
  }
}

short SendComm::controlEvents() {
  if (cur_ != nullptr) return POLLOUT;
  return ctrlClosed_ ? 0 : short(POLLIN | POLLRDHUP);  // the receiver never writes: EOF only
}

void SendComm::onControlEvents(short revents) {
  // Only an end of stream closes: lane 0 may have polled for POLLOUT (a message half sent)
  // and a caller's step finished that message before this runs, so cur_ alone cannot tell.
  if (cur_ == nullptr && (revents & (POLLIN | POLLRDHUP | POLLHUP | POLLERR)) != 0) {
    ctrlClosed_ = true;
  }
}

std::string SendComm::describeControl() const {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%zu header(s) queued, %s; next message #%u%s", ctrlQueue_.size(),
                cur_ == nullptr ? "none being sent" : "one being sent", nextSeq_,
                ctrlClosed_ ? "; the peer closed the control socket" : "");
  std::string out = buf;
  if (cur_ != nullptr) {
    std::snprintf(buf, sizeof buf, " (#%u: %zu of %zu bytes written)", cur_->seq, off_,
                  wire::kMsgHeaderBytes + inline_);
    out += buf;
  }
  return out;
}

}  // namespace conflux::net
