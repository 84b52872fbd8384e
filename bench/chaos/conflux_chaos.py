#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""conflux-chaos: a seeded chaos soak of real confluxd daemons and conflux-nccl-driver jobs on
loopback. Daemons are killed and restarted, stopped and continued, drained, throttled and
starved by nftables loss bursts; ranks of jobs are killed; short jobs join and leave; every
collective is verified by the driver. See README.md.

Exit: 0 passed, 1 a check failed (wrong element, daemon crash, hung job, unexplained job
failure, RSS/fd growth), 2 bad usage, 77 skipped (no usable nft and not CONFLUX_CI=1)."""
import argparse
import hashlib
import heapq
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

SKIP = 77
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# ---------------------------------------------------------------------------------------------
# Fault kinds. Each entry: weight in the seeded draw, whether it targets a daemon (daemon faults
# are exclusive per daemon: one at a time, so that e.g. a drain never meets a stopped daemon),
# and a one-line description for --help and the README.


class FaultKind:
    def __init__(self, name, weight, on_daemon, what):
        self.name, self.weight, self.on_daemon, self.what = name, weight, on_daemon, what


FAULT_KINDS = [
    FaultKind("daemon_kill", 1.0, True, "SIGKILL a confluxd, restart it 0.5-3 s later on the "
              "same control and metrics ports (new data ports)"),
    FaultKind("daemon_stop", 1.5, True, "SIGSTOP a confluxd for 1-15 s, then SIGCONT"),
    FaultKind("loss_burst", 2.0, True, "drop 1-20 % of the UDP datagrams to and from a "
              "confluxd's data ports for 2-8 s (nftables input hook on lo)"),
    FaultKind("drain", 1.0, True, "conflux drain a confluxd, conflux undrain it 2-10 s later"),
    FaultKind("throttle", 1.5, True, "conflux throttle --max-mbps 20..500 for 3-12 s, then "
              "--max-mbps 0"),
    FaultKind("rank_kill", 1.0, False, "SIGKILL one rank process of a running job (the "
              "driver's forked child); the job ends with an error and is started again"),
    FaultKind("job_join_leave", 1.5, False, "an extra short 2-rank job joins a daemon, runs a "
              "few seconds and leaves"),
]
KIND_BY_NAME = {k.name: k for k in FAULT_KINDS}


class Fault:
    """One scheduled fault: when (seconds from the start), what, on which target, with which
    parameters. The whole schedule comes from the seed before anything runs."""

    def __init__(self, t, kind, target, params):
        self.t, self.kind, self.target, self.params = t, kind, target, params
        self.outcome = "pending"  # fired | skipped: reason
        self.dropped = None  # loss_burst: datagrams its rules dropped

    def describe(self):
        p = " ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.t:8.2f}s {self.kind:15s} {self.target:10s} {p}"

    def to_json(self):
        j = {"t": round(self.t, 3), "kind": self.kind, "target": self.target,
             "params": self.params, "outcome": self.outcome}
        if self.dropped is not None:
            j["dropped"] = self.dropped
        return j


# ---------------------------------------------------------------------------------------------
# Topology: daemon roles and the three looping jobs.

def daemon_layout(n):
    """Roles of n (3 or 4) daemons: d0 the tree's root (also serves a flat job), leaves with
    --parent d0, the last one flat. Returns [{name, parent}]."""
    if n == 4:
        return [{"name": "d0-root", "parent": None}, {"name": "d1-leaf", "parent": 0},
                {"name": "d2-leaf", "parent": 0}, {"name": "d3-flat", "parent": None}]
    return [{"name": "d0-root", "parent": None}, {"name": "d1-leaf", "parent": 0},
            {"name": "d2-flat", "parent": None}]


class JobSpec:
    """A job loops: one driver invocation after another. `aggs(r)` lists the daemon indices
    of rank r's CONFLUX_AGGREGATORS (a tree job: its leaf)."""

    def __init__(self, name, nranks, aggs, args, what):
        self.name, self.nranks, self.aggs, self.args, self.what = name, nranks, aggs, args, what
        self.iters = int(args[args.index("-n") + 1])
        self.warmup = int(args[args.index("-w") + 1])


