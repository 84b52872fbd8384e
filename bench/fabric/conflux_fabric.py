#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""conflux-fabric: an emulated cluster on one machine; Conflux AllReduce (conflux-nccl-driver +
plugin through confluxd, CollNet and hybrid modes), Gloo's ring AllReduce and the plugin's own
ring, measured side by side on the same shaped links. Needs root, iproute2, tc, nft, iperf3.
See README.md. Exit: 0 all runs verified, 1 a run failed, 2 bad usage, 77 skipped (not root /
no `ip netns`)."""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_report  # noqa: E402
import fabric_run  # noqa: E402

SKIP = 77
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def parse_size(s):
    mul = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(float(s[:-1] if mul > 1 else s) * mul)


def ring_fraction_arg(text):
    """A fraction in [0, 1], or "auto" (kept as the string)."""
    if text == "auto":
        return text
    f = float(text)
    if not 0.0 <= f <= 1.0:
        raise argparse.ArgumentTypeError(f"{text}: expected a number in [0, 1] or auto")
    return f


def hybrid_fraction(a, n):
    """The hybrid runs' CONFLUX_RING_FRACTION: --ring-fraction, else the fixed optimum."""
    return a.ring_fraction if a.ring_fraction is not None else optimal_ring_fraction(n, 1, 1.0)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="conflux_fabric.py", description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(REPO, "build-lead"),
                   help="build dir holding confluxd, the plugin, the driver, conflux-fabric-gloo")
    for b in ("confluxd", "plugin", "driver", "gloo", "mpi"):
        p.add_argument(f"--{b}", help=f"path of {b} (overrides --build)")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--rate", type=int, default=500, help="worker line rate, Mbit/s")
    p.add_argument("--fat-factor", type=float, help="fat aggregator's rate / worker rate "
                   "(default: number of workers)")
    p.add_argument("--topologies", default="fat,striped,hybrid",
                   help="fat: 1 aggregator at fat-factor x rate; striped: N aggregators at "
                   "1x; hybrid: 1 aggregator at 1x, CollNet alone and hybrid split; tree: "
                   "--tree-leaves leaves (each serving N/leaves workers) under one root, or "
                   "under --tree-mids middle aggregators under the root")
    p.add_argument("--tree-leaves", type=int, default=2, help="tree: leaf aggregators")
    p.add_argument("--tree-leaf-factor", type=float,
                   help="tree: a leaf's rate / worker rate (default: its workers, N/leaves)")
    p.add_argument("--tree-root-factor", type=float,
                   help="tree: the root's rate / worker rate (default: its children, the "
                   "leaves or the middle aggregators)")
    p.add_argument("--tree-mids", type=int, default=0,
                   help="tree: middle aggregators between the leaves and the root (depth 3; "
                   "leaf j sits under middle j*M/L; 0: depth 2)")
    p.add_argument("--tree-mid-factor", type=float,
                   help="tree: a middle aggregator's rate / worker rate (default: its leaves)")
    p.add_argument("--tree-results", choices=("leaf", "direct"),
                   help="tree: the leaves' tree_results (protocol/SPEC.md section 7). Either gives "
                   "each leaf a multicast range of its own (its workers' group) and the root one "
                   "(to send), and turns on IGMP snooping with a querier on the bridge, so that "
                   "a group reaches only its members (default: neither, as before)")
    p.add_argument("--systems", default="conflux,gloo,mpi,ring")
    p.add_argument("--ring-fraction", type=ring_fraction_arg,
                   help="hybrid CONFLUX_RING_FRACTION: a number, or auto (the plugin's measured "
                   "split, also run on the fat aggregator; default: the link-balancing "
                   "optimum, fixed)")
    p.add_argument("--device-buffers", nargs="?", const="", metavar="LIBDIR",
                   help="also run the fat aggregator's CollNet from device memory (the driver's "
                   "--device-buffers), right after the same run from host memory; LIBDIR: the "
                   "folder of the libcuda.so.1 to load, e.g. BUILD/tests/gpu_memory/lib for the "
                   "test double on a machine without a GPU (default: the system's driver)")
    p.add_argument("--loss", type=float, default=0.0,
                   help="percent random loss: adds a lossy copy of the fat fabric")
    p.add_argument("--loss-systems", default="conflux")
    p.add_argument("--deaf-workers", default="",
                   help="comma-separated worker indices whose hosts drop every IPv4 multicast "
                   "datagram at input (nftables): a rank that cannot hear its job's group")
    p.add_argument("--loss-topologies", default="fat",
                   help="conflux topologies run on the lossy fabric (e.g. fat,tree)")
    p.add_argument("--minbytes", default="4")
    p.add_argument("--maxbytes", default="256M")
    p.add_argument("--iters", type=int, help="timed iterations for every size (default: by size)")
    p.add_argument("--warmup", type=int, help="warm-up iterations for every size")
    p.add_argument("--agg-threads", type=int, default=1)
    p.add_argument("--idle-sleep-us", type=int, default=50)
    p.add_argument("--percentiles", action="store_true",
                   help="Conflux systems: also print each size's per-iteration p50/p90/p99/max "
                   "(rank 0's --timeline), the tail that the mean time hides")
    p.add_argument("--check-seconds", type=float, default=2.0)
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra environment of every driver rank (e.g. CONFLUX_WINDOW_SLOTS=16)")
    p.add_argument("--driver-arg", action="append", default=[], metavar="ARG",
                   help="extra conflux-nccl-driver argument of the Conflux (CollNet) runs, e.g. "
                        "--driver-arg=--nccl-regions=32K (requests shaped as NCCL issues them)")
    p.add_argument("--agg-arg", action="append", default=[], metavar="ARG",
                   help="extra confluxd argument, e.g. --agg-arg=--worker-timeout-ms=60000")
    p.add_argument("--diag", action="store_true", help="print tbf/UDP/backlog drop counters "
                   "of every host before teardown")
    p.add_argument("--prefix", help="namespace prefix cfx<pid> (default: cfx<own pid>)")
    p.add_argument("--out", default="fabric-results", help="output dir for csv/json/png")
    p.add_argument("--cleanup", action="store_true", help="delete stale cfx* namespaces, exit")
    p.add_argument("--force", action="store_true", help="with --cleanup: delete live ones too")
    a = p.parse_args(argv)
    if not 1 <= a.tree_leaves <= a.workers or not 0 <= a.tree_mids <= a.tree_leaves:
        p.error("--tree-leaves must be 1..workers and --tree-mids 0..tree-leaves")
    # The tree's default rates: each aggregator at as many times the worker rate as it has
    # children (a leaf: its workers).
    a.tree_leaf_factor = a.tree_leaf_factor or a.workers / a.tree_leaves
    a.tree_mid_factor = a.tree_mid_factor or (a.tree_leaves / a.tree_mids if a.tree_mids else 0)
    a.tree_root_factor = a.tree_root_factor or a.tree_mids or a.tree_leaves
    return a


