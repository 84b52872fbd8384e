// SPDX-License-Identifier: Apache-2.0
// One rank: load the plugin, bootstrap, net setup, each requested mode, teardown, verdict.
#include "driver/rank.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "driver/bench.h"
#include "driver/bootstrap.h"
#include "driver/buffers.h"
#include "driver/collnet.h"
#include "driver/data.h"
#include "driver/idle.h"
#include "driver/nccl_steps.h"
#include "driver/net_compat.h"
#include "driver/net_ring.h"
#include "driver/plugin.h"
#include "driver/pxn.h"
#include "driver/rank_setup.h"
#include "driver/report.h"
#include "driver/service_collnet.h"
#include "driver/tuner_check.h"
#include "nccl/topo_gdr.h"

namespace conflux::driver {
namespace {

int g_rank = -1;

void on_alarm(int) {
  char msg[128];
  int n = std::snprintf(msg, sizeof msg,
                        "[rank %d] error: --timeout exceeded inside a blocking call; exiting\n",
                        g_rank);
  ssize_t w = ::write(STDERR_FILENO, msg, static_cast<size_t>(n > 0 ? n : 0));
  (void)w;
  _exit(4);
}

struct RankRun {
  RankRun(const Options& opts, int r, int n) : o(opts), rank(r), nranks(n), dl(opts.timeout_s) {}

  const Options& o;
  int rank;
  int nranks;
  Deadline dl;
  LoadedPlugin plugin;
  Bootstrap bs;
  HostBuffers bufs;
  std::unique_ptr<DeviceBuffers> devbufs;  // --device-buffers
  void* net_ctx = nullptr;
  NetDevice dev;
  uint64_t comm_id = 0;
  RunInfo info;
  bool described = false;
  std::vector<Row> rows;
  std::vector<std::string> notes;
  bool collnet_missing = false;
  bool gdr_noted = false;

  void note(const std::string& s) {
    if (rank == 0) print_note(s);
    notes.push_back(s);
  }

  // One NCCL communicator per mode: net.init, then the ring connections (NCCL connects them
  // whatever algorithm runs), torn down after the mode's table. The plugin reads CONFLUX_* at
  // the first init of the process and again after the last finalize, so every mode sees the
  // variables set for it.
  Status open_comm(uint64_t id, NetRing* ring) {
    CFX_TRY(net_init(plugin.net, rank, id, &bs, &net_ctx, &dev));
    if (!described) {
      described = true;
      info = describe_run(o, plugin, dev, nranks);
      if (rank == 0) {
        std::printf("# net device 0: %s, %d Mbps, ptrSupport 0x%x, %d device(s)\n",
                    dev.name.c_str(), dev.speed_mbps, dev.ptr_support, dev.ndev);
        std::fflush(stdout);
      }
    }
    CFX_TRY(ring->setup(plugin.net, net_ctx, &bs, &bufs, o.chunk_bytes, o.inflight, &dl,
                        std::max(o.service_conns, o.hold_conns), o.hold_conns > 0));
    if (o.hold_conns > 0) CFX_TRY(report_resources(ring));
    if (rank == o.inject_exit_rank) {
      std::fprintf(stderr, "[rank %d] --inject-rank-exit: exiting abruptly now\n", rank);
      _exit(9);
    }
    return Status();
  }

  // --hold-conns: once every rank's extra connections are up, the threads and open file
  // descriptors of each rank process (the plugin's helper threads and sockets), gathered.
  Status report_resources(NetRing* ring) {
    CFX_TRY(ring->service_connected());
    CFX_TRY(bs.barrier());  // every rank's connections are up
    std::string res;
    CFX_TRY(gather_threads_and_fds(&bs, &res));
    const int conns = 2 * o.hold_conns + 2;  // send + receive comms: the ring's and the held
    note("resources per rank with " + std::to_string(conns) + " open p2p comms (" +
         std::to_string(o.hold_conns + 1) + " send + " + std::to_string(o.hold_conns + 1) +
         " receive): " + res);
    return Status();
  }