def job_specs(n_daemons):
    flat = n_daemons - 1
    leaves = [1, 2] if n_daemons == 4 else [1, 1]
    return [
        JobSpec("striped", 2, lambda r: [0, flat],
                ["--modes", "collnet", "-b", "256K", "-e", "2M", "-f", "8", "-d", "float,bf16",
                 "-o", "sum,max", "-n", "10", "-w", "1", "--chunk-bytes", "256K"],
                f"2 ranks striped over d0 and d{flat}, collnet, 256 KiB-2 MiB float/bf16 sum/max"),
        JobSpec("tree", 4, lambda r: [leaves[r // 2]],
                ["--modes", "collnet", "-b", "4K", "-e", "256K", "-f", "64", "-d", "int32,half",
                 "-o", "sum,min", "-n", "10", "-w", "1", "--chunk-bytes", "64K"],
                "4 ranks through the tree (ranks 0-1 under d1, 2-3 under "
                f"d{leaves[1]}; root d0), collnet, 4-256 KiB int32/half sum/min"),
        JobSpec("hybrid", 3, lambda r: [flat],
                ["--modes", "hybrid", "--ring-fraction", "0.5", "-b", "64K", "-e", "1M", "-f",
                 "16", "-d", "double,int8", "-o", "sum,prod", "-n", "10", "-w", "1"],
                f"3 ranks on d{flat}, hybrid (half over the ring), 64 KiB-1 MiB double/int8 "
                "sum/prod"),
    ]


EXTRA_DTYPES = ["float", "int32", "uint8", "bf16", "double", "half", "f8e4m3", "int64"]
EXTRA_OPS = ["sum", "max", "min", "prod"]


def extra_job_spec(params):
    """The short job of a job_join_leave fault (its parameters come from the schedule)."""
    return JobSpec(f"extra@d{params['daemon']}", 2, lambda r: [params["daemon"]],
                   ["--modes", "collnet", "-b", "4", "-e", params["max"], "-f", "32", "-d",
                    params["dtype"], "-o", params["op"], "-n", str(params["iters"]), "-w", "1"],
                   "short job")


# ---------------------------------------------------------------------------------------------
# The schedule (seeded, computed up front: same seed and flags, same schedule).

def make_schedule(seed, duration, n_daemons, gap_min, gap_max, kinds, n_jobs, never_kill=()):
    rng = random.Random(seed)
    busy_until = [0.0] * n_daemons  # daemon faults are exclusive per daemon
    flat = [0, n_daemons - 1]  # daemons a flat (non-tree) job may join
    out = []
    t = rng.uniform(gap_min, gap_max) + 5.0  # the jobs' first joins come first
    end = duration - 5.0
    choices = [k for k in FAULT_KINDS if k.name in kinds]
    while t < end:
        kind = rng.choices(choices, weights=[k.weight for k in choices])[0]
        free = [d for d in range(n_daemons) if busy_until[d] <= t
                and not (kind.name == "daemon_kill" and d in never_kill)]
        if kind.on_daemon and not free:
            job_kinds = [k for k in choices if not k.on_daemon]
            if not job_kinds:
                t += rng.uniform(gap_min, gap_max)
                continue
            kind = rng.choice(job_kinds)
        params = {}
        if kind.on_daemon:
            d = rng.choice(free)
            target = f"d{d}"
            if kind.name == "daemon_kill":
                params["restart_after"] = round(rng.uniform(0.5, 3.0), 2)
                busy = params["restart_after"] + 3.0
            elif kind.name == "daemon_stop":
                params["for"] = round(rng.uniform(1.0, 15.0), 2)
                busy = params["for"] + 1.0
            elif kind.name == "loss_burst":
                params["percent"] = rng.randint(1, 20)
                params["for"] = round(rng.uniform(2.0, 8.0), 2)
                busy = params["for"] + 0.5
            elif kind.name == "drain":
                params["for"] = round(rng.uniform(2.0, 10.0), 2)
                busy = params["for"] + 0.5
            else:  # throttle
                params["max_mbps"] = rng.choice([20, 50, 100, 200, 500])
                params["for"] = round(rng.uniform(3.0, 12.0), 2)
                busy = params["for"] + 0.5
            busy_until[d] = t + busy
        elif kind.name == "rank_kill":
            j = rng.randrange(n_jobs)
            target = f"job{j}"
            params["rank"] = rng.randrange(4)  # modulo the job's ranks at fire time
            params["after"] = round(rng.uniform(0.5, 3.0), 2)  # into a running invocation
        else:  # job_join_leave
            params["daemon"] = rng.choice(flat)
            params["dtype"] = rng.choice(EXTRA_DTYPES)
            params["op"] = rng.choice(EXTRA_OPS)
            params["max"] = rng.choice(["64K", "256K", "1M"])
            params["iters"] = rng.randint(3, 10)
            target = f"d{params['daemon']}"
        out.append(Fault(round(t, 2), kind.name, target, params))
        t += rng.uniform(gap_min, gap_max)
    return out


def schedule_digest(schedule):
    text = "\n".join(f.describe() for f in schedule)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# Small helpers.

def now():
    return time.monotonic()


def parse_ready(path):
    kv = {}
    with open(path) as f:
        for line in f:
            if "=" in line:
                k, v = line.strip().split("=", 1)
                kv[k] = v
    return kv


def proc_sample(pid):
    """(RSS kB, open fds, threads) of a live process, or None."""
    try:
        rss = threads = None
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
                elif line.startswith("Threads:"):
                    threads = int(line.split()[1])
        fds = len(os.listdir(f"/proc/{pid}/fd"))
        return rss, fds, threads
    except (OSError, ValueError):
        return None


def children_of(pid):
    """Direct children of pid, in the order the kernel lists them (creation order)."""
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def log(msg):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# nftables: one table of our own for the loss bursts, always deleted on the way out.

class Nft:
    def __init__(self, table):
        self.table = table
        self.created = False

    @staticmethod
    def usable():
        if shutil.which("nft") is None:
            return "nft not found"
        r = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True)
        if r.returncode != 0:
            return f"nft list tables failed: {r.stderr.strip()}"
        return ""

    def run(self, *args, check=True):
        r = subprocess.run(["nft", *args], capture_output=True, text=True, timeout=10)
        if check and r.returncode != 0:
            raise RuntimeError(f"nft {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def create(self):
        self.run("delete", "table", "inet", self.table, check=False)  # a stale one of ours
        self.run("add", "table", "inet", self.table)
        self.created = True
        self.run("add", "chain", "inet", self.table, "input",
                 "{ type filter hook input priority -150 ; policy accept ; }")

    def add_loss(self, ports, percent):
        """Two rules (datagrams to the ports, and from them: the results); returns handles."""
        handles = []
        pset = "{ " + ", ".join(str(p) for p in ports) + " }"
        for direction in ("dport", "sport"):
            out = self.run("--echo", "--handle", "add", "rule", "inet", self.table, "input",
                           "iifname", "lo", "udp", direction, pset, "numgen", "random", "mod",
                           "100", "<", str(percent), "counter", "drop")
            m = re.search(r"# handle (\d+)", out)
            if m:
                handles.append(int(m.group(1)))
        return handles

    def dropped(self, handles):
        """Datagrams the rules with these handles dropped so far (their counters)."""
        out = self.run("--handle", "list", "chain", "inet", self.table, "input", check=False)
        n = 0
        for m in re.finditer(r"counter packets (\d+) bytes \d+ drop # handle (\d+)", out):
            if int(m.group(2)) in handles:
                n += int(m.group(1))
        return n

    def delete_rules(self, handles):
        for h in handles:
            self.run("delete", "rule", "inet", self.table, "input", "handle", str(h),
                     check=False)

    def destroy(self):
        if self.created:
            self.run("delete", "table", "inet", self.table, check=False)
            self.created = False


# ---------------------------------------------------------------------------------------------
# Daemons.

class Incarnation:
    """One process lifetime of a daemon, with its /proc samples."""

    def __init__(self, n, pid, started):
        self.n, self.pid, self.started = n, pid, started
        self.samples = []  # (t since run start, rss kB, fds, threads)
        self.ended = None  # t since run start
        self.end_reason = None  # "harness SIGKILL", "SIGTERM at end: exit 0", "crash: ..."


class Daemon:
    def __init__(self, idx, role, run):
        self.idx, self.name, self.parent = idx, role["name"], role["parent"]
        self.run = run
        self.proc = None
        self.control_port = self.metrics_port = 0
        self.data_ports = []
        self.incarnations = []
        self.stopped = False
        self.expect_exit = False  # we sent the signal that ends it

    def endpoint(self):
        return f"127.0.0.1:{self.control_port}"

    def metrics(self):
        return f"127.0.0.1:{self.metrics_port}"

    def start(self, reuse_ports=False):
        """Starts an incarnation and waits for its ready file. With reuse_ports, binds the
        control and metrics ports of the previous one (retries: a port may linger a moment)."""
        a = self.run.args
        ready = os.path.join(self.run.workdir, f"{self.name}.ready")
        inc_n = len(self.incarnations)
        attempts = 20 if reuse_ports else 1
        for attempt in range(attempts):
            if os.path.exists(ready):
                os.unlink(ready)
            cport = str(self.control_port) if reuse_ports else "0"
            mport = str(self.metrics_port) if reuse_ports else "0"
            argv = [a.confluxd, "--listen", "127.0.0.1", "--control-port", cport,
                    "--data-port", "0", "--metrics-port", mport, "--ready-file", ready,
                    "--log-level", "warn", "--threads", str(a.agg_threads)]
            if self.parent is not None:
                argv += ["--parent", self.run.daemons[self.parent].endpoint()]
            argv += a.agg_arg
            logf = open(os.path.join(self.run.workdir, f"{self.name}.{inc_n}.log"), "ab")
            self.proc = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
            logf.close()
            deadline = now() + 10
            while now() < deadline and self.proc.poll() is None and not os.path.exists(ready):
                time.sleep(0.02)
            if os.path.exists(ready):
                break
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            if attempt + 1 == attempts:
                raise RuntimeError(f"{self.name} did not become ready (see its log in "
                                   f"{self.run.workdir})")
            time.sleep(0.25)
        kv = parse_ready(ready)
        self.control_port = int(kv["control_port"])
        self.metrics_port = int(kv["metrics_port"])
        self.data_ports = [int(p) for p in kv["data_ports"].split(",") if p]
        self.stopped = False
        self.expect_exit = False
        self.incarnations.append(Incarnation(inc_n, self.proc.pid, self.run.elapsed()))

    def current(self):
        return self.incarnations[-1] if self.incarnations else None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def sample(self):
        if self.alive():
            s = proc_sample(self.proc.pid)
            if s and s[0] is not None:
                self.current().samples.append((round(self.run.elapsed(), 2), *s))

    def kill(self):
        self.expect_exit = True
        if self.alive():
            self.proc.kill()
        self.proc.wait()
        inc = self.current()
        inc.ended, inc.end_reason = self.run.elapsed(), "harness SIGKILL"
        self.stopped = False

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)
            self.stopped = sig == signal.SIGSTOP

    def check_unexpected_exit(self):
        """A daemon that ended without our signal: a crash. Returns a description or None."""
        if self.proc is None or self.expect_exit or self.proc.poll() is None:
            return None
        rc = self.proc.returncode
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        inc = self.current()
        inc.ended, inc.end_reason = self.run.elapsed(), f"crash: {how}"
        return f"{self.name} (pid {self.proc.pid}) ended on its own: {how}"

    def terminate(self, timeout=15):
        """SIGTERM at the end of the run; must exit 0. Returns "" or the problem."""
        if self.proc is None:
            return ""
        inc = self.current()
        if self.proc.poll() is not None:
            return ""  # already accounted (a crash)
        self.expect_exit = True
        os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.terminate()
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            inc.ended, inc.end_reason = self.run.elapsed(), "no exit within 15 s of SIGTERM"
            return f"{self.name}: still running {timeout} s after SIGTERM (killed)"
        inc.ended = self.run.elapsed()
        if rc == 0:
            inc.end_reason = "SIGTERM at end: exit 0"
            return ""
        how = f"killed by signal {-rc}" if rc < 0 else f"exit status {rc}"
        inc.end_reason = f"SIGTERM at end: {how}"
        return f"{self.name}: {how} after SIGTERM (expected 0)"


# ---------------------------------------------------------------------------------------------
# Jobs: one driver invocation at a time, its stdout read by a thread that stamps each line.

ROW = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")


class Invocation:
    def __init__(self, job, n, proc, started, logpath, errpath):
        self.job, self.n, self.proc, self.started = job, n, proc, started
        self.logpath, self.errpath = logpath, errpath
        self.events = []  # run-relative times of progress (a verified row)
        self.rows = 0
        self.collectives = 0
        self.wrong = 0
        self.error_wrong = 0
        self.modes = []
        self.declined = 0
        self.verified = False
        self.rank_killed = None  # (rank, pid) when the harness killed one
        self.stopped_at_end = False
        self.hung = False
        self.ended = None
        self.rc = None
        self.outcome = None
        self.reason = ""
        self.failovers = 0
        self.lock = threading.Lock()

    def reader(self, stream, run):
        with open(self.logpath, "w") as out:
            for line in stream:
                t = run.elapsed()
                out.write(f"{t:9.3f} {line}")
                out.flush()
                with self.lock:
                    self.parse(line, t)
        stream.close()

    def parse(self, line, t):
        m = ROW.match(line)
        if m:
            self.rows += 1
            self.collectives += self.job.spec.iters + self.job.spec.warmup + 1
            self.wrong += int(m.group(8))
            self.events.append(t)
            return
        if line.startswith("# mode: "):
            self.modes.append(line.split()[2])
        elif "CollNet declined" in line:
            self.declined += 1
        elif line.startswith("verified: all results correct"):
            self.verified = True
        else:
            m = re.match(r"# error: (\d+) wrong elements", line)
            if m:
                self.error_wrong = int(m.group(1))

    def classify(self):
        """Outcome: ok | rank_killed | stopped_at_end | declined | hang | wrong | failed."""
        err = ""
        try:
            with open(self.errpath, errors="replace") as f:
                err = f.read()
        except OSError:
            pass
        self.failovers = len(re.findall(r"^\[0\].*aggregators failed", err, re.M))
        wrong = max(self.wrong, self.error_wrong)
        first_error = ""
        for line in err.splitlines():
            if "error:" in line or "NCCL would hang" in line or "timeout" in line.lower():
                first_error = line.strip()[:300]
                break
        out = ""
        try:
            with open(self.logpath, errors="replace") as f:
                out = f.read()
        except OSError:
            pass
        if wrong:
            self.outcome, self.reason = "wrong", f"{wrong} wrong elements"
        elif self.hung or "--timeout exceeded" in err or self.rc == 4:
            self.outcome, self.reason = "hang", first_error or "harness limit reached"
        elif self.rc == 0 and self.verified:
            self.outcome = "ok"
        elif self.rank_killed:
            self.outcome = "rank_killed"
            self.reason = f"rank {self.rank_killed[0]} (pid {self.rank_killed[1]}) SIGKILLed"
        elif self.stopped_at_end:
            self.outcome, self.reason = "stopped_at_end", "run over"
        elif "NCCL would hang" in out + err:
            self.outcome, self.reason = "failed", first_error or "NCCL would hang"
        elif self.declined and "no AllReduce was run" in out:
            self.outcome = "declined"
            self.reason = "CollNet declined on every rank (no aggregator usable at connect)"
        else:
            self.outcome = "failed"
            self.reason = first_error or f"exit {self.rc}"
        return self.outcome


class Job:
    def __init__(self, idx, spec, run, looping=True):
        self.idx, self.spec, self.run, self.looping = idx, spec, run, looping
        self.inv = None
        self.history = []
        self.next_start = 0.0

    def env(self):
        e = dict(os.environ)
        ds = self.run.daemons
        e.update({"CONFLUX_SOCKET_IFNAME": "lo", "NCCL_DEBUG": "WARN"})
        e["CONFLUX_AGGREGATORS"] = ",".join(ds[i].endpoint() for i in self.spec.aggs(0))
        for r in range(self.spec.nranks):
            e[f"CONFLUX_DRIVER_AGGREGATORS_{r}"] = ",".join(ds[i].endpoint()
                                                            for i in self.spec.aggs(r))
        return e

    def start(self):
        a = self.run.args
        n = len(self.history)
        tag = self.spec.name.replace("@", "-")
        logpath = os.path.join(self.run.workdir, f"job-{tag}.{n}.out")
        errpath = os.path.join(self.run.workdir, f"job-{tag}.{n}.err")
        seed = self.run.rng_inputs.randrange(1, 1 << 30)
        argv = [a.driver, "--plugin", a.plugin, "--nranks", str(self.spec.nranks),
                "--check-iters", "--idle-sleep-us", "50", "--timeout", str(a.job_timeout),
                "--seed", str(seed)] + self.spec.args
        errf = open(errpath, "wb")
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=errf,
                                stdin=subprocess.DEVNULL, env=self.env(), text=True,
                                start_new_session=True)
        errf.close()
        self.inv = Invocation(self, n, proc, self.run.elapsed(), logpath, errpath)
        self.inv.thread = threading.Thread(target=self.inv.reader, args=(proc.stdout, self.run),
                                           daemon=True)
        self.inv.thread.start()
        self.history.append(self.inv)

    def running(self):
        return self.inv is not None and self.inv.proc.poll() is None

    def kill_group(self):
        try:
            os.killpg(self.inv.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def poll(self):
        """Called every tick: finishes an invocation that ended, enforces the hard limit, starts
        the next one. Returns the finished invocation or None."""
        if self.inv is None:
            if self.looping and not self.run.ending and self.run.elapsed() >= self.next_start:
                self.start()
            return None
        inv = self.inv
        if inv.proc.poll() is None:
            if self.run.elapsed() - inv.started > self.run.args.job_timeout + 45:
                inv.hung = True
                self.kill_group()
            return None
        inv.rc = inv.proc.returncode
        inv.ended = self.run.elapsed()
        self.kill_group()  # ranks the driver left behind (it kills them itself within 5 s)
        inv.thread.join(10)
        inv.classify()
        self.inv = None
        # A declined connect ends an invocation at once: wait a little before joining again,
        # as a scheduler would before the next job (no tight loop while a daemon drains).
        self.next_start = self.run.elapsed() + (1.0 if inv.outcome == "declined" else 0.2)
        return inv


# ---------------------------------------------------------------------------------------------
# The run.

class Run:
    def __init__(self, args):
        self.args = args
        self.t0 = now()
        self.workdir = args.workdir
        self.daemons = []
        self.jobs = []
        self.extras = []
        self.rng_inputs = random.Random(args.seed * 7919 + 1)
        self.nft = None
        self.loss_rules = {}  # daemon idx -> handles
        self.undo = []  # heap of (t, seq, description, fn)
        self.rank_kills = []  # (fault, deadline): rank_kill faults waiting for their job
        self.dropped_total = 0  # datagrams the loss bursts dropped
        self.seq = 0
        self.ending = False
        self.problems = []  # strings: anything that fails the run
        self.crashes = []
        self.fault_counts = {k.name: {"fired": 0, "skipped": 0} for k in FAULT_KINDS}
        self.fault_log = []

    def elapsed(self):
        return now() - self.t0

    def later(self, delay, what, fn, tries=5):
        """Runs fn (the end of a fault) in delay seconds; retried every second if it fails
        (e.g. the CLI timed out on a loaded machine), a problem after `tries` failures."""
        self.seq += 1
        heapq.heappush(self.undo, (self.elapsed() + delay, self.seq, what, (fn, tries)))

    # --- faults -------------------------------------------------------------------------------

    def cli(self, *args):
        r = subprocess.run([self.args.cli, *args, "--timeout-ms", "3000"], capture_output=True,
                           text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"conflux {' '.join(args)}: exit {r.returncode}: "
                               f"{(r.stdout + r.stderr).strip()[:300]}")

    def fire(self, f):
        try:
            self.fire_inner(f)
        except Exception as e:  # a fault that could not be applied is noted, not fatal
            f.outcome = f"skipped: {e}"
        if f.outcome != "waiting":
            self.account(f)

    def account(self, f):
        ok = f.outcome == "fired"
        self.fault_counts[f.kind]["fired" if ok else "skipped"] += 1
        self.fault_log.append(f)
        log(f"fault {f.describe()} -> {f.outcome}")

    def fire_inner(self, f):
        p = f.params
        if KIND_BY_NAME[f.kind].on_daemon:
            d = self.daemons[int(f.target[1:])]
            if not d.alive():
                f.outcome = "skipped: daemon not running"
                return
        if f.kind == "daemon_kill":
            d.kill()

            def restart(d=d):
                d.start(reuse_ports=True)
                log(f"{d.name} restarted (pid {d.proc.pid}, control {d.control_port})")
            self.later(p["restart_after"], f"restart {d.name}", restart)
        elif f.kind == "daemon_stop":
            d.signal(signal.SIGSTOP)
            self.later(p["for"], f"SIGCONT {d.name}",
                       lambda d=d: d.signal(signal.SIGCONT))
        elif f.kind == "loss_burst":
            handles = self.nft.add_loss(d.data_ports, p["percent"])
            self.loss_rules[d.idx] = handles

            def end_loss(d=d, handles=handles, f=f):
                f.dropped = self.nft.dropped(handles)
                self.dropped_total += f.dropped
                log(f"loss burst on {d.name} over: {f.dropped} datagrams dropped")
                self.nft.delete_rules(handles)
                self.loss_rules.pop(d.idx, None)
            self.later(p["for"], f"end loss on {d.name}", end_loss)
        elif f.kind == "drain":
            self.cli("drain", d.metrics())
            self.later(p["for"], f"undrain {d.name}", lambda d=d: self.cli("undrain", d.metrics()))
        elif f.kind == "throttle":
            self.cli("throttle", d.metrics(), "--max-mbps", str(p["max_mbps"]))
            self.later(p["for"], f"unthrottle {d.name}",
                       lambda d=d: self.cli("throttle", d.metrics(), "--max-mbps", "0"))
        elif f.kind == "rank_kill":
            # Fired from the loop once the job runs an invocation `after` seconds old with
            # all its ranks forked (at most 8 s later); other faults go on meanwhile.
            f.outcome = "waiting"
            self.rank_kills.append((f, self.elapsed() + 8.0))
            return
        elif f.kind == "job_join_leave":
            job = Job(100 + len(self.extras), extra_job_spec(p), self, looping=False)
            job.start()
            self.extras.append(job)
        f.outcome = "fired"

    def try_rank_kills(self, give_up=False):
        waiting = []
        for f, deadline in self.rank_kills:
            job = self.jobs[int(f.target[3:])]
            if job.running() and self.elapsed() - job.inv.started >= f.params["after"]:
                ranks = children_of(job.inv.proc.pid)
                if len(ranks) == job.spec.nranks:
                    r = f.params["rank"] % job.spec.nranks
                    os.kill(ranks[r], signal.SIGKILL)
                    job.inv.rank_killed = (r, ranks[r])
                    f.outcome = "fired"
                    self.account(f)
                    continue
            if give_up or self.elapsed() >= deadline:
                f.outcome = "skipped: no invocation running long enough within 8 s"
                self.account(f)
                continue
            waiting.append((f, deadline))
        self.rank_kills = waiting

    # --- the loop -----------------------------------------------------------------------------

    def run_undo_due(self, force=False):
        while self.undo and (force or self.undo[0][0] <= self.elapsed()):
            _, _, what, (fn, tries) = heapq.heappop(self.undo)
            try:
                fn()
            except Exception as e:
                msg = f"{what} failed: {e}"
                log(msg)
                if tries > 1 and not force:
                    self.later(1.0, what, fn, tries - 1)
                else:
                    self.problems.append(msg)

    def tick_jobs(self):
        for job in self.jobs + [j for j in self.extras if j.inv is not None]:
            inv = job.poll()
            if inv is not None:
                self.report_invocation(inv)

    def report_invocation(self, inv):
        spec = inv.job.spec
        line = (f"{spec.name} #{inv.n}: {inv.outcome} after {inv.ended - inv.started:.1f} s, "
                f"{inv.rows} rows, {inv.collectives} collectives")
        if inv.failovers:
            line += f", failover to the ring on rank 0 x{inv.failovers}"
        if inv.reason:
            line += f" ({inv.reason})"
        log(line)
        if inv.outcome in ("wrong", "hang"):
            self.problems.append(f"{spec.name} #{inv.n}: {inv.outcome}: {inv.reason} "
                                 f"(logs {inv.logpath}, {inv.errpath})")
        elif inv.outcome == "failed" and not self.args.allow_job_errors:
            self.problems.append(f"{spec.name} #{inv.n}: unexplained failure: {inv.reason} "
                                 f"(logs {inv.logpath}, {inv.errpath})")

    def check_daemons(self):
        for d in self.daemons:
            msg = d.check_unexpected_exit()
            if msg:
                log("CRASH: " + msg)
                self.crashes.append(msg)
                self.problems.append(msg)
                d.start(reuse_ports=True)  # keep the soak going

    def main(self, schedule):
        a = self.args
        for i, role in enumerate(daemon_layout(a.daemons)):
            self.daemons.append(Daemon(i, role, self))
        for d in self.daemons:
            d.start()
            log(f"{d.name}: pid {d.proc.pid}, control {d.control_port}, metrics "
                f"{d.metrics_port}, data {d.data_ports}"
                + (f", parent {self.daemons[d.parent].endpoint()}" if d.parent is not None
                   else ""))
        for i, spec in enumerate(job_specs(a.daemons)):
            self.jobs.append(Job(i, spec, self))
            log(f"job{i} {spec.name}: {spec.what}")
        pending = list(schedule)
        next_sample = 0.0
        while self.elapsed() < a.duration:
            self.run_undo_due()
            while pending and pending[0].t <= self.elapsed():
                self.fire(pending.pop(0))
            self.try_rank_kills()
            self.tick_jobs()
            self.check_daemons()
            if self.elapsed() >= next_sample:
                for d in self.daemons:
                    d.sample()
                next_sample = self.elapsed() + a.sample_every
            time.sleep(0.05)
        self.finish()

    def finish(self):
        """Ends the faults, lets each job finish its current invocation (or stops it), waits
        for the daemons to settle and samples them a last time."""
        self.ending = True
        log("run over: undoing the faults still in effect, letting the jobs finish")
        self.try_rank_kills(give_up=True)
        self.run_undo_due(force=True)
        deadline = self.elapsed() + self.args.finish_grace
        while any(j.inv is not None for j in self.jobs + self.extras):
            if self.elapsed() > deadline:
                for j in self.jobs + self.extras:
                    if j.running():
                        j.inv.stopped_at_end = True
                        j.kill_group()
            self.tick_jobs()
            self.check_daemons()
            time.sleep(0.1)
        self.settle()

    def settle(self, quiet_s=3.0, limit_s=20.0):
        """Waits until every daemon's fd count has stayed the same for quiet_s (connections
        of the last jobs closing), then takes the last samples."""
        t_end = self.elapsed() + limit_s
        last, since = None, self.elapsed()
        while self.elapsed() < t_end:
            cur = [proc_sample(d.proc.pid) if d.alive() else None for d in self.daemons]
            fds = [c[1] if c else None for c in cur]
            if fds != last:
                last, since = fds, self.elapsed()
            elif self.elapsed() - since >= quiet_s:
                break
            time.sleep(0.25)
        for d in self.daemons:
            d.sample()

    def cleanup(self):
        """Always: jobs killed, daemons continued and SIGTERMed (must exit 0), nft table gone."""
        for j in self.jobs + self.extras:
            if j.running():
                j.inv.stopped_at_end = True
                j.kill_group()
            if j.inv is not None:  # interrupted: account for the invocation all the same
                inv = j.inv
                inv.rc = inv.proc.wait()
                inv.ended = self.elapsed()
                inv.thread.join(5)
                inv.classify()
                j.inv = None
        if self.nft is not None:
            self.nft.destroy()
        for d in self.daemons:
            problem = d.terminate()
            if problem:
                log(problem)
                self.problems.append(problem)
                self.crashes.append(problem)


# ---------------------------------------------------------------------------------------------
# Report.

def longest_stall(run, t_from, t_to):
    """Longest interval in [t_from, t_to] in which no job made progress (a verified row)."""
    events = sorted([t_from, t_to] + [e for j in run.jobs + run.extras for inv in j.history
                                      for e in inv.events if t_from <= e <= t_to])
    best, at = 0.0, t_from
    for a, b in zip(events, events[1:]):
        if b - a > best:
            best, at = b - a, a
    return best, at


def job_longest_gap(job):
    """Longest gap between a job's progress events inside one invocation, its start and end
    included (a job that is being set up or stalled makes no progress)."""
    best = 0.0
    for inv in job.history:
        if inv.ended is None:
            continue
        pts = [inv.started] + inv.events + ([inv.ended] if inv.outcome == "ok" else [])
        for a, b in zip(pts, pts[1:]):
            best = max(best, b - a)
    return best


def growth(first, last):
    return (last - first) / first * 100.0 if first else 0.0


def daemon_report(run, warmup, max_rss, max_fd):
    out, problems = [], []
    for d in run.daemons:
        for inc in d.incarnations:
            whole = (inc.n == 0 and len(d.incarnations) == 1
                     and inc.end_reason == "SIGTERM at end: exit 0")
            after = [s for s in inc.samples if s[0] - inc.started >= warmup]
            r = {"daemon": d.name, "incarnation": inc.n, "pid": inc.pid,
                 "started_s": round(inc.started, 1),
                 "ended_s": round(inc.ended, 1) if inc.ended is not None else None,
                 "end": inc.end_reason, "whole_run": whole, "samples": len(inc.samples),
                 "rss_kb_max": max((s[1] for s in inc.samples), default=None),
                 "samples_t_rss_fds_threads": [list(s) for s in inc.samples]}
            if len(after) >= 2:
                f, l = after[0], after[-1]
                r.update({"first_after_warmup": {"t": f[0], "rss_kb": f[1], "fds": f[2],
                                                 "threads": f[3]},
                          "last": {"t": l[0], "rss_kb": l[1], "fds": l[2], "threads": l[3]},
                          "rss_growth_pct": round(growth(f[1], l[1]), 2),
                          "fd_growth_pct": round(growth(f[2], l[2]), 2),
                          "thread_growth": l[3] - f[3]})
                if whole and r["rss_growth_pct"] > max_rss:
                    problems.append(f"{d.name}: RSS grew {r['rss_growth_pct']} % after warm-up "
                                    f"({f[1]} -> {l[1]} kB)")
                if whole and r["fd_growth_pct"] > max_fd:
                    problems.append(f"{d.name}: open fds grew {r['fd_growth_pct']} % after "
                                    f"warm-up ({f[2]} -> {l[2]})")
            out.append(r)
    return out, problems


def summarize(run, schedule, digest):
    a = run.args
    invs = [inv for j in run.jobs + run.extras for inv in j.history]
    by_job = []
    for j in run.jobs + [None]:
        group = j.history if j else [i for e in run.extras for i in e.history]
        counts = {}
        for inv in group:
            counts[inv.outcome] = counts.get(inv.outcome, 0) + 1
        by_job.append({
            "job": j.spec.name if j else "extra (join/leave)",
            "what": j.spec.what if j else "2 ranks on d0 or the flat daemon, short",
            "invocations": len(group), "outcomes": counts,
            "collectives": sum(i.collectives for i in group),
            "wrong": sum(max(i.wrong, i.error_wrong) for i in group),
            "failovers_rank0": sum(i.failovers for i in group),
            "declined_modes": sum(1 for i in group if i.declined),
            "longest_gap_s": round(max([job_longest_gap(x) for x in
                                        ([j] if j else run.extras)] or [0]), 2),
            "failures": [{"job": i.job.spec.name, "invocation": i.n, "outcome": i.outcome,
                          "reason": i.reason,
                          "log": i.logpath} for i in group if i.outcome not in ("ok",)],
        })
    stall, stall_at = longest_stall(run, min(10.0, a.duration), a.duration)
    daemons, growth_problems = daemon_report(run, a.warmup, a.max_rss_growth, a.max_fd_growth)
    problems = run.problems + growth_problems
    return {
        "format": "conflux-chaos/1", "seed": a.seed, "duration_s": a.duration,
        "never_kill": a.never_kill, "kinds": a.kinds, "gap_s": [a.gap_min, a.gap_max],
        "elapsed_s": round(run.elapsed(), 1), "daemons": a.daemons,
        "schedule_sha256_16": digest, "workdir": run.workdir,
        "faults": {k: v for k, v in run.fault_counts.items()},
        "faults_fired": sum(v["fired"] for v in run.fault_counts.values()),
        "loss_datagrams_dropped": run.dropped_total,
        "collectives": sum(i.collectives for i in invs),
        "wrong_elements": sum(max(i.wrong, i.error_wrong) for i in invs),
        "invocations": len(invs), "jobs": by_job,
        "longest_stall_s": round(stall, 2), "longest_stall_at_s": round(stall_at, 1),
        "daemon_resources": daemons, "crashes": run.crashes,
        "problems": problems, "passed": not problems,
        "fault_log": [f.to_json() for f in schedule],
    }


def print_report(s):
    print()
    print(f"== conflux chaos soak: seed {s['seed']}, {s['duration_s']:.0f} s "
          f"({s['elapsed_s']} s with set-up and finish), {s['daemons']} daemons, schedule "
          f"{s['schedule_sha256_16']}")
    print(f"{'fault':16s} {'fired':>6s} {'skipped':>8s}")
    for k, v in s["faults"].items():
        print(f"{k:16s} {v['fired']:6d} {v['skipped']:8d}")
    print(f"{'total':16s} {s['faults_fired']:6d}   (loss bursts dropped "
          f"{s['loss_datagrams_dropped']} datagrams)")
    print()
    print(f"{'job':20s} {'runs':>5s} {'ok':>5s} {'collectives':>12s} {'wrong':>6s} "
          f"{'failover':>9s} {'longest gap':>12s}  other outcomes")
    for j in s["jobs"]:
        oc = dict(j["outcomes"])
        ok = oc.pop("ok", 0)
        other = ", ".join(f"{k} {v}" for k, v in sorted(oc.items())) or "-"
        print(f"{j['job']:20s} {j['invocations']:5d} {ok:5d} {j['collectives']:12d} "
              f"{j['wrong']:6d} {j['failovers_rank0']:9d} {j['longest_gap_s']:11.1f}s  {other}")
    print(f"collectives completed and verified: {s['collectives']}, wrong elements: "
          f"{s['wrong_elements']}")
    print(f"longest stall (no job completed a row): {s['longest_stall_s']} s "
          f"(from t = {s['longest_stall_at_s']} s)")
    allowed = ("rank_killed", "declined", "stopped_at_end")
    fails = [f for j in s["jobs"] for f in j["failures"] if f["outcome"] not in allowed]
    if fails:
        print("invocations that failed without a harness cause (allowed: " + ", ".join(allowed)
              + "; all are in the JSON):")
        for f in fails:
            print(f"  {f['job']} #{f['invocation']}: {f['outcome']}: {f['reason']} ({f['log']})")
    print()
    print(f"{'daemon':9s} {'inc':>3s} {'alive (s)':>14s} {'RSS kB first->last':>22s} "
          f"{'growth':>7s} {'fds':>9s} {'growth':>7s} {'thr':>7s}  end")
    for r in s["daemon_resources"]:
        alive = f"{r['started_s']:.0f}-{r['ended_s']:.0f}" if r["ended_s"] is not None else \
            f"{r['started_s']:.0f}-"
        if "last" in r:
            f, l = r["first_after_warmup"], r["last"]
            print(f"{r['daemon']:9s} {r['incarnation']:3d} {alive:>14s} "
                  f"{f['rss_kb']:>10d}->{l['rss_kb']:<10d} {r['rss_growth_pct']:6.1f}% "
                  f"{f['fds']:>4d}->{l['fds']:<4d} {r['fd_growth_pct']:6.1f}% "
                  f"{f['threads']:>3d}->{l['threads']:<3d}  {r['end']}"
                  + ("  [whole run]" if r["whole_run"] else ""))
        else:
            none = "(no samples after the warm-up)"
            print(f"{r['daemon']:9s} {r['incarnation']:3d} {alive:>14s} {none:>40s}  {r['end']}")
    print()
    if s["problems"]:
        print("FAIL:")
        for p in s["problems"]:
            print(f"  - {p}")
    else:
        print("PASS: 0 wrong elements, no crash, no hang, no unexplained job failure, RSS and "
              "fds within bounds")
    print(f"logs: {s['workdir']}")
    nk = ",".join(str(d) for d in s["never_kill"])
    print(f"replay: {sys.argv[0]} --seed {s['seed']} --duration {s['duration_s']:g} "
          f"--daemons {s['daemons']} --never-kill '{nk}' (same schedule "
          f"{s['schedule_sha256_16']})")


# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    build = os.path.join(REPO, "build")
    kinds_help = "; ".join(f"{k.name}: {k.what}" for k in FAULT_KINDS)
    p = argparse.ArgumentParser(prog="conflux_chaos.py", description=__doc__.split("\n")[0],
                                epilog="Fault kinds: " + kinds_help)
    p.add_argument("--duration", type=float, default=1800, help="seconds of chaos (default 1800)")
    p.add_argument("--seed", type=int, default=1,
                   help="schedule seed: the same seed, --duration, --daemons, --gap-* and "
                   "--kinds give the same faults (kinds, targets, times, parameters)")
    p.add_argument("--daemons", type=int, default=4, choices=(3, 4),
                   help="confluxd processes: d0 root, leaves d1 (and d2), a flat one last")
    p.add_argument("--never-kill", default="last", metavar="LIST",
                   help="daemon indices daemon_kill leaves alone, comma-separated (default "
                   "last: the flat daemon lives the whole run, so that its RSS/fd growth is "
                   "checked; '' lets every daemon be killed). Part of the schedule")
    p.add_argument("--gap-min", type=float, default=2.0, help="least seconds between faults")
    p.add_argument("--gap-max", type=float, default=6.0, help="most seconds between faults")
    p.add_argument("--kinds", default=",".join(k.name for k in FAULT_KINDS),
                   help="comma-separated fault kinds to draw from")
    p.add_argument("--build", default=build, help="build dir (default: the repo's build/)")
    p.add_argument("--confluxd", help="confluxd binary (default BUILD/aggregator/confluxd)")
    p.add_argument("--cli", help="conflux CLI (default BUILD/aggregator/cli/conflux)")
    p.add_argument("--driver", help="conflux-nccl-driver (default BUILD/tools/driver/...)")
    p.add_argument("--plugin", help="libnccl-net-conflux.so (default BUILD/nccl_plugin/...)")
    p.add_argument("--agg-threads", type=int, default=2, help="confluxd --threads")
    p.add_argument("--agg-arg", action="append", default=[], metavar="ARG",
                   help="extra confluxd argument (repeatable), e.g. --agg-arg=--log-level=info")
    p.add_argument("--job-timeout", type=int, default=150,
                   help="driver --timeout of each invocation; the harness kills one 45 s later "
                   "and counts a hang")
    p.add_argument("--warmup", type=float, default=60,
                   help="seconds of a daemon incarnation before its growth baseline sample")
    p.add_argument("--sample-every", type=float, default=5, help="seconds between /proc samples")
    p.add_argument("--max-rss-growth", type=float, default=5.0, help="percent (default 5)")
    p.add_argument("--max-fd-growth", type=float, default=5.0, help="percent (default 5)")
    p.add_argument("--finish-grace", type=float, default=60,
                   help="seconds the jobs get to finish their invocation after --duration")
    p.add_argument("--allow-job-errors", action="store_true",
                   help="an invocation that failed without a harness cause (no rank killed, "
                   "not declined) is reported but does not fail the run")
    p.add_argument("--workdir", help="logs directory (default: a new /tmp/conflux-chaos.*)")
    p.add_argument("--json", metavar="FILE", help="write the summary (and the schedule) here")
    p.add_argument("--print-schedule", action="store_true",
                   help="print the schedule of this seed and exit (nothing is started)")
    a = p.parse_args(argv)
    a.confluxd = a.confluxd or os.path.join(a.build, "aggregator/confluxd")
    a.cli = a.cli or os.path.join(a.build, "aggregator/cli/conflux")
    a.driver = a.driver or os.path.join(a.build, "tools/driver/conflux-nccl-driver")
    a.plugin = a.plugin or os.path.join(a.build, "nccl_plugin/libnccl-net-conflux.so")
    a.never_kill = [a.daemons - 1 if x == "last" else int(x)
                    for x in a.never_kill.split(",") if x]
    a.kinds = [k for k in a.kinds.split(",") if k]
    for k in a.kinds:
        if k not in KIND_BY_NAME:
            p.error(f"unknown fault kind {k}")
    if not 0 < a.gap_min <= a.gap_max:
        p.error("need 0 < --gap-min <= --gap-max")
    return a


def main(argv):
    a = parse_args(argv)
    schedule = make_schedule(a.seed, a.duration, a.daemons, a.gap_min, a.gap_max, a.kinds,
                             len(job_specs(a.daemons)), a.never_kill)
    digest = schedule_digest(schedule)
    if a.print_schedule:
        for f in schedule:
            print(f.describe())
        print(f"# {len(schedule)} faults, schedule {digest}")
        return 0
    for path in (a.confluxd, a.cli, a.driver, a.plugin):
        if not os.path.exists(path):
            print(f"conflux_chaos: {path} not found (build it, or pass its path)", file=sys.stderr)
            return 2
    if "loss_burst" in a.kinds:
        why = Nft.usable()
        if why:
            if os.environ.get("CONFLUX_CI") == "1":
                print(f"conflux_chaos: FAIL: loss bursts need nftables: {why} (CONFLUX_CI=1)")
                return 1
            print(f"conflux_chaos: SKIP: loss bursts need nftables (root): {why}")
            return SKIP
    a.workdir = a.workdir or tempfile.mkdtemp(prefix="conflux-chaos.")
    os.makedirs(a.workdir, exist_ok=True)
    for name in os.listdir(a.workdir):  # an earlier run's logs in the same --workdir
        if re.match(r"^(d\d-\w+\.(\d+\.log|ready)|job-.*\.\d+\.(out|err))$", name):
            os.unlink(os.path.join(a.workdir, name))
    log(f"seed {a.seed}, {a.duration:g} s, {len(schedule)} faults scheduled (schedule {digest}),"
        f" logs in {a.workdir}")
    run = Run(a)

    def on_signal(sig, _frame):
        raise KeyboardInterrupt(f"signal {sig}")
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)  # also when started in the background (ignored)
    if signal.getsignal(signal.SIGHUP) != signal.SIG_IGN:  # nohup ignores it: keep that
        signal.signal(signal.SIGHUP, on_signal)
    interrupted = False
    try:
        if "loss_burst" in a.kinds:
            run.nft = Nft(f"conflux_chaos_{os.getpid()}")
            run.nft.create()
        run.main(schedule)
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: cleaning up")
    except Exception as e:
        run.problems.append(f"harness error: {type(e).__name__}: {e}")
        log(f"harness error: {e}")
        import traceback
        traceback.print_exc()
    finally:
        # Signals again during cleanup must not leave the nft table or daemons behind.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        run.run_undo_due(force=True)
        run.cleanup()
    if interrupted:
        run.problems.append("interrupted before the end")
    s = summarize(run, schedule, digest)
    print_report(s)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=1)
    return 0 if s["passed"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
