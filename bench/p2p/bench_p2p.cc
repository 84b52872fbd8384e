// SPDX-License-Identifier: Apache-2.0
// bench_p2p: point-to-point bandwidth of the Conflux net plugin (v11 ABI, loaded with dlopen
// exactly as NCCL loads it) next to one raw TCP stream, measured side by side in one run on
// loopback. See README.md for the fields.
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "conflux/common/json_text.h"
#include "nccl/net_v11.h"

namespace {

using namespace conflux::nccl;
using Clock = std::chrono::steady_clock;

struct Options {
  size_t size = size_t{64} << 20;
  int count = 32;     // messages per measurement
  int inflight = 4;   // plugin: messages posted ahead on each side
  int repeat = 3;     // measurements per transport; the best is reported
  int nthreads = -1;  // -1: leave CONFLUX_NTHREADS as in the environment
  int nsocks = -1;
  int idleSleepUs = 0;  // caller threads: 0 = yield when a poll pass made no progress
  std::string json;
};

struct Result {
  std::string transport;
  double seconds = 0;  // best of `repeat`
  double gbps = 0;     // GB/s (1e9 bytes) of payload
};

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench_p2p: %s\n", what);
  std::exit(1);
}

void quietLogger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  if (level != NCCL_LOG_WARN) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(stderr, fmt, ap);
  va_end(ap);
  std::fputc('\n', stderr);
}

