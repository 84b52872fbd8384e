// SPDX-License-Identifier: Apache-2.0
#include "core/params.h"

#include <strings.h>

#include <array>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "net/request.h"

namespace conflux::plugin {
namespace {

// The rows of the test hooks (collnet/test_hooks.h) exist only in test builds.
#ifdef CONFLUX_TEST_HOOKS
constexpr size_t kTestHookParams = 6;
#else
constexpr size_t kTestHookParams = 0;
#endif

const std::array<ParamSpec, 41 + kTestHookParams> kParams{{
    {"CONFLUX_SOCKET_IFNAME", ParamType::kString, "", 0, 0,
     "Interfaces for the p2p net, NCCL_SOCKET_IFNAME syntax (prefixes, ^ excludes, = exact). "
     "Empty: all but docker*/lo*/virbr*, else docker*, else lo.",
     &Config::socketIfname},
    {"CONFLUX_NTHREADS", ParamType::kInt, "0", 0, 16,
     "Helper threads that may move one connection's data at once (its lanes, each on a "
     "different thread of CONFLUX_NET_PROGRESS_THREADS). 0: 1 on loopback, 2 otherwise.",
     &Config::nthreads},
    {"CONFLUX_NET_PROGRESS_THREADS", ParamType::kInt, "4", 1, 64,
     "Helper threads of the p2p net per process, shared by all its connections (NCCL opens "
     "tens per rank): the least loaded run each new connection's lanes. At least "
     "CONFLUX_NTHREADS; threads start with their first connection and stop with their last.",
     &Config::netProgressThreads},
    {"CONFLUX_NSOCKS_PERTHREAD", ParamType::kInt, "0", 0, 16,
     "Data sockets per lane (CONFLUX_NTHREADS x sockets <= 64). 0: 2.", &Config::nsocksPerThread},
    {"CONFLUX_MIN_CHUNKSIZE", ParamType::kSize, "64K", 4096, 1LL << 30,
     "Smallest piece a message is cut into across data sockets.", &Config::minChunkBytes},
    {"CONFLUX_INLINE_BYTES", ParamType::kSize, "64K", 0, 512 * 1024,
     "Messages up to this size travel on the control socket with their header, straight from "
     "and into the caller's buffers (and, with CONFLUX_NET_CALLER_PROGRESS, are moved by the "
     "caller's thread alone). Larger ones are cut into chunks over the data sockets.",
     &Config::inlineBytes},
    {"CONFLUX_SOCKET_BUFSIZE", ParamType::kSize, "0", 0, 1LL << 30,
     "SO_SNDBUF/SO_RCVBUF of the connections' sockets. 0: kernel autotuning. A size below 4 "
     "segments (TCP MSS) is raised to 4 segments: smaller ones stall TCP on its persist timer "
     "with large MTUs (loopback, IPoIB).",
     &Config::socketBufBytes},
    {"CONFLUX_NET_CALLER_PROGRESS", ParamType::kBool, "1", 0, 0,
     "1: the thread that calls isend/irecv/test (NCCL's proxy thread) also moves each "
     "connection's headers and inline messages itself, as NCCL's socket transport does, so a "
     "small message crosses no helper thread; the helper threads move the bulk data and take "
     "over when the caller is not polling. 0: only the helper threads do socket I/O.",
     &Config::netCallerProgress},
    {"CONFLUX_NET_STALL_WARN_S", ParamType::kInt, "60", 0, 86400,
     "A send or receive of the p2p net still pending after this many seconds logs its "
     "connection's state once, as a warning (queues, what each side waits for, the bytes in "
     "the kernel's buffers): for hang reports. A peer that is merely late (a rank still "
     "computing) looks the same. 0: never.",
     &Config::netStallWarnS},
    {"CONFLUX_NET_LATENCY_US", ParamType::kInt, "0", 0, 1000000,
     "The latency (us) getProperties reports; NCCL adds it to its network model to choose "
     "algorithms and protocols. It must be the same on every rank: NCCL agrees bandwidths "
     "across ranks but takes each rank's own latency, so ranks that report different figures "
     "can choose different protocols for one collective and hang. 0, as NCCL's own socket and "
     "IB transports report.",
     &Config::netLatencyUs},
    {"CONFLUX_NET_MAX_RECVS", ParamType::kInt, "1", 1, net::kMaxRecvs,
     "The maxRecvs getProperties reports: the most messages one irecv may take (an irecv with "
     "more parts is refused). 1, as NCCL's socket transport declares: every sender has a "
     "connection of its own and every irecv takes one message. Above 1, NCCL shares one "
     "connection per peer and channel among the local ranks that send through this proxy (PXN) "
     "and posts grouped irecvs of up to this many parts (tag = sender): fewer connections and "
     "fds, but a sender more than 64 MiB or 256 messages ahead of a late one on the shared "
     "connection stalls it for good (NCCL hangs; bench/p2p/README.md, maxRecvs). Not applied to "
     "a CONFLUX_NET_DELEGATE, whose properties pass unchanged.",
     &Config::netMaxRecvs},
    {"CONFLUX_NET_DELEGATE", ParamType::kString, "", 0, 0,
     "Another NCCL net plugin (a path, or a name the loader resolves, e.g. "
     "libnccl-net-ofi.so) that carries every point-to-point byte, its devices and properties "
     "unchanged, while CollNet stays Conflux's. Empty: Conflux's TCP net.",
     &Config::netDelegate},
    {"CONFLUX_NET_DELEGATE_FALLBACK", ParamType::kBool, "0", 0, 0,
     "When the delegate cannot be loaded, exports no known version or fails its first init: "
     "1, warn and use Conflux's TCP net; 0, fail NCCL's init with the reason.",
     &Config::netDelegateFallback},
    {"CONFLUX_AGGREGATORS", ParamType::kString, "", 0, 0,
     "Aggregator control endpoints host:port,host:port; an entry dns:NAME:PORT stands for "
     "every IPv4 address NAME resolves to (a Kubernetes headless Service), resolved by rank 0 "
     "at each connect and sent to the ranks with the same list. Each AllReduce is striped over "
     "all that every rank joined at connect (one that refuses the job, e.g. a draining daemon, "
     "is left out on every rank; none left, or a name that does not resolve: decline). In a "
     "reduction tree a rank names its leaves; deeper than 2, each with its chain up, "
     "leaf>mid>... (the root left out). Empty: CollNet declines and NCCL uses its own "
     "algorithms.",
     &Config::aggregators},
    {"CONFLUX_STRIPE_WEIGHTS", ParamType::kString, "", 0, 0,
     "Weights of the CONFLUX_AGGREGATORS entries, w1,w2,... (integers >= 1, one per entry as "
     "resolved, at most 4096 in all): entry i carries w_i of every sum(w) packets of each "
     "AllReduce, so aggregators (or trees, or a direct-connect plan's devices) of unequal "
     "capacity each take what they can carry. Rank 0's weights hold for every rank. Empty: "
     "equal shares.",
     &Config::stripeWeights},
    {"CONFLUX_REQUIRE_AGGREGATORS", ParamType::kBool, "0", 0, 0,
     "1: a CollNet connect without usable aggregators is an error logged as a warning instead "
     "of a quiet decline.",
     &Config::requireAggregators},
    {"CONFLUX_RING_FRACTION", ParamType::kFraction, "auto", 0, 0,
     "Share (0..1) of every AllReduce sent over the worker ring at the same time as the rest "
     "goes through the aggregators. auto: starts from the aggregators' grants and capacity "
     "(CONFLUX_AGGREGATOR_MBPS, else what they advertise, or what they delivered in the "
     "connect's probe where that is under half of it) against the workers' link, then "
     "follows what both paths deliver, measured and agreed by all ranks while the job runs; a "
     "ring share the link would carry in less time than the ring's 2(n-1) hops take (hop "
     "measured at connect) goes through the aggregators. A number: fixed.",
     &Config::ringFraction},
    {"CONFLUX_RING_MIN_US", ParamType::kInt, "10", 0, 1000000,
     "A request whose ring share would take less than this many microseconds on the "
     "workers' link goes wholly through the aggregators (unless CONFLUX_RING_FRACTION is 1): "
     "a small ring share costs the ring's latency for little bandwidth. 0: always split (with "
     "auto too: no floor from the ring's hop latency).",
     &Config::ringMinUs},
    {"CONFLUX_AGGREGATOR_MBPS", ParamType::kInt, "0", 0, 100000000,
     "Line rate of each aggregator for the auto split's start and the tuner's model. 0: the "
     "rate each advertises (its Capacity), else unknown: taken to keep up with every worker; "
     "what the aggregators delivered in the connect's 1 MiB probe replaces it where that is "
     "under half of it. Set, it wins over the probe.",
     &Config::aggregatorMbps},
    {"CONFLUX_LINK_MBPS", ParamType::kInt, "0", 0, 100000000,
     "This worker's link rate, Mbit/s, for the auto split's start and the small-share "
     "threshold. 0: the speed the network interface reports (a virtual or shaped interface may "
     "report more than it carries; the split measures the link as the job runs either way).",
     &Config::linkMbps},
    {"CONFLUX_DETERMINISTIC", ParamType::kBool, "0", 0, 0,
     "1: aggregators reduce in rank order, so results are bitwise reproducible.",
     &Config::deterministic},
    {"CONFLUX_SECRET", ParamType::kString, "", 0, 0,
     "Shared secret that authenticates the job to the aggregators (their `secret`, or its "
     "tenant's secret: then the job gets the tenant's weight). With an "
     "aggregator that runs `data_mac`, also the root of the per-job key that signs and checks "
     "every data packet (protocol/SPEC.md §6).",
     &Config::secret},
    {"CONFLUX_WINDOW_SLOTS", ParamType::kInt, "64", 1, 65536,
     "Outstanding packets per aggregator requested at join (the aggregator may grant fewer).",
     &Config::windowSlots},
    {"CONFLUX_PAYLOAD_BYTES", ParamType::kSize, "8192", 64, 61440,
     "Payload bytes per aggregation packet requested at join.", &Config::payloadBytes},
    {"CONFLUX_CONGESTION_CONTROL", ParamType::kBool, "1", 0, 0,
     "1: a congestion window per aggregator (slow start, halved on loss) keeps incast from "
     "overflowing the aggregator's link; 0: always the granted window.",
     &Config::congestionControl},
    {"CONFLUX_UDP_OFFLOAD", ParamType::kBool, "1", 0, 0,
     "1: UDP segmentation offload on the aggregation socket where the kernel has it (GSO "
     "sends of many datagrams at once, GRO-coalesced receives); 0: one datagram per call.",
     &Config::udpOffload},
    {"CONFLUX_BUSY_POLL_US", ParamType::kInt, "50", 0, 1000000,
     "The aggregation progress thread spins this long after its last packet before it "
     "sleeps in poll(), yielding its core between polls to any other runnable thread; 0: "
     "sleep at once, larger: lower latency for one busy core.",
     &Config::busyPollUs},
    {"CONFLUX_BUSY_POLL_MAX_BYTES", ParamType::kSize, "64K", 0, 1LL << 40,
     "Busy-polling only while the aggregation requests in flight total at most this many "
     "bytes: a larger transfer is paced by the link, so the threads sleep until its next "
     "packet instead of spinning a core between packets.",
     &Config::busyPollMaxBytes},
    {"CONFLUX_BULK_WAKE_US", ParamType::kInt, "2000", 0, 100000,
     "While more than CONFLUX_BUSY_POLL_MAX_BYTES are in flight, the aggregation progress "
     "thread takes results at most once per this many microseconds (and at most four times per "
     "round trip), so that each wake-up takes a batch; a new request still wakes it at once. "
     "0: it wakes for every datagram.",
     &Config::bulkWakeUs},
    {"CONFLUX_CALLER_PROGRESS", ParamType::kBool, "1", 0, 0,
     "1: the callers do the aggregation I/O: NCCL's proxy thread sends a request's first "
     "packets in iallreduce and, for an AllReduce of at most 64 KiB wholly through the "
     "aggregators, receives the results and completes it inside test(); for other requests "
     "the CollNet completion thread receives the results while it polls for "
     "CONFLUX_BUSY_POLL_US. The progress thread takes over when they stop polling, and after "
     "its last request the completion thread polls that long for the next before it sleeps. "
     "0: only the progress thread does I/O (one more thread hand-off each way).",
     &Config::callerProgress},
    {"CONFLUX_MULTICAST", ParamType::kString, "auto", 0, 0,
     "Results from the aggregators by multicast (each result sent once to the job's group): "
     "auto: where the aggregator grants a group and every rank receives its probe at join, "
     "else unicast; on: without the probe; off: never (the job is unicast everywhere).",
     &Config::multicast},
    {"CONFLUX_AGGREGATOR_TIMEOUT_MS", ParamType::kInt, "5000", 100, 3600000,
     "An aggregator silent this long is dead: its collectives move to the ring. A request "
     "with no result for 4x this long does the same.",
     &Config::aggregatorTimeoutMs},
    {"CONFLUX_JOIN_TIMEOUT_MS", ParamType::kInt, "15000", 100, 3600000,
     "Bound on CollNet connect: building the ring and every rank joining the aggregators.",
     &Config::joinTimeoutMs},
    {"CONFLUX_RING_BLOCK_BYTES", ParamType::kSize, "1M", 4096, 1LL << 28,
     "Message size of the worker ring.", &Config::ringBlockBytes},
    {"CONFLUX_STAGING_CHUNK", ParamType::kSize, "1M", 4096, 1LL << 28,
     "CollNet hands its paths (aggregators, ring) NCCL's requests in pieces of at most this "
     "many bytes, one after the other; a piece in device memory is copied through a pinned host "
     "slot of this size each way, pipelined with the network. Rank 0's value is used by all.",
     &Config::stagingChunkBytes},
    {"CONFLUX_STAGING_SLOTS", ParamType::kInt, "8", 1, 256,
     "Pinned host slots (2 x CONFLUX_STAGING_CHUNK each) per CollNet communicator for device "
     "memory, allocated at its first CUDA registration: the pieces of device memory in flight.",
     &Config::stagingSlots},
    {"CONFLUX_RING_INFLIGHT", ParamType::kInt, "8", 1, 32, "Ring messages in flight per direction.",
     &Config::ringInflight},
    {"CONFLUX_RING_LANES", ParamType::kInt, "2", 1, 8,
     "Worker-ring connections per CollNet communicator: the ring shares of that many "
     "consecutive requests run at the same time.",
     &Config::ringLanes},
    {"CONFLUX_RING_TIMEOUT_MS", ParamType::kInt, "30000", 100, 3600000,
     "A ring collective that makes no progress this long fails with an error.",
     &Config::ringTimeoutMs},
#ifdef CONFLUX_TEST_HOOKS
    {"CONFLUX_FAULT_DROP", ParamType::kFraction, "0", 0, 0,
     "Test builds only: share of the aggregator datagrams this rank sends and receives that it "
     "drops (fault injection).",
     &Config::faultDrop},
    {"CONFLUX_FAULT_MULTICAST_DROP", ParamType::kFraction, "0", 0, 0,
     "Test builds only: share of the datagrams this rank receives on the aggregators' multicast "
     "groups that it drops (1: it hears nothing from them, probes included).",
     &Config::faultMulticastDrop},
    {"CONFLUX_FAULT_RX_BLACKOUT", ParamType::kInt, "0", 0, 2000000000,
     "Test builds only: after this many aggregator datagrams received, this rank drops every later "
     "one (0: off).",
     &Config::faultRxBlackout},
    {"CONFLUX_FAULT_ABORT_AT", ParamType::kInt, "0", 0, 2000000000,
     "Test builds only: this rank's aggregator engine fails at its N-th CollNet request (0: off).",
     &Config::faultAbortAt},
    {"CONFLUX_FAULT_PROBE_FAIL", ParamType::kInt, "0", 0, 2,
     "Test builds only: 1: this rank reports the CollNet connect probe as failed after running it "
     "(the other ranks' probes succeed); 2: the same, but it tells the others its probe "
     "succeeded, so it declines alone.",
     &Config::faultProbeFail},
    {"CONFLUX_FAULT_RANK", ParamType::kInt, "-1", -1, 65535,
     "Test builds only: the rank the CONFLUX_FAULT_* settings apply to (-1: every rank).",
     &Config::faultRank},
#endif
    {"CONFLUX_TUNER_COLLNET_MIN_BYTES", ParamType::kSize, "0", 0, 1LL << 40,
     "Tuner: smallest AllReduce sent to CollNet. Either bound set replaces the choice measured "
     "at connect with this range.",
     &Config::tunerCollnetMinBytes},
    {"CONFLUX_TUNER_COLLNET_MAX_BYTES", ParamType::kSize, "0", 0, 1LL << 40,
     "Tuner: largest AllReduce sent to CollNet (0: no limit).", &Config::tunerCollnetMaxBytes},
}};

const char* typeName(ParamType t) {
  switch (t) {
    case ParamType::kInt:
      return "int";
    case ParamType::kSize:
      return "size";
    case ParamType::kString:
      return "string";
    case ParamType::kBool:
      return "bool";
    case ParamType::kFraction:
      return "fraction";
  }
  return "?";
}

bool parseInt(const char* text, long long* out) {
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0') return false;
  *out = v;
  return true;
}

bool parseBool(const char* text, bool* out) {
  for (const char* t : {"1", "true", "yes", "on"}) {
    if (strcasecmp(text, t) == 0) return *out = true, true;
  }
  for (const char* f : {"0", "false", "no", "off"}) {
    if (strcasecmp(text, f) == 0) return *out = false, true;
  }
  return false;
}

// Parses `text` for `p` and stores it into *cfg; false with *why on error.
bool applyValue(const ParamSpec& p, const char* text, Config* cfg, std::string* why) {
  long long v = 0;
  bool b = false;
  switch (p.type) {
    case ParamType::kFraction: {
      if (strcasecmp(text, "auto") == 0 && strcasecmp(p.defaultValue, "auto") == 0) {
        cfg->*std::get<double Config::*>(p.field) = kAutoFraction;
        return true;
      }
      errno = 0;
      char* end = nullptr;
      const double d = std::strtod(text, &end);
      if (errno != 0 || end == text || *end != '\0' || !(d >= 0.0 && d <= 1.0)) {
        return *why = strcasecmp(p.defaultValue, "auto") == 0
                          ? "expected auto or a number between 0 and 1"
                          : "expected a number between 0 and 1",
               false;
      }
      cfg->*std::get<double Config::*>(p.field) = d;
      return true;
    }
    case ParamType::kString:
      cfg->*std::get<std::string Config::*>(p.field) = text;
      return true;
    case ParamType::kBool:
      if (!parseBool(text, &b)) return *why = "expected 0/1/true/false", false;
      cfg->*std::get<bool Config::*>(p.field) = b;
      return true;
    case ParamType::kInt:
    case ParamType::kSize:
      if (!(p.type == ParamType::kInt ? parseInt(text, &v) : parseSize(text, &v))) {
        *why =
            p.type == ParamType::kInt ? "expected an integer" : "expected a size like 65536 or 64K";
        return false;
      }
      if (v < p.min || v > p.max) {
        *why = "out of range [" + std::to_string(p.min) + ", " + std::to_string(p.max) + "]";
        return false;
      }
      if (p.type == ParamType::kInt) {
        cfg->*std::get<int Config::*>(p.field) = int(v);
      } else {
        cfg->*std::get<size_t Config::*>(p.field) = size_t(v);
      }
      return true;
  }
  return false;
}

}  // namespace

std::span<const ParamSpec> paramTable() { return kParams; }

bool parseSize(const char* text, long long* out) {
  errno = 0;
  char* end = nullptr;
  if (text[0] == '-') return false;
  long long v = std::strtoll(text, &end, 10);
  if (errno != 0 || end == text) return false;
  int shift = 0;
  switch (std::toupper(static_cast<unsigned char>(*end))) {
    case '\0':
      break;
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    default:
      return false;
  }
  if (shift != 0 && *++end != '\0') return false;
  if (v > (std::numeric_limits<long long>::max() >> shift)) return false;
  *out = v << shift;
  return true;
}

Status loadConfig(Config* out, std::string* error, const EnvLookup& env) {
  Config cfg;
  for (const ParamSpec& p : kParams) {
    std::string why;
    if (!applyValue(p, p.defaultValue, &cfg, &why)) {
      *error = std::string("bad built-in default of ") + p.name + ": " + why;
      return Status::kInternalError;
    }
    const char* v = env ? env(p.name) : std::getenv(p.name);
    if (v == nullptr) continue;
    if (!applyValue(p, v, &cfg, &why)) {
      *error = std::string("invalid value '") + v + "' for " + p.name + ": " + why;
      return Status::kInvalidArgument;
    }
  }
  if (strcasecmp(cfg.multicast.c_str(), "auto") != 0 &&
      strcasecmp(cfg.multicast.c_str(), "on") != 0 &&
      strcasecmp(cfg.multicast.c_str(), "off") != 0) {
    *error =
        "invalid value '" + cfg.multicast + "' for CONFLUX_MULTICAST: expected auto, on or off";
    return Status::kInvalidArgument;
  }
  if (cfg.nthreads * cfg.nsocksPerThread > net::wire::kMaxDataSockets) {
    *error = "CONFLUX_NTHREADS x CONFLUX_NSOCKS_PERTHREAD must be at most 64";
    return Status::kInvalidArgument;
  }
  *out = std::move(cfg);
  return Status::kOk;
}

std::string formatParamRow(const ParamSpec& p) {
  std::string def = p.defaultValue[0] == '\0' ? "(empty)" : std::string("`") + p.defaultValue + "`";
  return std::string("| `") + p.name + "` | " + typeName(p.type) + " | " + def + " | " + p.doc +
         " |";
}

net::TransportConfig Config::transportConfig() const {
  net::TransportConfig t;
  t.ifname = socketIfname;
  t.nthreads = nthreads;
  t.nsocksPerThread = nsocksPerThread;
  t.minChunkBytes = minChunkBytes;
  t.inlineBytes = inlineBytes;
  t.socketBufBytes = int(socketBufBytes);
  t.callerProgress = netCallerProgress;
  t.stallWarnMs = netStallWarnS * 1000;
  t.progressThreads = netProgressThreads;
  return t;
}

}  // namespace conflux::plugin