  // NCCL's gdr bit of the NIC behind net device 0 and CollNet device 0 (device_buffers.h):
  // noted once; a net that can do GPUDirect must keep it after CollNet's description.
  Status check_gdr(const CollNetSession& cs) {
    if (cs.ptr_support() < 0) return Status();  // CollNet described no device
    const auto nics = nccl::topo_gdr({{cs.device_name(), cs.ptr_support()}},
                                     {{dev.name, dev.ptr_support}}, /*dmabuf_usable=*/true);
    for (const nccl::NicGdr& n : nics) {
      const bool net_nic = n.name == dev.name;
      if (!gdr_noted) {
        char line[256];
        std::snprintf(line, sizeof line,
                      "gdr: NIC '%s': %d (first described by %s; CollNet ptrSupport 0x%x, net "
                      "0x%x)",
                      n.name.c_str(), n.gdr ? 1 : 0, n.first.c_str(), cs.ptr_support(),
                      dev.ptr_support);
        note(line);
      }
      if (net_nic && !n.gdr && nccl::gdr_capable(dev.ptr_support, true)) {
        char why[256];
        std::snprintf(why, sizeof why,
                      "GPUDirect lost: net device 0 '%s' has ptrSupport 0x%x, but CollNet's "
                      "description (0x%x) comes first and gives the NIC gdr 0: NCCL would turn "
                      "GPUDirect RDMA off for every p2p transfer",
                      dev.name.c_str(), dev.ptr_support, cs.ptr_support());
        return internal_error(why);
      }
    }
    gdr_noted = true;
    return Status();
  }

  Status close_comm(NetRing* ring) {
    CFX_TRY(ring->teardown());
    DRV_CALL(rank, "net.finalize", plugin.net->finalize(net_ctx));
    net_ctx = nullptr;
    return Status();
  }