def bands(a):
    """Size bands, each one driver/gloo invocation with its own iteration counts."""
    lo, hi = parse_size(a.minbytes), parse_size(a.maxbytes)
    sizes, s = [], lo
    while s <= hi:
        sizes.append(s)
        s *= 4
    out = []
    for cap, iters, warm in ((1 << 20, 20, 3), (16 << 20, 5, 1), (1 << 40, 3, 1)):
        sel = [x for x in sizes if x <= cap and (not out or x > out[-1]["max"])]
        if sel:
            out.append({"min": sel[0], "max": sel[-1], "iters": a.iters or iters,
                        "warmup": a.warmup if a.warmup is not None else warm})
    return out


def est_timeout(band, mbit):
    total, s = 0.0, band["min"]
    while s <= band["max"]:
        total += (band["iters"] + band["warmup"] + 1) * s / (mbit * 1e6 / 8 * 0.1)
        s *= 4
    return 90 + total


def optimal_ring_fraction(n, aggs, factor):
    """Share f of the ring so that worker links and aggregator links finish together:
    worker link carries (2(N-1)/N) f + (1-f), the aggregators N(1-f)/(aggs*factor)."""
    ring, agg = 2 * (n - 1) / n, n / (aggs * factor)
    return max(0.0, min(1.0, (agg - 1) / (ring - 1 + agg)))


