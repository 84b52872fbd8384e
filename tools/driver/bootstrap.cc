// SPDX-License-Identifier: Apache-2.0
// TCP-star bootstrap (see bootstrap.h). Wire: a 16-byte hello {magic, rank, nranks, kind}
// per connection; blobs as {u64 length, bytes}; all integers big-endian.
#include "driver/bootstrap.h"

#include <arpa/inet.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace conflux::driver {
namespace {

constexpr uint32_t kMagic = 0x43464442;  // "CFDB"
constexpr uint32_t kKindData = 0;
constexpr uint32_t kKindLiveness = 1;
constexpr uint64_t kMaxBlob = uint64_t{16} << 20;

std::string peer_name(int r) { return "rank " + std::to_string(r); }

Status send_u64(int fd, uint64_t v, const Deadline& dl, const std::string& who) {
  uint32_t w[2] = {htonl(static_cast<uint32_t>(v >> 32)), htonl(static_cast<uint32_t>(v))};
  return send_all(fd, w, sizeof w, dl, who);
}

Status recv_u64(int fd, uint64_t* v, const Deadline& dl, const std::string& who) {
  uint32_t w[2];
  CFX_TRY(recv_all(fd, w, sizeof w, dl, who));
  *v = (static_cast<uint64_t>(ntohl(w[0])) << 32) | ntohl(w[1]);
  return Status();
}

Status send_blob(int fd, const std::string& b, const Deadline& dl, const std::string& who) {
  CFX_TRY(send_u64(fd, b.size(), dl, who));
  return send_all(fd, b.data(), b.size(), dl, who);
}

Status recv_blob(int fd, std::string* b, const Deadline& dl, const std::string& who) {
  uint64_t len = 0;
  CFX_TRY(recv_u64(fd, &len, dl, who));
  if (len > kMaxBlob) return internal_error("bootstrap: oversized message from " + who);
  b->resize(len);
  return recv_all(fd, b->data(), len, dl, who);
}

}  // namespace

Bootstrap::~Bootstrap() {
  watch_.stop();
  for (int& fd : data_fds_) close_fd(&fd);
}

Status Bootstrap::init(int rank, int nranks, const Endpoint& root, int listen_fd,
                       const Deadline* dl) {
  rank_ = rank;
  nranks_ = nranks;
  dl_ = dl;
  root_ = root;
  if (rank == 0) {
    int lfd = listen_fd;
    if (lfd < 0) CFX_TRY(tcp_listen(root, &lfd, nullptr));
    Status st = accept_all(lfd);
    ::close(lfd);
    return st;
  }
  data_fds_.assign(1, -1);
  int live_fd = -1;
  CFX_TRY(tcp_connect(root, *dl_, &data_fds_[0]));
  CFX_TRY(tcp_connect(root, *dl_, &live_fd));
  for (uint32_t kind : {kKindData, kKindLiveness}) {
    uint32_t hello[4] = {htonl(kMagic), htonl(static_cast<uint32_t>(rank)),
                         htonl(static_cast<uint32_t>(nranks)), htonl(kind)};
    int fd = (kind == kKindData) ? data_fds_[0] : live_fd;
    CFX_TRY(send_all(fd, hello, sizeof hello, *dl_, peer_name(0)));
  }
  CFX_TRY(watch_.start(rank, {LivenessWatch::Peer{live_fd, 0}}));
  return barrier();  // every rank joined
}

Status Bootstrap::accept_all(int lfd) {
  data_fds_.assign(nranks_, -1);
  std::vector<LivenessWatch::Peer> live;
  int expected = 2 * (nranks_ - 1);
  for (int got = 0; got < expected; ++got) {
    int fd = -1;
    CFX_TRY(tcp_accept(lfd, *dl_, &fd));
    uint32_t hello[4];
    Status st = recv_all(fd, hello, sizeof hello, *dl_, "a joining rank");
    uint32_t r = ntohl(hello[1]), n = ntohl(hello[2]), kind = ntohl(hello[3]);
    if (st.ok() && (ntohl(hello[0]) != kMagic || n != static_cast<uint32_t>(nranks_) || r == 0 ||
                    r >= n || kind > kKindLiveness)) {
      st = internal_error("bootstrap: bad hello (rank " + std::to_string(r) + " of " +
                          std::to_string(n) + ", expected nranks " + std::to_string(nranks_) +
                          "): is another driver run using the same root address?");
    }
    if (st.ok() && kind == kKindData && data_fds_[r] >= 0) {
      st = internal_error("bootstrap: rank " + std::to_string(r) + " joined twice");
    }
    if (!st.ok()) {
      ::close(fd);
      for (auto& p : live) ::close(p.fd);
      return st;
    }
    if (kind == kKindData)
      data_fds_[r] = fd;
    else
      live.push_back(LivenessWatch::Peer{fd, static_cast<int>(r)});
  }
  CFX_TRY(watch_.start(0, std::move(live)));
  return barrier();
}