  Status run_collnet_mode(Mode mode, uint64_t id) {
    if (plugin.collnet == nullptr) {
      collnet_missing = true;
      note(std::string(mode_name(mode)) + ": CollNet unavailable: " +
           (o.net_abi != 11
                ? "the plugin exports no ncclCollNetPlugin_v" + std::to_string(o.net_abi)
            : plugin.collnet_symbol.empty()
                ? std::string("the plugin exports no ncclCollNetPlugin_v* symbol")
                : "the plugin exports " + plugin.collnet_symbol + " only (driver calls v11)") +
           "; table skipped");
      return Status();
    }
    CFX_TRY(check_collnet_members(plugin.collnet));
    char frac[32];
    const double f = mode == Mode::kHybrid          ? o.ring_fraction
                     : mode == Mode::kReduceScatter ? o.rs_ring_fraction
                                                    : 0.0;
    if (f == kAutoRingFraction)
      std::snprintf(frac, sizeof frac, "auto");
    else
      std::snprintf(frac, sizeof frac, "%g", f);
    setenv("CONFLUX_RING_FRACTION", frac, 1);  // read by the plugin at init
    NetRing ring;
    CFX_TRY(open_comm(id, &ring));
    CollNetSession cs;
    cs.use_device(devbufs.get());
    CFX_TRY(cs.open(plugin.collnet, id, &bs, &bufs, &dl));
    CFX_TRY(check_gdr(cs));
    if (!cs.available()) {
      collnet_missing = true;
      note(cs.reason());
      note(std::string(mode_name(mode)) + ": CollNet not used (NCCL would fall back to its " +
           "ring); table skipped");
      return close_comm(&ring);
    }
    if (o.nccl_region_bytes > 0 && !is_direct(mode)) {
      CFX_TRY(cs.use_regions(o.nccl_region_bytes, o.inflight, o.nccl_channels));
    }
    if (plugin.tuner != nullptr) {
      std::string choices;
      CFX_TRY(check_tuner(plugin.tuner, id, nranks, &bs, &choices));
      note("tuner (every rank alike): AllReduce by " + choices);
    }
    if (cs.device_name() != dev.name) {
      note("warning: CollNet device 0 is named '" + cs.device_name() + "' but net device 0 '" +
           dev.name + "' (NCCL expects the same name)");
    }
    const std::string how =
        std::string(", CONFLUX_RING_FRACTION=") + frac +
        (o.nccl_region_bytes > 0 && !is_direct(mode)
             ? ", NCCL regions of " + std::to_string(o.nccl_region_bytes) + " B (stale tails)"
             : ", chunk " + std::to_string(o.chunk_bytes) + " B") +
        ", inflight " + std::to_string(o.inflight) +
        (o.mixed_chunks ? " (mixed with 4 KiB ones)" : "");
    ModeRun m{mode, o.deterministic ? InputKind::kRandom : InputKind::kExact,
              [&cs, this](void* s, void* r, size_t n, DType t, Op op) {
                return cs.allreduce(s, r, n, t, op, o.chunk_bytes, o.inflight,
                                    o.mixed_chunks ? kMixedSmallChunk : 0);
              },
              [&cs](DType t, Op op) { return cs.supported(t, op); }};
    std::string what = "CollNetChain iallreduce" + how +
                       (o.inplace ? ", in-place" : ", out-of-place") +
                       (o.deterministic ? ", deterministic: bitwise check" : "");
    if (mode == Mode::kReduceScatter) {
      // Deterministic with no ring share: the aggregators reduce every shard in rank order,
      // so it is checked bitwise on random inputs; a ring share is exact inputs only.
      const bool bitwise = o.deterministic && o.rs_ring_fraction == 0.0;
      m.inputs = bitwise ? InputKind::kRandom : InputKind::kExact;
      m.run = [&cs, this](void* s, void* r, size_t n, DType t, Op op) {
        return cs.reducescatter(s, r, n, t, op, o.chunk_bytes, o.inflight);
      };
      what = "CollNetDirect ireducescatter, size = nranks blocks" + how +
             (bitwise ? ", deterministic: bitwise check" : "");
    } else if (mode == Mode::kAllGather) {
      m.inputs = InputKind::kExact;
      m.run = [&cs, this](void* s, void* r, size_t n, DType t, Op) {
        return cs.allgather(s, r, n, t, o.chunk_bytes, o.inflight);
      };
      m.supported = [](DType, Op) { return true; };  // bytes are moved, not reduced
      what = "CollNetDirect iallgather, size = nranks blocks" + how;
    }
    // --service-collnet: the service thread connects, uses and closes more CollNet comms while
    // this one streams. Left running (leaked) if the mode fails: the rank exits at once, and
    // joining could wait for a collective connect that the other ranks never finish.
    auto* svc = new ServiceCollNet;
    Status st = [&]() -> Status {
      CFX_TRY(svc->start(plugin.collnet, &cs, id, &bs, o.service_collnet, o.seed, &dl));
      if (rank == 0) print_table_header(mode, what);
      CFX_TRY(run_mode(o, m, &bs, &bufs, &rows, &notes, devbufs.get()));
      if (devbufs != nullptr && !devbufs->copy_counts().empty()) {
        note(std::string(mode_name(mode)) + ": " + devbufs->copy_counts());
      }
      if (!svc->running()) return Status();
      int rounds = 0;
      CFX_TRY(stream_while_service(&cs, *svc, &rounds));
      CFX_TRY(svc->join());
      note(std::string(mode_name(mode)) + ": service thread: " + std::to_string(svc->comms()) +
           " more CollNet comms listened, connected, registered, used (" +
           std::to_string(svc->allreduces()) +
           " verified AllReduces in all), deregistered and closed while this comm streamed (" +
           std::to_string(svc->posted_during_connects()) +
           " requests posted on it while they connected, on rank 0; " + std::to_string(rounds) +
           " verified AllReduces after its table waited for them)");
      return Status();
    }();
    if (!st.ok()) {
      if (!svc->running() || svc->done()) delete svc;
      return st;
    }
    delete svc;
    if (o.close_stagger_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(int64_t{rank} * o.close_stagger_ms));
    }
    CFX_TRY(cs.close());
    return close_comm(&ring);
  }

