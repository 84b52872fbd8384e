#!/usr/bin/env python3
"""Eight (or N) jobs on one capped confluxd: does each get its weighted share? (issue 42, point 3)

Starts one confluxd on loopback (one dataplane thread, --max-mbps CAP; with weights, one tenant
per distinct weight, each with its own secret), then N CollNet jobs of 2 ranks each through
conflux-nccl-driver (1 MiB float sums, every result verified), one after the other so that the
daemon's job ids follow the start order. Every 0.5 s it reads each job's grant and achieved
result rate from /metrics (conflux_job_grant_mbps, conflux_job_result_mbps; the daemon samples
rates about once a second).

Scenarios (--scenario):
  equal     N jobs of weight 1
  weighted  N jobs of the weights --weights (default 4,2,1,1,...)
  churn     N-1 steady jobs of weight 1, and one more that joins for ~2 s and leaves, again
            and again (a new job each time)
  loss      N jobs of weight 1; the last one's ranks drop --loss of their aggregator datagrams
            (CONFLUX_FAULT_DROP: test builds), so it retransmits and cannot use all of its share

In the steady window (from --settle s after the last steady job started to the first steady
job's end) each sample's weighted share of job j is CAP * w_j / (sum of the weights of the jobs
holding a grant then, the churning job included while it does). Prints per job: mean achieved
rate, mean share, their ratio, and the grant; the verdict is whether every job that can use its
share (all but the lossy one) achieved within 10 % of it (ratio >= 0.9). Exit 1 if a job's
results were not all verified, or (with --strict) if a ratio is below 0.9.

  bench/fairshare/share_many_jobs.py [--build build] [--scenario equal] [--jobs 8] [--cap 800]
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
import urllib.request

CHURN_GAP = 4.0  # seconds between one churning job's exit and the next one's start

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        text = r.read().decode()
    out = {}
    for name in ("grant_mbps", "result_mbps", "share_weight", "unicast_resends_total"):
        for m in re.finditer(r'^conflux_job_%s\{job="(\d+)"[^}]*\} (\S+)$' % name, text, re.M):
            out.setdefault(int(m.group(1)), {})[name] = float(m.group(2))
    return out


class Daemon:
    def __init__(self, build, cap, tenants, work):
        self.work = work
        args = [os.path.join(build, "aggregator/confluxd"), "--listen", "127.0.0.1",
                "--control-port", "0", "--data-port", "0", "--metrics-port", "0",
                "--threads", "1", "--max-mbps", str(cap), "--max-jobs", "64",
                "--ready-file", os.path.join(work, "ready"), "--log-level", "warn"]
        if tenants:
            path = os.path.join(work, "tenants.toml")
            with open(path, "w") as f:
                for name, (secret, weight) in tenants.items():
                    f.write(f'[tenants.{name}]\nsecret = "{secret}"\nweight = {weight}\n')
            args += ["--config", path]
        self.log = open(os.path.join(work, "confluxd.log"), "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        ready = os.path.join(work, "ready")
        for _ in range(200):
            if os.path.exists(ready) and os.path.getsize(ready) > 0:
                break
            if self.proc.poll() is not None:
                sys.exit("confluxd exited: see " + self.log.name)
            time.sleep(0.05)
        keys = dict(line.strip().split("=", 1) for line in open(ready) if "=" in line)
        self.control, self.metrics = int(keys["control_port"]), int(keys["metrics_port"])

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


class Job:
    def __init__(self, name, weight, secret, iters, env_extra=None):
        self.name, self.weight, self.secret, self.iters = name, weight, secret, iters
        self.env_extra = env_extra or {}
        self.proc, self.out, self.id = None, None, None

    def start(self, build, daemon, work):
        env = dict(os.environ, CONFLUX_AGGREGATORS=f"127.0.0.1:{daemon.control}",
                   CONFLUX_SOCKET_IFNAME="lo", **self.env_extra)
        if self.secret:
            env["CONFLUX_SECRET"] = self.secret
        self.out = os.path.join(work, f"job-{self.name}.log")
        self.proc = subprocess.Popen(
            [os.path.join(build, "tools/driver/conflux-nccl-driver"),
             "--plugin", os.path.join(build, "nccl_plugin/libnccl-net-conflux.so"),
             "--nranks", "2", "--modes", "collnet", "--require-collnet", "-d", "float",
             "-o", "sum", "-b", "1M", "-e", "1M", "-n", str(self.iters), "-w", "1",
             "--timeout", "600"],
            stdout=open(self.out, "w"), stderr=subprocess.STDOUT, env=env)

    def verified(self):
        return "verified: all results correct" in open(self.out).read()


def wait_new_job(daemon, known, timeout=20):
    """The id of the first job in /metrics that is not in `known` (the one just started)."""
    end = time.time() + timeout
    while time.time() < end:
        new = [j for j in metrics(daemon.metrics) if j not in known]
        if new:
            return min(new)
        time.sleep(0.05)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--scenario", choices=["equal", "weighted", "churn", "loss"], default="equal")
    ap.add_argument("--jobs", type=int, default=8)
    ap.add_argument("--cap", type=int, default=800, help="the daemon's max_mbps")
    ap.add_argument("--weights", default="", help="weighted: comma-separated, one per job")
    ap.add_argument("--duration", type=float, default=30, help="seconds of steady state wanted")
    ap.add_argument("--settle", type=float, default=4, help="seconds ignored after the last start")
    ap.add_argument("--loss", type=float, default=0.05, help="loss: the lossy job's drop share")
    ap.add_argument("--strict", action="store_true", help="exit 1 when a share is missed")
    ap.add_argument("--json", help="write the per-job figures here")
    a = ap.parse_args()

    n = a.jobs
    if a.scenario == "weighted":
        weights = [int(w) for w in a.weights.split(",")] if a.weights else [4, 2] + [1] * (n - 2)
        if len(weights) != n:
            sys.exit("--weights needs one weight per job")
    else:
        weights = [1] * n
    steady = n - 1 if a.scenario == "churn" else n
    tenants, secret_of = {}, {}
    if a.scenario == "weighted":
        for w in sorted(set(weights)):
            tenants[f"w{w}"] = (f"bench-tenant-w{w}", w)
            secret_of[w] = f"bench-tenant-w{w}"
    work = tempfile.mkdtemp(prefix="conflux-share-many-")
    daemon = Daemon(a.build, a.cap, tenants, work)
    total_w = sum(weights[:steady])
    jobs = []
    for i in range(steady):
        share = a.cap * weights[i] / total_w  # Mbit/s while the steady jobs run
        # Enough 1 MiB iterations to run --duration + starts + settle at about the share (the
        # work-conserving daemon may give more); the window ends at the first exit anyway.
        # (result_mbps counts the results sent to both ranks: 2 x 8.389 Mbit per iteration.)
        iters = int((a.duration + a.settle + 0.5 * steady + 5) * share / 16.78) + 20
        extra = {}
        if a.scenario == "loss" and i == steady - 1:
            extra = {"CONFLUX_FAULT_DROP": str(a.loss)}
        jobs.append(Job(f"j{i}", weights[i], secret_of.get(weights[i]), iters, extra))
    samples, known = [], set()
    try:
        for job in jobs:
            job.start(a.build, daemon, work)
            job.id = wait_new_job(daemon, known)
            if job.id is None:
                sys.exit(f"job {job.name} never joined: see {job.out}")
            known.add(job.id)
        t_start = time.time()
        churn, churn_ids, churn_runs, churn_ended, churn_failed = None, set(), 0, 0.0, 0
        while all(j.proc.poll() is None for j in jobs):
            now = time.time() - t_start
            if a.scenario == "churn" and churn is not None and churn.proc.poll() is not None:
                churn_failed += not churn.verified()
                churn, churn_ended = None, now
            # A new churning job CHURN_GAP s after the last one left: its share is idle meanwhile.
            if a.scenario == "churn" and churn is None and now - churn_ended >= CHURN_GAP:
                churn = Job(f"churn{churn_runs}", 1, None, 25)
                churn_runs += 1
                churn.start(a.build, daemon, work)
            m = metrics(daemon.metrics)
            churn_ids |= {j for j in m if j not in known}
            samples.append((time.time() - t_start, m))
            time.sleep(0.5)
        t_end = time.time() - t_start
        for j in jobs:
            j.proc.wait(timeout=600)
        if churn is not None:
            churn.proc.wait(timeout=120)
            churn_failed += not churn.verified()
    finally:
        for j in jobs:
            if j.proc and j.proc.poll() is None:
                j.proc.kill()
        daemon.stop()

    weight_of = {j.id: j.weight for j in jobs}
    window = [(t, m) for t, m in samples if t >= a.settle and t <= t_end - 1]
    rows, ok = [], True
    for j in jobs:
        got, share, grant = [], [], []
        resends = max((m.get(j.id, {}).get("unicast_resends_total", 0) for _, m in samples),
                      default=0)
        for _, m in window:
            active = [k for k, v in m.items() if v.get("grant_mbps", 0) > 0]
            wsum = sum(weight_of.get(k, 1) for k in active)
            if j.id in m and wsum:
                got.append(m[j.id].get("result_mbps", 0))
                share.append(a.cap * j.weight / wsum)
                grant.append(m[j.id].get("grant_mbps", 0))
        mean = lambda v: sum(v) / len(v) if v else 0
        ratio = mean(got) / mean(share) if share else 0
        lossy = a.scenario == "loss" and j is jobs[-1]
        rows.append({"job": j.name, "id": j.id, "weight": j.weight, "lossy": lossy,
                     "achieved_mbps": round(mean(got), 1), "share_mbps": round(mean(share), 1),
                     "grant_mbps": round(mean(grant), 1), "ratio": round(ratio, 3),
                     "resends": int(resends),
                     "verified": j.verified()})
        ok &= j.verified()
    print(f"# {a.scenario}: {n} jobs, cap {a.cap} Mbit/s, steady window {len(window) / 2:.1f} s "
          f"({len(window)} samples){'; churning job runs: %d' % churn_runs if churn_runs else ''}")
    print(f"{'job':>6} {'weight':>6} {'achieved':>9} {'share':>7} {'ratio':>6} {'grant':>7} "
          f"{'resends':>7}  verified")
    for r in rows:
        note = " (lossy)" if r["lossy"] else ""
        print(f"{r['job']:>6} {r['weight']:>6} {r['achieved_mbps']:>9.1f} {r['share_mbps']:>7.1f} "
              f"{r['ratio']:>6.2f} {r['grant_mbps']:>7.1f} {r['resends']:>7}  "
              f"{'yes' if r['verified'] else 'NO'}{note}")
    # Churn: after each churning job leaves, how long until the steady jobs together use 95 % of
    # the cap again (its share lent to them), from the first sample without its grant.
    recoveries = []
    steady_ids = {j.id for j in jobs}
    present_before = False
    left_at = None
    for t, m in samples:
        present = any(k in churn_ids and v.get("grant_mbps", 0) > 0 for k, v in m.items())
        if present_before and not present:
            left_at = t
        if present and left_at is not None:
            recoveries.append(float("inf"))  # not back at 95 % before the next one joined
            left_at = None
        elif left_at is not None:
            used = sum(v.get("result_mbps", 0) for k, v in m.items() if k in steady_ids)
            if used >= 0.95 * a.cap:
                recoveries.append(t - left_at)
                left_at = None
        present_before = present
    if a.scenario == "churn":
        ok &= churn_failed == 0
        print(f"# churning jobs: {churn_runs} started, {churn_failed} not verified; after one left, "
              f"the others used >= 95 % of the cap within "
              + (", ".join(f"{r:.1f}" for r in recoveries) + " s" if recoveries else "(no sample)"))
    fair = [r for r in rows if not r["lossy"]]
    worst = min(r["ratio"] for r in fair)
    total = sum(r["achieved_mbps"] for r in rows)
    print(f"# worst ratio {worst:.2f} (goal >= 0.90 for every job that can use its share); "
          f"all jobs together {total:.0f} Mbit/s = {total / a.cap:.2f} of the cap")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"scenario": a.scenario, "cap": a.cap, "jobs": rows,
                       "churn_recovery_s": [r if r != float("inf") else None for r in recoveries],
                       "samples": [[round(t, 2), {k: [v.get("grant_mbps", 0), v.get("result_mbps", 0)]
                                                  for k, v in m.items()}] for t, m in samples],
                       "worst_ratio": worst, "total_mbps": total}, f, indent=1)
    if not ok:
        print("FAILED: a job's results were not all verified; logs in " + work)
        return 1
    if a.strict and worst < 0.9:
        print("FAILED: a job below 0.9 of its share")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
