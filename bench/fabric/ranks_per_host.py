#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Several ranks per host on emulated hosts, with NCCL's connection count.

--hosts network namespaces ("hosts", the fabric of fabric_ns.py with no aggregator: one
namespace per host, joined through a Linux bridge, links shaped at --rate), --ranks-per-host
conflux-nccl-driver processes in each, launched apart with the driver's env-mode bootstrap
(CONFLUX_DRIVER_RANK/_NRANKS/_ROOT, rank 0 listening in the first host): ranks 0..R-1 in
host 0, R..2R-1 in host 1, and so on, CONFLUX_SOCKET_IFNAME=eth0 (each host's veth). Each
rank runs --modes (default ring,pxn) over the plugin's p2p net with --hold-conns K more
connections to rank+1 held open, so that it holds 2K+2 p2p comms, as NCCL holds one per
channel, peer and pattern (8 GPUs per node: about 64).

While the ranks run, every rank process is sampled from outside every --sample seconds:
its threads (/proc/PID/task), among them the plugin's net helper threads by name
(`cfx-netN`, the process's pool of CONFLUX_NET_PROGRESS_THREADS), and its open fds
(/proc/PID/fd); the maximum of each over the run is printed per process, with the driver's
own report (rank 0 gathers /proc/self of every rank once the held comms are up) and whether
every result verified. One run per value of --progress-threads (e.g. 4,8: the pool follows
the setting).

Exit status 1 when a result is wrong or a rank failed, when a rank process had more than
progress threads + --extra-threads threads, or fewer net helper threads than the pool allows
while it holds more comms than that. Root, like the other fabric scripts; every namespace
and rank is removed on every exit path (an exception, SIGTERM, Ctrl-C).

    bench/fabric/ranks_per_host.py --build build --hosts 2 --ranks-per-host 8 \\
        --hold-conns 31 --progress-threads 4,8
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fabric_ns  # noqa: E402
import fabric_run  # noqa: E402

NOTE_RE = re.compile(r"^# resources per rank with (\d+) open p2p comms .*: threads (\d+)\.\.(\d+), "
                     r"fds (\d+)\.\.(\d+)$", re.M)
MODE_RE = re.compile(r"^# mode: (\w+)", re.M)
NET_THREAD_RE = re.compile(r"^cfx-net\d+$")
# The driver's own threads beside the plugin's pool: the main thread (NCCL's proxy progress
# thread), the liveness watcher (its bootstrap link to rank 0) and, while the held comms
# connect, the service thread (NCCL's proxy service thread). Ring and PXN start no other
# plugin thread (no CollNet: no cfx-collnet, cfx-engine or cfx-ring).
DRIVER_THREADS = 3


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--plugin", help="plugin .so (default: BUILD/nccl_plugin/...)")
    p.add_argument("--driver", help="default: BUILD/tools/driver/conflux-nccl-driver")
    p.add_argument("--hosts", type=int, default=2)
    p.add_argument("--ranks-per-host", type=int, default=8)
    p.add_argument("--hold-conns", type=int, default=31,
                   help="connections to rank+1 each rank holds besides the ring's (2K+2 comms)")
    p.add_argument("--modes", default="ring,pxn")
    p.add_argument("-b", "--minbytes", default="4")
    p.add_argument("-e", "--maxbytes", default="4M")
    p.add_argument("-f", "--stepfactor", default="4")
    p.add_argument("-n", "--iters", type=int, default=2)
    p.add_argument("-w", "--warmup", type=int, default=1)
    p.add_argument("--idle-sleep-us", type=int, default=100,
                   help="the driver's idle polling sleep (ranks outnumber cores)")
    p.add_argument("--progress-threads", default="4",
                   help="CONFLUX_NET_PROGRESS_THREADS, a comma list: one run per value")
    p.add_argument("--extra-threads", type=int, default=DRIVER_THREADS,
                   help="threads a rank process may have beyond the pool (the driver's own)")
    p.add_argument("--rate", type=int, default=10000, help="each host's link, Mbit/s (tbf)")
    p.add_argument("--sample", type=float, default=0.1, help="seconds between samples")
    p.add_argument("--timeout", type=int, default=600, help="seconds per run")
    p.add_argument("--port", type=int, default=29650, help="rank 0's bootstrap port")
    p.add_argument("--json", help="write every run's figures here")
    p.add_argument("--prefix", default=f"cfx{os.getpid()}",
                   help="namespace prefix, cfx<pid> of a live process (default: this one's)")
    p.add_argument("--env", action="append", default=[], metavar="K=V",
                   help="extra environment of every rank")
    p.set_defaults(confluxd=None, conflux=None)  # fabric_run.preflight's other programs
    a = p.parse_args(argv)
    try:
        a.progress_threads = [int(x) for x in a.progress_threads.split(",")]
    except ValueError:
        a.progress_threads = []
    if not a.progress_threads or min(a.progress_threads) < 1:
        p.error("--progress-threads: positive integers, comma-separated")
    if a.hosts < 2 or a.ranks_per_host < 1 or a.hold_conns < 0:
        p.error("--hosts >= 2, --ranks-per-host >= 1, --hold-conns >= 0")
    return a


def driver_pid(pid):
    """The driver's pid behind `ip netns exec` (which execs it, so normally the same pid)."""
    for _ in range(50):
        try:
            if os.readlink(f"/proc/{pid}/exe").endswith("conflux-nccl-driver"):
                return pid
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                kids = f.read().split()
            if kids:
                return int(kids[0])
        except OSError:
            return pid  # gone already: its rc and log tell what happened
        time.sleep(0.02)
    return pid


class Sampler:
    """The maximum over samples of each rank process's threads, net helper threads, fds and
    threads by name."""

    def __init__(self, pids):
        self.pids = pids
        self.threads = [0] * len(pids)
        self.net = [0] * len(pids)
        self.fds = [0] * len(pids)
        self.names = [{} for _ in pids]
        self.samples = 0

    def sample(self):
        self.samples += 1
        for i, pid in enumerate(self.pids):
            try:
                tids = os.listdir(f"/proc/{pid}/task")
                fds = len(os.listdir(f"/proc/{pid}/fd"))
            except OSError:
                continue  # exited
            names = {}
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/comm") as f:
                        name = f.read().strip()
                except OSError:
                    continue  # the thread ended between listdir and open
                key = "cfx-netN" if NET_THREAD_RE.match(name) else name
                names[key] = names.get(key, 0) + 1
            self.threads[i] = max(self.threads[i], len(tids))
            self.net[i] = max(self.net[i], names.get("cfx-netN", 0))
            self.fds[i] = max(self.fds[i], fds)
            for k, v in names.items():
                self.names[i][k] = max(self.names[i].get(k, 0), v)


def driver_args(a, bins):
    return [bins["driver"], "--plugin", bins["plugin"], "--modes", a.modes, "-b", a.minbytes,
            "-e", a.maxbytes, "-f", a.stepfactor, "-n", str(a.iters), "-w", str(a.warmup),
            "--hold-conns", str(a.hold_conns), "--idle-sleep-us", str(a.idle_sleep_us),
            "--timeout", str(a.timeout)]


def run_once(a, fab, runner, bins, progress_threads, workdir):
    """One launch of every rank; returns the run's figures (a dict)."""
    nranks = a.hosts * a.ranks_per_host
    root = f"{fab.workers[0].ip}:{a.port}"
    extra = dict(kv.split("=", 1) for kv in a.env)
    procs, logs = [], []
    t0 = time.monotonic()
    for h, host in enumerate(fab.workers):
        for j in range(a.ranks_per_host):
            r = h * a.ranks_per_host + j
            env = {"CONFLUX_DRIVER_RANK": str(r), "CONFLUX_DRIVER_NRANKS": str(nranks),
                   "CONFLUX_DRIVER_ROOT": root, "CONFLUX_SOCKET_IFNAME": "=eth0",
                   "CONFLUX_NET_PROGRESS_THREADS": str(progress_threads), "NCCL_DEBUG": "WARN"}
            env.update(extra)
            log = os.path.join(workdir, f"p{progress_threads}-r{r}.log")
            logs.append(log)
            procs.append(runner.spawn(host, driver_args(a, bins), env, log))
    sampler = Sampler([driver_pid(p.pid) for p in procs])
    deadline = t0 + a.timeout + 30
    while any(p.poll() is None for p in procs):
        if time.monotonic() > deadline:
            raise fabric_run.RunError(f"ranks still running {a.timeout + 30} s after start "
                                      f"(logs in {workdir})")
        sampler.sample()
        time.sleep(a.sample)
    wall = time.monotonic() - t0
    for p in procs:
        runner.kill(p)  # reaped already; forgets it
    text = open(logs[0]).read()
    rcs = [p.returncode for p in procs]
    rows = fabric_run.parse_rows(text, nranks)
    return {"progress_threads": progress_threads, "nranks": nranks, "wall_s": round(wall, 1),
            "rcs": rcs, "verified": not any(rcs) and fabric_run.VERIFIED in text,
            "modes": MODE_RE.findall(text), "rows": len(rows),
            "wrong": sum(r["wrong"] for r in rows),
            "table": [line for line in text.splitlines()
                      if MODE_RE.match(line) or fabric_run.ROW_RE.match(line)],
            "driver_reports": [tuple(int(x) for x in m) for m in NOTE_RE.findall(text)],
            "threads": sampler.threads, "net_threads": sampler.net, "fds": sampler.fds,
            "names": sampler.names, "pids": sampler.pids, "samples": sampler.samples, "logs": logs,
            "failed_tails": {logs[i]: open(logs[i]).read()[-1500:]
                             for i, rc in enumerate(rcs) if rc != 0}}


def span(xs):
    return f"{min(xs)}..{max(xs)}" if min(xs) != max(xs) else str(min(xs))


def report(a, fab, run):
    """Prints one run; returns the list of its failures (empty: passed)."""
    p, comms = run["progress_threads"], 2 * a.hold_conns + 2
    print(f"# CONFLUX_NET_PROGRESS_THREADS={p}: {run['nranks']} rank processes, {comms} open "
          f"p2p comms each, modes {','.join(run['modes'])}, {run['samples']} samples, "
          f"wall {run['wall_s']:.1f} s")
    print("#   rank host     pid threads cfx-net  fds  threads by name (max)")
    for r in range(run["nranks"]):
        names = ", ".join(f"{k} {v}" for k, v in sorted(run["names"][r].items()))
        print(f"#   {r:4d} {fab.workers[r // a.ranks_per_host].role:>4s} {run['pids'][r]:7d} "
              f"{run['threads'][r]:7d} {run['net_threads'][r]:7d} {run['fds'][r]:4d}  {names}")
    print("#   rank 0's table (time: the slowest rank's mean per iteration):")
    for line in run["table"]:
        print(f"#   {line.strip()}")
    for c, tmin, tmax, fmin, fmax in run["driver_reports"]:
        print(f"#   driver's own report ({c} comms, once up): threads {tmin}..{tmax}, "
              f"fds {fmin}..{fmax}")
    print(f"#   per process (sampled max): threads {span(run['threads'])}, of which cfx-net "
          f"{span(run['net_threads'])}; fds {span(run['fds'])}; {run['rows']} rows, "
          f"{run['wrong']} wrong; " + ("verified" if run["verified"] else "NOT verified"))
    failures = []
    if not run["verified"]:
        failures.append(f"not verified (exit codes {run['rcs']})")
        for log, tail in run["failed_tails"].items():
            print(f"--- {log}\n{tail}")
    if len(run["modes"]) != len(a.modes.split(",")):
        failures.append(f"modes run: {run['modes']}, asked {a.modes}")
    bound = p + a.extra_threads
    over = [r for r, t in enumerate(run["threads"]) if t > bound]
    if over:
        failures.append(f"rank(s) {over} had more than {bound} threads ({p} + {a.extra_threads})")
    # Every comm has at least one lane, on the least loaded thread: a process holding at least
    # as many comms as the pool has threads runs all of them, and never more.
    want = min(p, comms)
    off = [r for r, n in enumerate(run["net_threads"]) if n != want]
    if off:
        failures.append(f"rank(s) {off} ran {[run['net_threads'][r] for r in off]} cfx-net "
                        f"threads, not {want}")
    if len(run["driver_reports"]) != len(run["modes"]):
        failures.append("the driver's --hold-conns report is missing")
    for f in failures:
        print(f"# FAIL: {f}")
    return failures


def main(argv):
    a = parse_args(argv)
    bins = fabric_run.preflight("ranks_per_host", a)
    if bins is None:
        return 77
    for k in ("plugin", "driver"):
        if getattr(a, k):
            bins[k] = getattr(a, k)
        if not os.path.exists(bins[k]):
            print(f"# error: {bins[k]} not built")
            return 1
    prefix = a.prefix
    workdir = tempfile.mkdtemp(prefix=f"{prefix}-rph-")
    fab = fabric_ns.Fabric(prefix, a.hosts, a.rate, [])
    runner = fabric_run.Runner(fab, bins, workdir)
    print(f"# ranks_per_host: {a.hosts} hosts x {a.ranks_per_host} ranks, --hold-conns "
          f"{a.hold_conns} ({2 * a.hold_conns + 2} p2p comms per rank), modes {a.modes}, "
          f"{a.minbytes}..{a.maxbytes} x{a.stepfactor}, {a.iters} iters + {a.warmup} warm-up, "
          f"--idle-sleep-us {a.idle_sleep_us}, {os.cpu_count()} cores, logs in {workdir}",
          flush=True)
    runs, failures = [], []
    try:
        fab.build()
        print(fab.describe(), flush=True)
        for p in a.progress_threads:
            run = run_once(a, fab, runner, bins, p, workdir)
            runs.append(run)
            failures += report(a, fab, run)
            sys.stdout.flush()
    finally:
        runner.kill_all()
        fab.teardown()
    left = [ns for ns in fabric_ns.list_namespaces() if ns.startswith(prefix + "-")]
    if left:
        failures.append(f"namespaces left behind: {left}")
    print("# | progress threads | rank processes | p2p comms per rank | threads per process "
          "| cfx-net per process | fds per process | verified | wall (s) |")
    for run in runs:
        print(f"# | {run['progress_threads']} | {run['nranks']} ({a.hosts} x {a.ranks_per_host})"
              f" | {2 * a.hold_conns + 2} | {span(run['threads'])} | {span(run['net_threads'])}"
              f" | {span(run['fds'])} | {'yes' if run['verified'] else 'NO'} "
              f"| {run['wall_s']:.1f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(a).items() if k != "json"},
                       "runs": [{k: v for k, v in r.items() if k != "failed_tails"}
                                for r in runs]}, f, indent=1)
    print("# ranks_per_host: " + ("passed" if not failures else
                                  f"FAILED: {'; '.join(failures)}"))
    return 0 if not failures else 1


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(128 + s))
    signal.signal(signal.SIGHUP, lambda s, f: sys.exit(128 + s))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # also where started with it ignored
    try:
        sys.exit(main(sys.argv[1:]))
    except (fabric_ns.FabricError, fabric_run.RunError, subprocess.SubprocessError) as e:
        print(f"# error: {e}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:  # after main's finally removed the ranks and namespaces
        print("# ranks_per_host: interrupted", file=sys.stderr)
        sys.exit(130)