def run_system(runner, rows, fabric_name, label, kind, bnds, a, aggs=(), fraction=0.0,
               failures=None, per_rank=None, extra_args=(), extra_env=None):
    """Runs one system over all size bands. A band that fails is retried once; a second
    failure is recorded in `failures` (and printed) and the remaining bands still run."""
    print(f"# running {label} ...", flush=True)
    t0 = time.monotonic()
    mine = []
    busy_s, gbytes = 0.0, 0.0
    for b in bnds:
        tmo = est_timeout(b, a.rate)
        for attempt in (1, 2):
            try:
                busy0 = fabric_run.cpu_busy_seconds()
                if kind == "gloo":
                    text = runner.run_gloo(b, tmo)
                elif kind == "mpi":
                    text = runner.run_mpi(b, tmo)
                else:
                    text = runner.run_driver(kind, b, list(aggs), fraction, tmo, per_rank,
                                             extra_args, extra_env)
                busy_s += fabric_run.cpu_busy_seconds() - busy0
                break
            except fabric_run.RunError as e:
                first = str(e).splitlines()[0]
                print(f"# FAILED {label} [{fabric_name}] sizes {b['min']}..{b['max']} "
                      f"attempt {attempt}: {first}", flush=True)
                failures.append({"fabric": fabric_name, "system": label, "min": b["min"],
                                 "max": b["max"], "attempt": attempt, "error": str(e)[:4000]})
                text = ""
        band = fabric_run.parse_rows(text, a.workers)  # none when both attempts failed
        gbytes += sum(r["bytes"] for r in band) * (b["iters"] + b["warmup"]) / 1e9
        tails = {}
        if text and kind not in ("gloo", "mpi") and runner.last_timeline:
            tails = fabric_report.timeline_percentiles(runner.last_timeline)
        for r in band:
            r.update({"fabric": fabric_name, "system": label})
            r.update(tails.get(r["bytes"], {}))
            mine.append(r)
    if gbytes > 0:
        for r in mine:
            r["cpu_s_per_gb"] = busy_s / gbytes
    rows.extend(mine)
    print(fabric_report.table(mine, f"{label} [{fabric_name}]"))
    if gbytes > 0:
        print(f"# {label}: {busy_s / gbytes:.2f} CPU-s per GB AllReduced ({busy_s:.1f} busy "
              f"CPU-s over {gbytes:.2f} GB, whole machine, /proc/stat, set-up and checks "
              f"included)", flush=True)
    for r in mine:
        if "p50_us" in r:
            print(f"# {label}: {r['bytes']} B per iteration (rank 0, {r['n']} timed): "
                  f"p50 {r['p50_us']:.1f} p90 {r['p90_us']:.1f} p99 {r['p99_us']:.1f} "
                  f"max {r['max_us']:.1f} us", flush=True)
    timed = [r for r in mine if r.get("host_cpu_s_per_gb") is not None]
    if timed:
        # Byte-weighted over the sizes, as if every size ran the same number of iterations.
        w = sum(r["bytes"] for r in timed)
        mean = sum(r["host_cpu_s_per_gb"] * r["bytes"] for r in timed) / w
        per_size = ", ".join(f"{r['host_cpu_s_per_gb']:.2f}" for r in timed)
        print(f"# {label}: {mean:.2f} CPU-s per GB over the timed iterations only "
              f"(per size: {per_size})", flush=True)
    print(f"# {label}: {len(mine)} rows verified ({time.monotonic() - t0:.0f} s)\n", flush=True)


