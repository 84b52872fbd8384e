# SPDX-License-Identifier: Apache-2.0
"""Runs programs inside a Fabric's namespaces: the TCP rate check (iperf3), confluxd on the
aggregator hosts, conflux-nccl-driver ranks (one process per worker namespace, env-mode
bootstrap), conflux-fabric-gloo ranks and conflux-fabric-mpi under mpirun. Every run's results are verified by the program that
produced them; a run that is not `verified: all results correct` on rank 0 with every rank
exiting 0 raises RunError. Main thread only; `kill_all()` ends every process started here.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time

import fabric_ns

ROW_RE = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.eE+-]+)\s+"
                    r"([\d.eE+-]+)\s+(\d+)\s*$")
HOST_CPU_RE = re.compile(r"^# host cpu: (?:([\d.eE+-]+) CPU-s per GB|n/a)")
VERIFIED = "verified: all results correct"
METRIC_RE = re.compile(r'^conflux_dataplane_(\w+?)_total(\{[^}]*?(?:reason="(\w+)")?[^}]*\})?'
                       r'\s+([\d.eE+-]+)$')


class RunError(RuntimeError):
    pass


def process_cpu_seconds(pid):
    """User + system CPU seconds of a running process (/proc/PID/stat), -1 if unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return -1.0


def cpu_busy_seconds():
    """A counter of the whole machine's busy CPU seconds: online CPUs x monotonic time less
    the idle time (/proc/stat idle + iowait), so that the difference over an interval is what
    the machine ran in it, the cost of a run on a machine that runs nothing else. The kernel
    measures idle time exactly (tickless idle) but only samples the busy fields at each tick,
    which missed 17-35 % of a fabric run's busy time (tools/util/proc.h)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    idle, iowait = int(fields[3]), int(fields[4])
    return (os.sysconf("SC_NPROCESSORS_ONLN") * time.monotonic()
            - (idle + iowait) / os.sysconf("SC_CLK_TCK"))


def parse_rows(text, nranks):
    """Rows of an nccl-tests-style table. algbw/busbw are recomputed from bytes and time
    (the programs print them with only 3 decimals, too coarse for small messages). The
    "# host cpu" line under a row gives its host_cpu_s_per_gb: the whole host's busy CPU
    time over the timed iterations only, per GB AllReduced (None: "n/a", too short to tell)."""
    rows = []
    for line in text.splitlines():
        c = HOST_CPU_RE.match(line)
        if c and rows:
            rows[-1]["host_cpu_s_per_gb"] = float(c.group(1)) if c.group(1) else None
            continue
        m = ROW_RE.match(line)
        if m:
            b, t = int(m.group(1)), float(m.group(5))
            algbw = b / t / 1e3 if t > 0 else 0.0
            rows.append({"bytes": b, "time_us": t, "algbw": algbw,
                         "busbw": algbw * 2 * (nranks - 1) / nranks, "wrong": int(m.group(8))})
    return rows


# ---- the scenario scripts (fabric_share, fabric_throttle) ------------------------------
def add_scenario_args(p, agg_factor, one_job=False):
    """The options every scenario script takes: where its programs are, the link rates (the
    one aggregator's as a multiple of the workers', default `agg_factor`), and extra daemon
    arguments and rank environment; with `one_job`, the one job's --workers and --bytes."""
    p.add_argument("--build", default="build")
    p.add_argument("--plugin", help="plugin .so (default: BUILD/nccl_plugin/...)")
    p.add_argument("--confluxd", help="default: BUILD/aggregator/confluxd")
    p.add_argument("--driver", help="default: BUILD/tools/driver/conflux-nccl-driver")
    p.add_argument("--conflux", help="the operator CLI (default: BUILD/aggregator/cli/conflux)")
    p.add_argument("--rate", type=int, default=1000, help="worker link rate, Mbit/s")
    p.add_argument("--agg-factor", type=float, default=agg_factor,
                   help="the aggregator's link rate / worker rate")
    p.add_argument("--agg-arg", action="append", default=[], metavar="ARG")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra environment of every rank")
    if one_job:
        p.add_argument("--workers", type=int, default=4)
        p.add_argument("--bytes", default="16M", help="bytes per AllReduce")