Status Bootstrap::allgather(const std::string& mine, std::vector<std::string>* all) {
  all->assign(nranks_, std::string());
  (*all)[rank_] = mine;
  if (nranks_ == 1) return Status();
  if (rank_ != 0) {
    CFX_TRY(send_blob(data_fds_[0], mine, *dl_, peer_name(0)));
    for (int r = 0; r < nranks_; ++r)
      CFX_TRY(recv_blob(data_fds_[0], &(*all)[r], *dl_, peer_name(0)));
    return Status();
  }
  for (int r = 1; r < nranks_; ++r)
    CFX_TRY(recv_blob(data_fds_[r], &(*all)[r], *dl_, peer_name(r)));
  for (int r = 1; r < nranks_; ++r) {
    for (int j = 0; j < nranks_; ++j)
      CFX_TRY(send_blob(data_fds_[r], (*all)[j], *dl_, peer_name(r)));
  }
  return Status();
}

Status Bootstrap::barrier() {
  std::vector<std::string> ignored;
  return allgather(std::string(), &ignored);
}

Status Bootstrap::open_channel(Bootstrap* channel) {
  channel->rank_ = rank_;
  channel->nranks_ = nranks_;
  channel->dl_ = dl_;
  channel->root_ = root_;
  if (nranks_ == 1) return Status();
  int lfd = -1;
  uint16_t port = 0;
  if (rank_ == 0) CFX_TRY(tcp_listen(Endpoint{root_.host, 0}, &lfd, &port));
  std::vector<std::string> all;
  Status st = allgather(std::to_string(port), &all);
  if (rank_ == 0) {
    if (st.ok()) {
      channel->data_fds_.assign(nranks_, -1);
      for (int got = 1; got < nranks_ && st.ok(); ++got) {
        int fd = -1;
        st = tcp_accept(lfd, *dl_, &fd);
        uint32_t hello[4] = {};
        if (st.ok()) st = recv_all(fd, hello, sizeof hello, *dl_, "a rank's channel");
        const uint32_t r = ntohl(hello[1]);
        if (st.ok() && (ntohl(hello[0]) != kMagic || ntohl(hello[3]) != kKindData || r == 0 ||
                        r >= static_cast<uint32_t>(nranks_) || channel->data_fds_[r] >= 0)) {
          st = internal_error("bootstrap: bad hello on a second channel");
        }
        if (st.ok())
          channel->data_fds_[r] = fd;
        else if (fd >= 0)
          ::close(fd);
      }
    }
    ::close(lfd);
    CFX_TRY(st);
    return channel->barrier();
  }
  CFX_TRY(st);
  channel->data_fds_.assign(1, -1);
  const Endpoint ep{root_.host, static_cast<uint16_t>(std::stoul(all[0]))};
  CFX_TRY(tcp_connect(ep, *dl_, &channel->data_fds_[0]));
  uint32_t hello[4] = {htonl(kMagic), htonl(static_cast<uint32_t>(rank_)),
                       htonl(static_cast<uint32_t>(nranks_)), htonl(kKindData)};
  CFX_TRY(send_all(channel->data_fds_[0], hello, sizeof hello, *dl_, peer_name(0)));
  return channel->barrier();
}

Status Bootstrap::finish() {
  if (rank_ == 0) watch_.begin_drain();
  CFX_TRY(barrier());
  if (rank_ == 0) {
    watch_.wait_peers_done(10.0);
    watch_.stop();
  } else {
    watch_.stop();
    watch_.say_bye();
  }
  watch_.close_all();
  return Status();
}

}  // namespace conflux::driver