def run_fabric(a, bins, name, loss, topos, systems, rows, labels, workdir, prefix,
               failures, agg_reports):
    n, factor = a.workers, a.fat_factor or a.workers
    aggs = []
    if "fat" in topos:
        aggs.append(("a0", int(a.rate * factor)))
    thin = n if "striped" in topos else (1 if "hybrid" in topos else 0)
    aggs += [(f"a{j + 1}", a.rate) for j in range(thin)]
    leaves, mids = a.tree_leaves, a.tree_mids
    if "tree" in topos:  # t0 the root, m1..mM the middle aggregators, t1..tL the leaves
        aggs.append(("t0", int(a.rate * a.tree_root_factor)))
        aggs += [(f"m{j + 1}", int(a.rate * a.tree_mid_factor)) for j in range(mids)]
        aggs += [(f"t{j + 1}", int(a.rate * a.tree_leaf_factor)) for j in range(leaves)]
    deaf = [int(i) for i in a.deaf_workers.split(",") if i]
    fab = fabric_ns.Fabric(prefix, n, a.rate, aggs, loss_pct=loss, deaf_workers=deaf,
                           igmp_snooping=bool(a.tree_results) and "tree" in topos)
    workdir = os.path.join(workdir, name)
    os.makedirs(workdir, exist_ok=True)
    runner = fabric_run.Runner(fab, bins, workdir, a.idle_sleep_us,
                               dict(kv.split("=", 1) for kv in a.env), a.agg_arg,
                               timelines=a.percentiles, driver_args=a.driver_arg)
    try:
        fab.build()
        print(fab.describe(), flush=True)
        pairs = [(fab.workers[0], fab.workers[1])] + ([(fab.workers[0], fab.aggs["a0"])]
                                                      if "a0" in fab.aggs else [])
        for src, dst in pairs:
            got = runner.tcp_check(src, dst, a.check_seconds)
            want = min(src.mbit, dst.mbit)
            verdict = "ok" if got >= 0.9 * want else "BELOW 90%"
            print(f"# tcp check {src.role}->{dst.role}: 1 stream {got:.0f} Mbit/s = "
                  f"{got / want * 100:.1f}% of {want} Mbit/s ({verdict})", flush=True)
        bnds = bands(a)
        if "gloo" in systems:
            if bins.get("gloo"):
                run_system(runner, rows, name, labels["gloo"], "gloo", bnds, a, failures=failures)
            else:
                print("# gloo: skipped (conflux-fabric-gloo not built: Gloo not found)")
        if "mpi" in systems:
            if bins.get("mpi") and shutil.which("mpirun"):
                run_system(runner, rows, name, labels["mpi"], "mpi", bnds, a, failures=failures)
            else:
                print("# mpi: skipped (conflux-fabric-mpi not built or no mpirun: Open MPI not "
                      "found)")
        if "ring" in systems:
            run_system(runner, rows, name, labels["ring"], "ring", bnds, a, failures=failures)
        if "conflux" not in systems:
            return
        for topo in topos:
            # Parents start before their children.
            roles = {"fat": ["a0"], "striped": [f"a{j + 1}" for j in range(n)],
                     "hybrid": ["a1"],
                     "tree": (["t0"] + [f"m{j + 1}" for j in range(mids)] +
                              [f"t{j + 1}" for j in range(leaves)])}[topo]
            parent, per_rank = {}, None
            if topo == "tree":  # protocol/SPEC.md section 7
                def up(role):
                    return ["--parent", f"{fab.aggs[role].ip}:7470"]
                parent = {f"m{j + 1}": up("t0") for j in range(mids)}
                parent.update({f"t{j + 1}": up(f"m{j * mids // leaves + 1}" if mids else "t0")
                               for j in range(leaves)})
                if a.tree_results:  # each leaf its own workers' groups; the root one to send
                    parent["t0"] = ["--multicast-range", "239.76.0.0/24"]
                    for j in range(leaves):
                        parent[f"t{j + 1}"] += ["--multicast-range", f"239.77.{j}.0/24",
                                                "--tree-results", a.tree_results]
            eps = runner.start_aggregators(roles, a.agg_threads, parent)
            if topo == "tree":
                # Worker i names its leaf (in contiguous groups), and with middle aggregators
                # its chain up to below the root, "leaf>mid" (the plugin's tree syntax).
                def chain(i):
                    j = i * leaves // n
                    leaf = eps[1 + mids + j]
                    return f"{leaf}>{eps[1 + j * mids // leaves]}" if mids else leaf
                per_rank = [[chain(i)] for i in range(n)]
            try:
                key = "one" if topo == "hybrid" else topo
                run_system(runner, rows, name, labels[key], "collnet", bnds, a, eps,
                           failures=failures, per_rank=per_rank)
                if topo == "fat" and a.device_buffers is not None:  # the same from GPU memory
                    cuda = {"LD_LIBRARY_PATH": a.device_buffers} if a.device_buffers else {}
                    run_system(runner, rows, name, labels["fat_device"], "collnet", bnds, a, eps,
                               failures=failures, extra_args=["--device-buffers"],
                               extra_env=cuda)
                if topo == "fat" and a.ring_fraction == "auto":  # the measured split at Kx
                    run_system(runner, rows, name, labels["fat_hybrid"], "hybrid", bnds, a, eps,
                               "auto", failures)
                if topo == "hybrid":
                    f = hybrid_fraction(a, n)
                    run_system(runner, rows, name, labels["hybrid"], "hybrid", bnds, a, eps, f,
                               failures)
            finally:
                for role, c in runner.stop_aggregators().items():
                    agg_reports.append({"fabric": name, "topology": topo, "role": role,
                                        **{k: c[k] for k in ("bytes_in", "bytes_out",
                                                             "cpu_seconds", "sleeps")
                                           if k in c}})
                    drops = {k: int(v) for k, v in c.items() if k.startswith("drops") and v}
                    print(f"# confluxd {role}: packets in {int(c.get('packets_in', 0))} out "
                          f"{int(c.get('packets_out', 0))}, retransmits served "
                          f"{int(c.get('retransmits_served', 0))}, drops {drops or 0}",
                          flush=True)
                    print(f"# confluxd {role}: bytes in {int(c.get('bytes_in', 0))} out "
                          f"{int(c.get('bytes_out', 0))}, uplink (tbf) sent "
                          f"{int(c.get('uplink_bytes', -1))} B, CPU {c.get('cpu_seconds', -1):.2f} s, "
                          f"jobs by multicast {int(c.get('multicast_jobs', 0))}, by unicast "
                          f"{int(c.get('unicast_jobs', 0))}",
                          flush=True)
                    if c.get("sleeps"):  # the UDP dataplane's threads: each sleep, a wake-up
                        print(f"# confluxd {role}: {int(c['sleeps'])} wake-ups, "
                              f"{c.get('bytes_in', 0) / c['sleeps'] / 1024:.0f} KiB in per "
                              "wake-up", flush=True)
    finally:
        runner.kill_all()
        if fab.created and a.diag:
            print("# where packets were lost on this fabric:\n" + fab.drop_report(), flush=True)
        drops = fab.loss_counts() if fab.created else {}
        if drops:
            print("# loss rule dropped (packets, per receiver): " +
                  " ".join(f"{k}={v}" for k, v in drops.items()), flush=True)
        fab.teardown()