def run_scenario(main):
    """A scenario script's entry: main(argv)'s exit code; a fabric or run error is printed and
    exits 1, SIGTERM exits as the signal would (the fabric is torn down on the way)."""
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    try:
        sys.exit(main(sys.argv[1:]))
    except (fabric_ns.FabricError, RunError) as e:
        print(f"# error: {e}", file=sys.stderr)
        sys.exit(1)


def preflight(name, a):
    """The programs of add_scenario_args' options, after removing namespaces a killed run left;
    None (after printing why) where the fabric cannot be built: not root, no `ip netns`."""
    if os.geteuid() != 0:
        print(f"{name}: SKIPPED: needs root (network namespaces, tc)")
        return None
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        print(f"{name}: SKIPPED: `ip netns` unavailable")
        return None
    fabric_ns.cleanup_stale()
    return {"confluxd": a.confluxd or os.path.join(a.build, "aggregator/confluxd"),
            "plugin": a.plugin or os.path.join(a.build, "nccl_plugin/libnccl-net-conflux.so"),
            "driver": a.driver or os.path.join(a.build, "tools/driver/conflux-nccl-driver"),
            "conflux": a.conflux or os.path.join(a.build, "aggregator/cli/conflux")}


JOB_PACKETS_RE = re.compile(r"^conflux_job_packets_in_total\{[^}]*\} (\d+)", re.M)


def job_packets(host):
    """The packets every job has sent the confluxd on `host` (0 when it does not answer)."""
    return sum(int(v) for v in JOB_PACKETS_RE.findall(scrape(host)))


def finish_ranks(ranks):
    """Waits for the ranks of Runner.start_ranks(): (every rank exited 0 and rank 0 printed
    that every result was verified, rank 0's output)."""
    for p, _ in ranks:
        p.wait(timeout=600)
    text = open(ranks[0][1]).read()
    return all(p.returncode == 0 for p, _ in ranks) and VERIFIED in text, text


def wait_first_packet(host, rank0, what, timeout=60):
    """Returns (monotonic time) once the confluxd on `host` has a job packet; RunError when
    rank 0's process `rank0` ends first or nothing comes within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while job_packets(host) == 0:
        if time.monotonic() > deadline or rank0.poll() is not None:
            raise RunError(f"{what}: the job sent no packet to the aggregator")
        time.sleep(0.05)
    return time.monotonic()


def scrape(host, port=9470, timeout=2):
    """The /metrics text of the confluxd on `host` (curl inside its namespace; the root
    namespace has no route to the fabric); '' when it does not answer."""
    return subprocess.run(["ip", "netns", "exec", host.ns, "curl", "-s", "-m", str(timeout),
                           f"http://{host.ip}:{port}/metrics"], capture_output=True,
                          text=True).stdout


# ---- conflux-nccl-driver --timeline files -------------------------------------------------
def read_timeline(path):
    """[(start, end, bytes)] in seconds since the epoch, in order."""
    points = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            _mode, b, end, us = line.split()
            end = float(end)
            points.append((end - float(us) / 1e6, end, int(b)))
    return points


def algbw(points):
    """GB/s over consecutive iterations: their bytes over the time from the first's start to
    the last's end."""
    if not points:
        return 0.0
    return sum(b for _, _, b in points) / (points[-1][1] - points[0][0]) / 1e9


def between(points, t0, t1):
    return [p for p in points if p[0] >= t0 and p[1] <= t1]