// ---- raw TCP: one stream over 127.0.0.1, blocking send/recv in two threads ----
double runRawTcp(const Options& o, const std::vector<char>& src, std::vector<char>& dst) {
  int ls = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (ls < 0 || bind(ls, (sockaddr*)&a, sizeof a) || listen(ls, 1) ||
      getsockname(ls, (sockaddr*)&a, &len)) {
    die("raw tcp listen failed");
  }
  int cs = socket(AF_INET, SOCK_STREAM, 0);
  if (cs < 0 || connect(cs, (sockaddr*)&a, sizeof a)) die("raw tcp connect failed");
  int rs = accept(ls, nullptr, nullptr);
  if (rs < 0) die("raw tcp accept failed");
  int one = 1;
  setsockopt(cs, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  auto start = Clock::now();
  std::thread sender([&] {
    for (int m = 0; m < o.count; ++m) {
      for (size_t off = 0; off < o.size;) {
        ssize_t r = send(cs, src.data() + off, o.size - off, MSG_NOSIGNAL);
        if (r <= 0) die("raw tcp send failed");
        off += size_t(r);
      }
    }
  });
  for (int m = 0; m < o.count; ++m) {
    for (size_t off = 0; off < o.size;) {
      ssize_t r = recv(rs, dst.data() + off, o.size - off, 0);
      if (r <= 0) die("raw tcp recv failed");
      off += size_t(r);
    }
  }
  double sec = std::chrono::duration<double>(Clock::now() - start).count();
  sender.join();
  close(cs);
  close(rs);
  close(ls);
  return sec;
}

// ---- plugin: v11 API, one send comm and one recv comm, each driven by its own thread ----
struct PluginPair {
  ncclNet_v11_t* net = nullptr;
  void* ctx = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
};

PluginPair openPlugin() {
  void* lib = dlopen(CONFLUX_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) die(dlerror());
  PluginPair p;
  p.net = static_cast<ncclNet_v11_t*>(dlsym(lib, "ncclNetPlugin_v11"));
  if (p.net == nullptr) die("ncclNetPlugin_v11 not found");
  ncclNetCommConfig_v11_t cfg{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  if (p.net->init(&p.ctx, 1, &cfg, &quietLogger, nullptr) != ncclSuccess) die("init failed");
  char handle[NCCL_NET_HANDLE_MAXSIZE];
  void* lc = nullptr;
  if (p.net->listen(p.ctx, 0, handle, &lc) != ncclSuccess) die("listen failed");
  while (p.send == nullptr || p.recv == nullptr) {
    if (!p.send && p.net->connect(p.ctx, 0, handle, &p.send, nullptr) != ncclSuccess) {
      die("connect failed");
    }
    if (!p.recv && p.net->accept(lc, &p.recv, nullptr) != ncclSuccess) die("accept failed");
  }
  p.net->closeListen(lc);
  return p;
}

// Keeps `inflight` requests posted until `count` have completed.
template <typename Post>
void pump(ncclNet_v11_t* net, const Options& o, Post post) {
  std::vector<void*> window(size_t(o.inflight), nullptr);
  int posted = 0, completed = 0;
  while (completed < o.count) {
    bool progress = false;
    for (int w = 0; w < o.inflight; ++w) {
      void*& r = window[size_t(w)];
      if (r == nullptr && posted < o.count) {
        r = post(w, posted);
        if (r != nullptr) ++posted, progress = true;
      }
      if (r != nullptr) {
        int done = 0;
        int sizes[8];
        if (net->test(r, &done, sizes) != ncclSuccess) die("test failed");
        if (done) {
          r = nullptr;
          ++completed;
          progress = true;
        }
      }
    }
    if (!progress) {  // NCCL's proxy thread yields when idle; --idle-sleep-us sleeps instead
      if (o.idleSleepUs > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(o.idleSleepUs));
      } else {
        std::this_thread::yield();
      }
    }
  }
}

double runPlugin(const PluginPair& p, const Options& o, const std::vector<char>& src,
                 std::vector<std::vector<char>>& dst) {
  ncclNet_v11_t* net = p.net;
  auto start = Clock::now();
  std::thread sender([&] {
    pump(net, o, [&](int, int m) {
      void* r = nullptr;
      if (net->isend(p.send, const_cast<char*>(src.data()), o.size, m & 0xffff, nullptr, nullptr,
                     &r) != ncclSuccess) {
        die("isend failed");
      }
      return r;
    });
  });
  pump(net, o, [&](int w, int m) {
    void* data[1] = {dst[size_t(w)].data()};
    size_t sizes[1] = {o.size};
    int tags[1] = {m & 0xffff};
    void* r = nullptr;
    if (net->irecv(p.recv, 1, data, sizes, tags, nullptr, nullptr, &r) != ncclSuccess) {
      die("irecv failed");
    }
    return r;
  });
  double sec = std::chrono::duration<double>(Clock::now() - start).count();
  sender.join();
  return sec;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) die(("missing value after " + a).c_str());
      return argv[++i];
    };
    if (a == "--size")
      o.size = std::strtoull(next(), nullptr, 10);
    else if (a == "--count")
      o.count = std::atoi(next());
    else if (a == "--inflight")
      o.inflight = std::atoi(next());
    else if (a == "--repeat")
      o.repeat = std::atoi(next());
    else if (a == "--nthreads")
      o.nthreads = std::atoi(next());
    else if (a == "--nsocks")
      o.nsocks = std::atoi(next());
    else if (a == "--idle-sleep-us")
      o.idleSleepUs = std::atoi(next());
    else if (a == "--json")
      o.json = next();
    else {
      std::printf(
          "usage: bench_p2p [--size BYTES] [--count N] [--inflight W] [--repeat R]\n"
          "                 [--nthreads T] [--nsocks S] [--idle-sleep-us U] [--json FILE]\n");
      std::exit(a == "--help" ? 0 : 1);
    }
  }
  if (o.size == 0 || o.count < 1 || o.inflight < 1 || o.inflight > 256 || o.repeat < 1) {
    die("invalid options");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  setenv("CONFLUX_SOCKET_IFNAME", "lo", 0);
  if (o.nthreads >= 0) setenv("CONFLUX_NTHREADS", std::to_string(o.nthreads).c_str(), 1);
  if (o.nsocks >= 0) setenv("CONFLUX_NSOCKS_PERTHREAD", std::to_string(o.nsocks).c_str(), 1);
  std::vector<char> src(o.size);
  for (size_t i = 0; i < o.size; ++i) src[i] = char(i * 7 + 1);
  std::vector<std::vector<char>> dst(size_t(o.inflight), std::vector<char>(o.size, 0));

  PluginPair pair = openPlugin();
  Result raw{"raw-tcp-1-stream", 1e30, 0}, plug{"conflux-net-v11", 1e30, 0};
  for (int r = 0; r < o.repeat; ++r) {  // interleaved so both see the same machine state
    raw.seconds = std::min(raw.seconds, runRawTcp(o, src, dst[0]));
    plug.seconds = std::min(plug.seconds, runPlugin(pair, o, src, dst));
  }
  bool intact = std::memcmp(src.data(), dst[0].data(), o.size) == 0;
  pair.net->closeSend(pair.send);
  pair.net->closeRecv(pair.recv);
  pair.net->finalize(pair.ctx);
  double bytes = double(o.size) * o.count;
  raw.gbps = bytes / raw.seconds / 1e9;
  plug.gbps = bytes / plug.seconds / 1e9;

  const char* nt = std::getenv("CONFLUX_NTHREADS");
  const char* ns = std::getenv("CONFLUX_NSOCKS_PERTHREAD");
  std::printf("p2p bandwidth on loopback: %d x %zu-byte messages, best of %d, %u cpus\n", o.count,
              o.size, o.repeat, std::thread::hardware_concurrency());
  std::printf("%-18s %9s %8s %9s %8s\n", "transport", "inflight", "seconds", "GB/s", "ratio");
  std::printf("%-18s %9s %8.3f %9.2f %8.2f\n", raw.transport.c_str(), "1", raw.seconds, raw.gbps,
              1.0);
  std::printf("%-18s %9d %8.3f %9.2f %8.2f\n", plug.transport.c_str(), o.inflight, plug.seconds,
              plug.gbps, plug.gbps / raw.gbps);
  std::printf(
      "plugin threads/sockets: CONFLUX_NTHREADS=%s CONFLUX_NSOCKS_PERTHREAD=%s "
      "(unset/0 = auto: 1x2 on loopback); data check: %s\n",
      nt ? nt : "unset", ns ? ns : "unset", intact ? "ok" : "MISMATCH");

  if (!o.json.empty()) {
    namespace json = conflux::json;
    const auto result = [](const Result& r) {
      return json::Json{{"transport", r.transport},
                        {"seconds", json::fixed(r.seconds, 6)},
                        {"gbytes_per_s", json::fixed(r.gbps, 4)}};
    };
    const json::Json report = {{"benchmark", "bench_p2p"},
                               {"message_bytes", o.size},
                               {"messages", o.count},
                               {"inflight", o.inflight},
                               {"repeat", o.repeat},
                               {"cpus", std::thread::hardware_concurrency()},
                               {"conflux_nthreads", nt ? nt : ""},
                               {"conflux_nsocks_perthread", ns ? ns : ""},
                               {"data_check", intact},
                               {"results", {result(raw), result(plug)}},
                               {"ratio_plugin_over_raw", json::fixed(plug.gbps / raw.gbps, 4)}};
    std::ofstream f(o.json);
    f << json::lines(report) << "\n";
    if (!f) die("cannot write the json file");
  }
  return intact ? 0 : 2;
}