def main(argv):
    a = parse_args(argv)
    if os.geteuid() != 0:
        print("conflux_fabric: SKIPPED: needs root (network namespaces, tc, nft)")
        return SKIP
    if shutil.which("ip") is None or subprocess.run(["ip", "netns", "list"],
                                                    capture_output=True).returncode != 0:
        print("conflux_fabric: SKIPPED: `ip netns` unavailable")
        return SKIP
    removed = fabric_ns.cleanup_stale(force=a.force and a.cleanup)
    if removed:
        print(f"# removed stale namespaces: {' '.join(removed)}")
    if a.cleanup:
        return 0
    bins = {"confluxd": a.confluxd or os.path.join(a.build, "aggregator/confluxd"),
            "plugin": a.plugin or os.path.join(a.build, "nccl_plugin/libnccl-net-conflux.so"),
            "driver": a.driver or os.path.join(a.build, "tools/driver/conflux-nccl-driver"),
            "gloo": a.gloo or os.path.join(a.build, "bench/fabric/conflux-fabric-gloo"),
            "mpi": a.mpi or os.path.join(a.build, "bench/fabric/conflux-fabric-mpi")}
    for k in ("confluxd", "plugin", "driver"):
        if not os.path.exists(bins[k]):
            print(f"conflux_fabric: error: {k} not found at {bins[k]}", file=sys.stderr)
            return 2
    for k in ("gloo", "mpi"):  # optional baselines
        if not os.path.exists(bins[k]):
            bins[k] = None
    n, factor = a.workers, a.fat_factor or a.workers
    topos = [t for t in a.topologies.split(",") if t]
    systems = [s for s in a.systems.split(",") if s]
    f = hybrid_fraction(a, n)
    labels = {"fat": f"conflux 1 agg @{factor:g}x", "striped": f"conflux {n} aggs @1x striped",
              "one": "conflux 1 agg @1x", "hybrid": (f"conflux hybrid f={f:.2f} 1 agg @1x" if f != "auto"
                         else "conflux hybrid auto 1 agg @1x"),
              "ring": "plugin ring (p2p net)", "gloo": "gloo ring (tcp)",
              "mpi": "open mpi ring (tcp)",
              "fat_hybrid": f"conflux hybrid auto 1 agg @{factor:g}x",
              "fat_device": f"conflux 1 agg @{factor:g}x, device memory",
              "tree": f"conflux tree {a.tree_leaves} leaves " +
                      (f"({a.tree_results}) " if a.tree_results else "") +
                      f"@{a.tree_leaf_factor:g}x, " +
                      (f"{a.tree_mids} mid @{a.tree_mid_factor:g}x, " if a.tree_mids else "") +
                      f"root @{a.tree_root_factor:g}x"}
    prefix = a.prefix or f"cfx{os.getpid()}"
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-")
    print(f"# conflux-fabric: {n} workers @ {a.rate} Mbit/s, topologies {topos}, systems "
          f"{systems}, sizes {a.minbytes}..{a.maxbytes} x4, logs in {workdir}", flush=True)
    balloon = fabric_ns.free_page_reporting()
    if balloon:
        print(f"# note: free-page reporting is on ({balloon} bound to virtio_balloon): a system "
              "run after another may copy at half speed; compare medians, or unbind it "
              "(README, 'On a VM')", flush=True)
    thp = fabric_ns.transparent_hugepages()
    if thp is not None and thp != "always":
        print(f"# note: transparent huge pages '{thp}': the ranks' buffers are on 4 KiB pages, "
              "which slows Conflux's copies more than Gloo's; compare runs under one mode "
              "(README, 'On a VM')", flush=True)
    rows, failures, agg_reports = [], [], []
    run_fabric(a, bins, "lossless", 0.0, topos, systems, rows, labels, workdir, prefix, failures,
               agg_reports)
    if a.loss > 0:
        run_fabric(a, bins, "lossy", a.loss, a.loss_topologies.split(","),
                   a.loss_systems.split(","), rows, labels,
                   workdir, prefix, failures, agg_reports)
    meta = {"workers": n, "mbit": a.rate, "fat_factor": factor, "loss": a.loss,
            "large": 16 << 20, "labels": labels, "topologies": topos, "systems": systems,
            "argv": argv, "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "nproc": os.cpu_count(), "kernel": os.uname().release, "failures": failures,
            "logs": workdir, "free_page_reporting": balloon,
            "transparent_hugepages": thp,
            # Each aggregator's counters over its life, per fabric and topology (CPU in s).
            "aggregators": agg_reports}
    lines, figures = fabric_report.summary(rows, meta)
    print("\n".join(lines))
    os.makedirs(a.out, exist_ok=True)
    fabric_report.write_csv(os.path.join(a.out, "fabric.csv"), rows)
    fabric_report.write_json(os.path.join(a.out, "fabric.json"), rows, meta, figures)
    err = fabric_report.plot(os.path.join(a.out, "fabric.png"), rows, meta)
    print(f"# wrote {a.out}/fabric.csv fabric.json" + (f"; {err}" if err else " fabric.png"))
    bad = sum(r["wrong"] for r in rows)
    lost = {(f["fabric"], f["system"], f["min"]) for f in failures if f["attempt"] == 2}
    for f in failures:
        print(f"# failure: {f['system']} [{f['fabric']}] sizes {f['min']}..{f['max']} "
              f"attempt {f['attempt']}")
    if bad == 0 and not lost:
        print("verified: all results correct")
        return 0
    print(f"# error: {bad} wrong elements, {len(lost)} size bands failed twice")
    return 1


def _on_signal(sig, frame):
    raise SystemExit(128 + sig)


if __name__ == "__main__":
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, _on_signal)
    try:
        sys.exit(main(sys.argv[1:]))
    except (fabric_ns.FabricError, fabric_run.RunError) as e:
        print(f"# error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