def recovery(points, event, end, target):
    """Seconds from `event` to the start of the first iteration after it from which both the
    next second and everything up to `end` run at >= target GB/s; None if never."""
    phase = between(points, event, end)
    for i, (start, _, _) in enumerate(phase):
        rest = phase[i:]
        second = [p for p in rest if p[1] <= start + 1.0] or rest[:1]
        if algbw(second) >= target and algbw(rest) >= target:
            return start - event
    return None


def rolling(points, t0, window):
    """[(t, GB/s)] at each iteration's end t (from t0): the algbw of the iterations that started
    within `window` seconds before it, from the first one's start to its end. Windows aligned
    to iterations do not alias as fixed bins do (3 or 4 iterations in a bin)."""
    out, first = [], 0
    for i, (_, end, _) in enumerate(points):
        while points[first][0] < end - window:
            first += 1
        out.append((round(end - t0, 4), round(algbw(points[first:i + 1]), 5)))
    return out


def write_timeline_report(path, meta, jobs, events, window, reference, phases, recoveries):
    """A "conflux-timeline/1" report (bench/plot_results.py plots it and prints its table):
    meta (what, workers, mbit, bytes, mode, command), each job's rolling algbw (jobs: {name:
    timeline}), events {name: unix time}, `reference` (GB/s that "of before" divides by),
    phases [(label, GB/s)] and recoveries [(label, seconds or None)]; times from the first
    iteration's start."""
    t0 = min(points[0][0] for points in jobs.values())
    doc = {"format": "conflux-timeline/1", "meta": dict(meta, window_s=window),
           "events": {k: round(v - t0, 4) for k, v in events.items()},
           "series": {name: rolling(points, t0, window) for name, points in jobs.items()},
           "summary": {"reference": reference, "phases": phases, "recoveries": recoveries}}
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def rank_env(rank, nranks, root, worker, aggregators):
    """Environment of one driver rank on `worker` (env-mode bootstrap with root host:port).
    Each worker is told its shaped rate as CONFLUX_LINK_MBPS: the speed a NIC of that rate
    reports (a veth reports 10 Gbit/s), as the daemons get theirs as line_mbps; an extra
    CONFLUX_LINK_MBPS=0 restores the interface's figure. aggregators: CONFLUX_AGGREGATORS."""
    return {"CONFLUX_DRIVER_RANK": str(rank), "CONFLUX_DRIVER_NRANKS": str(nranks),
            "CONFLUX_DRIVER_ROOT": root, "CONFLUX_SOCKET_IFNAME": "=eth0",
            "CONFLUX_LINK_MBPS": str(worker.mbit), "CONFLUX_AGGREGATORS": aggregators,
            "NCCL_DEBUG": "WARN"}  # the plugin's warnings land in the rank logs


