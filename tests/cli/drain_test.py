#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`conflux drain` / `conflux undrain` against a real confluxd with a secret, while a 3-rank
CollNet job runs through the NCCL plugin (the driver loads it as NCCL does and verifies every
iteration): a wrong secret is refused (exit 1, clear message, nothing changes); drain tells the
job's ranks Shutdown{drain} and they finish over the ring with every result exact, and drain --wait
returns only once the job has left (no job active); the daemon
then shows draining and refuses a new job with shutting_down; undrain takes jobs again.
Usage: drain_test.py CONFLUX CONFLUXD WORKER DRIVER PLUGIN"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, check, metric, wait_for  # noqa: E402

SECRET = "drain-test-secret"


def conflux(cli, *args, secret=None):
    env = dict(os.environ)
    env.pop("CONFLUX_SECRET", None)
    if secret is not None:
        env["CONFLUX_SECRET"] = secret
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=30, env=env)


def worker_job(worker, aggs, job_key):
    """A one-rank job through the client engine: (exit code, output)."""
    r = subprocess.run([worker, "--aggregators", aggs, "--nranks", "1", "--rank", "0",
                        "--job-key", str(job_key), "--count", "4096", "--secret", SECRET],
                       capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout + r.stderr


def main():
    cli, confluxd, worker, driver, plugin = sys.argv[1:6]
    # 3 % of the contributions dropped (fault injection): resends stretch the CollNet phase to
    # ~40 ms per iteration, so the drain lands mid-job on any machine.
    d = Daemon(confluxd, "--secret", SECRET, "--fault-drop", "0.03")
    addr = f"127.0.0.1:{d.metrics_port}"
    aggs = f"127.0.0.1:{d.control_port}"
    env = dict(os.environ, CONFLUX_AGGREGATORS=aggs, CONFLUX_SECRET=SECRET,
               CONFLUX_SOCKET_IFNAME="lo", CONFLUX_AGGREGATOR_TIMEOUT_MS="1500",
               NCCL_DEBUG="WARN")
    job = subprocess.Popen([driver, "--plugin", plugin, "--nranks", "3", "--modes", "collnet",
                            "--require-collnet", "-d", "float", "-o", "sum", "-b", "1M", "-e",
                            "1M", "-n", "60", "-w", "1", "--check-iters",
                            "--timeout", "200"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: metric(d.metrics(), "conflux_job_packets_in_total") > 0,
                 "the CollNet job's packets")
        check(metric(d.metrics(), "conflux_jobs_active") == 1, "one job before the drain")

        bad = conflux(cli, "drain", addr, "--secret", "not-the-secret")
        check(bad.returncode == 1, f"wrong secret: exit {bad.returncode}")
        check("refused: wrong secret" in bad.stderr, f"wrong secret: {bad.stderr!r}")
        check(metric(d.metrics(), "conflux_draining") == 0, "a refused drain changed nothing")

        # --wait returns once the job has moved off (a rolling upgrade's preStop), not before.
        r = conflux(cli, "drain", addr, "--json", "--wait", "--wait-timeout", "60", secret=SECRET)
        check(r.returncode == 0, f"drain: exit {r.returncode}: {r.stderr}")
        (ans,) = json.loads(r.stdout)["daemons"]
        check(ans["ok"] is True and "3 member(s) told to leave" in ans["message"], ans)
        check("drained: no job left after" in ans["message"], ans)
        check(metric(d.metrics(), "conflux_jobs_active") == 0, "drain --wait returned with a job")

        out, _ = job.communicate(timeout=200)
        check(job.returncode == 0, f"the job failed after the drain:\n{out}")
        check("verified: all results correct" in out, f"results not all verified:\n{out}")
        check("draining" in out, f"the ranks did not report the drain:\n{out}")
        wait_for(lambda: metric(d.metrics(), "conflux_jobs_active") == 0, "the job to end")

        s = conflux(cli, "status", addr, "--json", "--interval-ms", "100")
        (st,) = json.loads(s.stdout)["daemons"]
        check(st["ok"] is True and st["draining"] is True, st)
        rc, text = worker_job(worker, aggs, 11)
        check(rc != 0 and "shutting_down" in text, f"a new job while drained: {rc}\n{text}")

        u = conflux(cli, "undrain", addr, "--secret", SECRET)
        check(u.returncode == 0 and "undrained" in u.stdout, f"undrain: {u.stdout}{u.stderr}")
        check(metric(d.metrics(), "conflux_draining") == 0, "undrained")
        rc, text = worker_job(worker, aggs, 12)
        check(rc == 0 and "verified: all" in text, f"a new job after undrain: {rc}\n{text}")
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        check(d.stop() == 0, "confluxd exit 0")
    print("drain/undrain: ok")


if __name__ == "__main__":
    main()