  // --service-collnet: verified 1 MiB AllReduces (or the buffer's size) on the mode's comm
  // until every rank's service thread is done; whether to run one more is agreed over the
  // bootstrap each time, so every rank runs as many.
  Status stream_while_service(CollNetSession* cs, const ServiceCollNet& svc, int* rounds) {
    const size_t n = std::clamp<size_t>(bufs.bytes / sizeof(float), 1, size_t{256} << 10);
    for (;;) {
      std::vector<std::string> all;
      CFX_TRY(bs.allgather(svc.done() ? "1" : "0", &all));
      if (std::all_of(all.begin(), all.end(), [](const std::string& a) { return a == "1"; })) {
        return Status();
      }
      if (dl.passed()) return timed_out("--timeout reached waiting for the service thread");
      const InputSpec spec{DType::kFloat32, Op::kSum, nranks,
                           o.seed + 104729 * static_cast<uint64_t>(*rounds + 1), InputKind::kExact};
      fill_input(spec, rank, 0, n, bufs.send);
      poison(DType::kFloat32, bufs.recv, n);
      CFX_TRY(cs->allreduce(bufs.send, bufs.recv, n, DType::kFloat32, Op::kSum, o.chunk_bytes,
                            o.inflight));
      const uint64_t wrong = count_wrong(spec, bufs.recv, n);
      if (wrong != 0) {
        return internal_error(std::to_string(wrong) + " wrong elements in an AllReduce of " +
                              std::to_string(n) + " floats beside the service thread");
      }
      ++*rounds;
    }
  }

  Status run_ring_mode(uint64_t id) {
    if (o.nccl_steps) {  // NCCL's proxy step by step (nccl_steps.h): its own connections
      CFX_TRY(net_init(plugin.net, rank, id, &bs, &net_ctx, &dev));
      if (rank == 0) {
        print_table_header(Mode::kRing,
                           "NCCL proxy steps over " + std::to_string(o.nccl_channels) +
                               " channel(s), " + std::to_string(o.iters) +
                               " AllReduces per size, every step checked, nothing reduced");
      }
      CFX_TRY(run_nccl_steps(o, plugin.net, net_ctx, &bs, &dl));
      DRV_CALL(rank, "net.finalize", plugin.net->finalize(net_ctx));
      net_ctx = nullptr;
      Row row{};
      row.mode = Mode::kRing;
      rows.push_back(row);  // a table was run (run_rank requires one)
      return Status();
    }
    NetRing ring;
    CFX_TRY(open_comm(id, &ring));
    if (rank == 0) {
      print_table_header(Mode::kRing, "p2p net ring reduce-scatter + all-gather, chunk " +
                                          std::to_string(o.chunk_bytes) + " B, inflight " +
                                          std::to_string(o.inflight) + " per peer" +
                                          (o.inplace ? ", in-place" : ", out-of-place"));
    }
    ModeRun m{Mode::kRing, InputKind::kExact,
              [&ring](void* s, void* r, size_t n, DType t, Op op) {
                return ring.allreduce(s, r, n, t, op);
              },
              [](DType, Op) { return true; }};
    CFX_TRY(run_mode(o, m, &bs, &bufs, &rows, &notes));
    return close_comm(&ring);
  }

  Status run_pxn_mode(uint64_t id) {
    NetRing ring;
    CFX_TRY(open_comm(id, &ring));
    // NCCL's proxy shares connections, and groups receives, by the maxRecvs it reads (pxn.h).
    CFX_TRY(agree_max_recvs(&bs, dev.max_recvs));
    const PxnShape shape{o.pxn_senders, o.pxn_lag, o.pxn_steps, o.inflight};
    const PxnLayout layout = pxn_layout(shape.senders, dev.max_recvs);
    if (rank == 0) {
      print_table_header(Mode::kPxn, describe_pxn_layout(layout, dev.max_recvs) +
                                         " (tag = sender), " + std::to_string(shape.steps) +
                                         " messages per sender, sender j starts " +
                                         std::to_string(shape.lag) + " behind j-1, inflight " +
                                         std::to_string(shape.inflight) +
                                         "; size = bytes per message, type uint8, #wrong = bytes");
    }
    CFX_TRY(run_pxn(o, shape, layout, net_ctx, &ring, &bs, &rows,
                    [this](const std::string& s) { note(s); }));
    return close_comm(&ring);
  }