class Runner:
    def __init__(self, fabric, bins, workdir, idle_sleep_us=50, driver_env=None, agg_args=(),
                 timelines=False, driver_args=()):
        self.agg_args = list(agg_args)
        # Extra conflux-nccl-driver arguments of the CollNet modes (e.g. --nccl-regions 32K).
        self.driver_args = list(driver_args)
        # timelines: rank 0 of each driver run writes its per-iteration times to
        # last_timeline (conflux-nccl-driver --timeline); None after any other run.
        self.timelines = timelines
        self.last_timeline = None
        self.driver_env = dict(driver_env or {})
        self.fabric, self.bins, self.workdir = fabric, bins, workdir
        self.idle_sleep_us = idle_sleep_us
        self.procs = []
        self.seq = 0
        self.agg_procs = []

    def spawn(self, host, argv, env_extra, out_path):
        env = dict(os.environ)
        env.update(env_extra)
        out = open(out_path, "w")
        p = subprocess.Popen(["ip", "netns", "exec", host.ns] + argv, env=env, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
        out.close()
        self.procs.append(p)
        return p

    def kill(self, p):
        if p.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    p.wait(timeout=3)
                    break
                except subprocess.TimeoutExpired:
                    pass
        if p in self.procs:
            self.procs.remove(p)

    def kill_all(self):
        for p in list(self.procs):
            self.kill(p)

    def _out(self, name):
        self.seq += 1
        return os.path.join(self.workdir, f"{self.seq:03d}-{name}.log")

    # ---- TCP rate check ------------------------------------------------------------------
    def tcp_check(self, src, dst, seconds=2):
        """One TCP stream src -> dst with iperf3; returns the receiver's Mbit/s."""
        seconds = max(1, int(round(seconds)))  # iperf3 -t is whole seconds; 0 means forever
        srv = self.spawn(dst, ["iperf3", "-s", "-1", "-B", dst.ip, "-p", "5201"], {},
                         self._out(f"iperf3-server-{dst.role}"))
        try:
            out = ""
            for _ in range(30):
                r = subprocess.run(["ip", "netns", "exec", src.ns, "iperf3", "-c", dst.ip, "-p",
                                    "5201", "-t", str(seconds), "-J"], capture_output=True,
                                   text=True, timeout=seconds + 30)
                out = r.stdout
                if r.returncode == 0 and '"error"' not in out:
                    break
                time.sleep(0.2)
            data = json.loads(out)
            return data["end"]["sum_received"]["bits_per_second"] / 1e6
        except (ValueError, KeyError, subprocess.TimeoutExpired) as e:
            raise RunError(f"iperf3 {src.role}->{dst.role} failed: {e}: {out[-300:]}")
        finally:
            self.kill(srv)

    # ---- aggregators ---------------------------------------------------------------------
    def start_aggregators(self, roles, threads, extra=None):
        """Starts confluxd on each aggregator host, in order (`extra`: role -> more
        arguments, e.g. a leaf's --parent); returns 'ip:control_port' endpoints.
        Each daemon is told its shaped rate as line_mbps: the speed a NIC of that rate would
        report in sysfs (a veth reports 10 Gbit/s), which it advertises to the workers; an
        --agg-arg=--line-mbps=N replaces it (0: the interface's own figure, as with the workers'
        CONFLUX_LINK_MBPS=0)."""
        eps = []
        for role in roles:
            h = self.fabric.aggs[role]
            ready = os.path.join(self.workdir, f"ready-{role}-{self.seq}")
            argv = [self.bins["confluxd"], "--listen", h.ip, "--control-port", "7470",
                    "--data-port", "7471", "--threads", str(threads), "--metrics-port", "9470",
                    *([] if any(a.startswith("--line-mbps") for a in self.agg_args)
                      else ["--line-mbps", str(h.mbit)]), "--log-level", "warn",
                    "--ready-file", ready] + self.agg_args + (extra or {}).get(role, [])
            p = self.spawn(h, argv, {}, self._out(f"confluxd-{role}"))
            self.agg_procs.append((h, p))
            for _ in range(100):
                if os.path.exists(ready) or p.poll() is not None:
                    break
                time.sleep(0.05)
            if not os.path.exists(ready):
                raise RunError(f"confluxd on {role} did not start (rc={p.poll()})")
            eps.append(f"{h.ip}:7470")
        return eps

    def kill_aggregator(self, role):
        """SIGKILLs the confluxd on aggregator host `role` (a crash: no Leave, no Shutdown),
        reaps it and forgets it."""
        for h, p in list(self.agg_procs):
            if h.role == role:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                self.procs.remove(p)
                self.agg_procs.remove((h, p))

    def stop_aggregators(self):
        """Scrapes each daemon's /metrics (saved next to its log), stops it; returns
        {role: {counter: value}} of the dataplane counters summed over threads."""
        stats = {}
        for h, p in self.agg_procs:
            text = scrape(h, timeout=3)
            with open(self._out(f"metrics-{h.role}"), "w") as f:
                f.write(text)
            c = {}
            for line in text.splitlines():
                m = METRIC_RE.match(line)
                if m:
                    key = m.group(1) + (f"[{m.group(3)}]" if m.group(3) else "")
                    c[key] = c.get(key, 0) + float(m.group(4))
            for mode in ("multicast", "unicast"):  # per job and aggregator (SPEC section 8)
                m = re.search(rf'^conflux_multicast_decisions_total\{{mode="{mode}"\}} (\d+)',
                              text, re.M)
                c[f"{mode}_jobs"] = float(m.group(1)) if m else 0
            c["cpu_seconds"] = process_cpu_seconds(p.pid)  # `ip netns exec` execs confluxd
            t = subprocess.run(["tc", "-s", "-n", h.ns, "qdisc", "show", "dev", "eth0"],
                               capture_output=True, text=True).stdout
            m = re.search(r"Sent (\d+) bytes", t)
            c["uplink_bytes"] = float(m.group(1)) if m else -1  # the host's egress (tbf)
            stats[h.role] = c
            self.kill(p)
        self.agg_procs = []
        return stats

    # ---- ranks ---------------------------------------------------------------------------
    def start_ranks(self, name, workers, port, aggregators, driver_args, env_extra=None):
        """Starts one conflux-nccl-driver rank per worker (env-mode bootstrap, root on the first
        at `port`) with the plugin and `driver_args`, without waiting; returns [(process, log
        path)], rank 0 first. For runs that something else must act on while they go."""
        root = f"{workers[0].ip}:{port}"
        out = []
        for i, w in enumerate(workers):
            log = os.path.join(self.workdir, f"{name}-r{i}.log")
            argv = [self.bins["driver"], "--plugin", self.bins["plugin"]] + list(driver_args)
            env = rank_env(i, len(workers), root, w, aggregators)
            env.update(self.driver_env)
            env.update(env_extra or {})
            out.append((self.spawn(w, argv, env, log), log))
        return out

    def _run_ranks(self, name, make_argv, make_env, timeout):
        logs, procs = [], []
        for i, w in enumerate(self.fabric.workers):
            log = self._out(f"{name}-r{i}")
            logs.append(log)
            procs.append(self.spawn(w, make_argv(i, w), make_env(i, w), log))
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise RunError(f"{name}: timed out after {timeout:.0f} s (logs {logs[0]})")
        finally:
            for p in procs:
                self.kill(p)
        text = open(logs[0]).read()
        rcs = [p.returncode for p in procs]
        if any(rcs) or VERIFIED not in text:
            tails = "\n".join(f"--- {l}\n" + open(l).read()[-1500:] for l in logs)
            raise RunError(f"{name}: exit codes {rcs}, not verified\n{tails}")
        return text

    def run_driver(self, mode, band, aggs_eps, ring_fraction, timeout, per_rank=None,
                   extra_args=(), extra_env=None):
        """per_rank: rank i's own aggregator list (a tree's leaf), else aggs_eps for all.
        extra_args / extra_env: more driver arguments and environment of this run only."""
        self.seq += 1
        port = 29500 + self.seq
        root = f"{self.fabric.workers[0].ip}:{port}"
        n = len(self.fabric.workers)
        timeline = (os.path.join(self.workdir, f"timeline-{self.seq}.txt")
                    if self.timelines else None)
        self.last_timeline = None

        def argv(i, w):
            a = [self.bins["driver"], "--plugin", self.bins["plugin"], "--modes", mode,
                 "-b", str(band["min"]), "-e", str(band["max"]), "-f", "4",
                 "-n", str(band["iters"]), "-w", str(band["warmup"]),
                 "--idle-sleep-us", str(self.idle_sleep_us), "--timeout", str(int(timeout))]
            if timeline and i == 0:
                a += ["--timeline", timeline]
            if mode != "ring":
                f = ring_fraction if ring_fraction == "auto" else f"{ring_fraction:.4f}"
                a += ["--require-collnet", "--ring-fraction", f] + self.driver_args
            return a + list(extra_args)

        def env(i, w):
            e = rank_env(i, n, root, w, ",".join(per_rank[i] if per_rank else aggs_eps)
                         if mode != "ring" else "")
            e.update(self.driver_env)
            e.update(extra_env or {})
            return e

        text = self._run_ranks(f"driver-{mode}", argv, env, timeout + 20)
        self.last_timeline = timeline
        return text

    def run_gloo(self, band, timeout):
        self.seq += 1
        store = os.path.join(self.workdir, f"gloo-store-{self.seq}")
        os.makedirs(store, exist_ok=True)
        n = len(self.fabric.workers)

        def argv(i, w):
            return [self.bins["gloo"], "--rank", str(i), "--nranks", str(n), "--store", store,
                    "--addr", w.ip, "-b", str(band["min"]), "-e", str(band["max"]), "-f", "4",
                    "-n", str(band["iters"]), "-w", str(band["warmup"]),
                    "--timeout", str(int(timeout))]

        return self._run_ranks("gloo", argv, lambda i, w: {}, timeout + 20)

    def _write_rsh_agent(self, agent):
        """mpirun's rsh agent: `HOST COMMAND...` runs COMMAND in HOST's namespace."""
        with open(agent, "w") as f:
            f.write("#!/bin/sh\n# mpirun's rsh agent: HOST COMMAND... runs COMMAND in HOST's "
                    "namespace\nhost=$1; shift\ncase $host in\n")
            for w in self.fabric.workers:
                f.write(f"  {w.ip}) ns={w.ns} ;;\n")
            f.write('  *) echo "netns-rsh: unknown host $host" >&2; exit 1 ;;\nesac\n'
                    'exec ip netns exec "$ns" /bin/sh -c "$*"\n')
        os.chmod(agent, 0o755)

    def run_mpi(self, band, timeout):
        """Open MPI's ring: mpirun in worker 0's namespace starts one rank per worker host,
        reaching the other namespaces through an rsh agent that is `ip netns exec`. The ring
        algorithm (coll_tuned_allreduce_algorithm 4) and the TCP BTL on eth0 are forced, so the
        figure is a ring over the same links as every other system. mpi_yield_when_idle 1: the
        ranks outnumber the cores here, and busy-polling ranks take them from each other (4 B
        at N = 4: 5.5 ms spinning against ~110 us yielding), which is no ring's real latency."""
        w0 = self.fabric.workers[0]
        agent = os.path.join(self.workdir, "netns-rsh")
        if not os.path.exists(agent):  # one per fabric: its hosts do not change
            self._write_rsh_agent(agent)
        mca = {"plm_rsh_agent": agent, "plm_rsh_no_tree_spawn": "1", "pml": "ob1",
               "btl": "self,tcp", "btl_tcp_if_include": "eth0", "oob_tcp_if_include": "eth0",
               "coll_tuned_use_dynamic_rules": "1", "coll_tuned_allreduce_algorithm": "4",
               "mpi_yield_when_idle": "1"}
        argv = ["mpirun", "--allow-run-as-root", "--bind-to", "none", "-np",
                str(len(self.fabric.workers)),
                "--host", ",".join(f"{w.ip}:1" for w in self.fabric.workers)]
        for k, v in mca.items():
            argv += ["--mca", k, v]
        argv += [self.bins["mpi"], "-b", str(band["min"]), "-e", str(band["max"]), "-f", "4",
                 "-n", str(band["iters"]), "-w", str(band["warmup"])]
        log = self._out("mpi")
        p = self.spawn(w0, argv, {}, log)
        try:
            p.wait(timeout=timeout + 20)
        except subprocess.TimeoutExpired:
            raise RunError(f"mpi: timed out after {timeout + 20:.0f} s (log {log})")
        finally:
            self.kill(p)
        text = open(log).read()
        if p.returncode != 0 or VERIFIED not in text:
            raise RunError(f"mpi: mpirun exit code {p.returncode}, not verified\n--- {log}\n"
                           + text[-3000:])
        return text