  Status run(const Endpoint& root, int listen_fd) {
    if (o.deterministic) setenv("CONFLUX_DETERMINISTIC", "1", 1);
    // A rank's own aggregator list (its leaf in a reduction tree), as each node of a real
    // cluster sets CONFLUX_AGGREGATORS for itself.
    const std::string own = "CONFLUX_DRIVER_AGGREGATORS_" + std::to_string(rank);
    if (const char* a = std::getenv(own.c_str())) setenv("CONFLUX_AGGREGATORS", a, 1);
    CFX_TRY(load_plugin(o.plugin, &plugin));
    CFX_TRY(adapt_net(o.net_abi, &plugin));
    CFX_TRY(bs.init(rank, nranks, root, listen_fd, &dl));
    CFX_TRY(check_net_members(plugin.net));
    CFX_TRY(agree_comm_id(&bs, &comm_id));
    if (rank == 0) {
      std::printf("# conflux-nccl-driver: %d ranks, plugin %s\n", nranks, plugin.path.c_str());
      std::string nets, colls;
      for (const std::string& v : plugin.net_versions) nets += " " + v;
      for (const std::string& v : plugin.collnet_versions) colls += " " + v;
      std::printf("# net: '%s' via %s (exported:%s); collnet:%s\n", plugin.net->name,
                  plugin.net_symbol.c_str(), nets.c_str(), colls.empty() ? " none" : colls.c_str());
      std::fflush(stdout);
    }
    if (rank == 0 && !o.timeline_path.empty()) CFX_TRY(start_timeline(o.timeline_path));
    size_t max_bytes = (o.maxbytes + 7) & ~size_t{7};
    CFX_TRY(bufs.alloc(max_bytes, o.chunk_bytes * static_cast<size_t>(o.inflight)));
    if (o.device_buffers) {
      devbufs = std::make_unique<DeviceBuffers>();
      CFX_TRY(devbufs->open(bufs));
    }
    for (size_t i = 0; i < o.modes.size(); ++i) {
      const uint64_t id = comm_id + i;  // a new communicator (commHash) per mode
      if (o.modes[i] == Mode::kRing)
        CFX_TRY(run_ring_mode(id));
      else if (o.modes[i] == Mode::kPxn)
        CFX_TRY(run_pxn_mode(id));
      else
        CFX_TRY(run_collnet_mode(o.modes[i], id));
    }
    CFX_TRY(bs.finish());
    unload_plugin(&plugin);
    if (!described) info = describe_run(o, plugin, dev, nranks);
    if (rank == 0 && !o.json_path.empty()) CFX_TRY(write_json(o.json_path, info, rows, notes));
    return Status();
  }
};

}  // namespace

int run_rank(const Options& o, int rank, int nranks, const Endpoint& root, int listen_fd) {
  g_rank = rank;
  set_log_rank(rank);
  idle_sleep_us().store(o.idle_sleep_us);
  signal(SIGALRM, on_alarm);
  alarm(static_cast<unsigned>(std::ceil(o.timeout_s)) + 30);  // backstop for blocking calls
  auto* run = new RankRun(o, rank, nranks);
  Status st = run->run(root, listen_fd);
  if (!st.ok()) {
    std::fflush(stdout);
    std::fprintf(stderr, "[rank %d] error: %s\n", rank, st.message().c_str());
    std::fflush(stderr);
    _exit(1);  // plugin threads may still run: skip static destructors
  }
  uint64_t wrong = 0;
  for (const Row& r : run->rows) wrong += r.wrong;
  int rc = 0;
  if (rank == 0) {
    if (wrong != 0) {
      std::printf("# error: %llu wrong elements\n", static_cast<unsigned long long>(wrong));
      rc = 1;
    } else if (o.require_collnet && run->collnet_missing) {
      std::printf("# error: --require-collnet, but CollNet was not used\n");
      rc = 1;
    } else if (run->rows.empty()) {
      std::printf("# error: no AllReduce was run (every requested mode was skipped)\n");
      rc = 1;
    } else {
      std::printf("verified: all results correct\n");
    }
  } else {
    rc = (wrong != 0 || run->rows.empty() || (o.require_collnet && run->collnet_missing)) ? 1 : 0;
  }
  std::fflush(stdout);
  alarm(0);
  delete run;
  return rc;
}

}  // namespace conflux::driver
