#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reloading confluxd's configuration while jobs run (SIGHUP and `conflux reload`):
  live keys    max_mbps, log_level, the secret (rotated through secret_file) and a tenant's
               weight apply at once: the metrics show them, the running jobs go on, a new job
               with the new secret is taken, and one with the old secret too until
               secret_overlap_s has passed, then refused;
  refused key  threads changed: the reload is refused naming it (with both values), nothing
               changes (generation, cap);
  bad file     a file that does not parse changes nothing and says why (exit 1, HTTP 400).
`conflux status` shows the configuration's generation.
Usage: reload_test.py CONFLUXD CONFLUX WORKER"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from procs import Daemon, check, metric, start_job, stop_job, wait_for

OLD, NEW, TENANT = "old-secret-0123456789", "new-secret-9876543210", "tenant-a-secret-5555"


def write_config(path, secret_file, max_mbps=0, log_level="info", threads=2, weight=1,
                 extra=""):
    with open(path, "w") as f:
        f.write(f'secret_file = "{secret_file}"\nsecret_overlap_s = 4\nmax_mbps = {max_mbps}\n'
                f'log_level = "{log_level}"\nthreads = {threads}\n'
                f'[tenants.a]\nsecret = "{TENANT}"\nweight = {weight}\n{extra}')


def conflux(cli, *args, secret=OLD):
    env = dict(os.environ, CONFLUX_SECRET=secret)
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=30, env=env)


def one_job(worker, aggs, key, secret):
    """A short 2-rank job: (every rank exited 0, output)."""
    procs = start_job(worker, aggs, 2, job_key=key, count=4096, iters=20, secret=secret)
    outs = [p.communicate(timeout=60)[0] for p in procs]
    return all(p.returncode == 0 for p in procs), "\n".join(outs)


def main():
    confluxd, cli, worker = sys.argv[1:4]
    with tempfile.TemporaryDirectory() as d:
        key_file, cfg = os.path.join(d, "secret"), os.path.join(d, "confluxd.toml")
        with open(key_file, "w") as f:
            f.write(OLD + "\n")
        write_config(cfg, key_file)
        dmn = Daemon(confluxd, "--config", cfg, log_level=None)
        addr = f"127.0.0.1:{dmn.metrics_port}"
        aggs = f"127.0.0.1:{dmn.control_port}"
        shared = start_job(worker, aggs, 2, job_key=1, iters=100000, secret=OLD)
        tenant = start_job(worker, aggs, 2, job_key=2, iters=100000, secret=TENANT)
        try:
            wait_for(lambda: metric(dmn.metrics(), "conflux_jobs_active") == 2, "two jobs")
            m = dmn.metrics()
            check(metric(m, "conflux_config_generation") == 1, "generation 1 at start")
            check(metric(m, "conflux_job_share_weight", tenant="a") == 1, "tenant weight 1")

            # Live keys, by `conflux reload`.
            with open(key_file, "w") as f:
                f.write(NEW + "\n")
            write_config(cfg, key_file, max_mbps=500, log_level="debug", weight=3)
            r = conflux(cli, "reload", addr)
            check(r.returncode == 0, f"reload: exit {r.returncode}: {r.stdout}{r.stderr}")
            for key in ("max_mbps", "log_level", "secret", "tenants", "generation 2"):
                check(key in r.stdout, f"reload did not say {key}: {r.stdout}")
            m = dmn.metrics()
            check(metric(m, "conflux_config_generation") == 2, "generation 2")
            check(metric(m, "conflux_max_mbps") == 500, "max_mbps 500 applied")
            check(metric(m, "conflux_job_share_weight", tenant="a") == 3, "tenant weight 3")
            check(metric(m, "conflux_config_reloads_total", result="applied") == 1, "applied 1")
            check(all(p.poll() is None for p in shared + tenant), "a running job ended")
            ok, out = one_job(worker, aggs, 3, NEW)
            check(ok, f"a job with the new secret:\n{out}")
            ok, out = one_job(worker, aggs, 4, OLD)
            check(ok, f"a job with the old secret within secret_overlap_s:\n{out}")
            st = json.loads(conflux(cli, "status", addr, "--json", secret=NEW).stdout)
            check(st["daemons"][0]["config_generation"] == 2, f"status: {st['daemons'][0]}")

            # A key that needs a restart, by SIGHUP: refused, nothing changes.
            write_config(cfg, key_file, max_mbps=700, log_level="debug", threads=4, weight=3)
            dmn.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: metric(dmn.metrics(), "conflux_config_reloads_total",
                                    result="refused") == 1, "the refused reload")
            m = dmn.metrics()
            check(metric(m, "conflux_config_generation") == 2, "a refused reload moved nothing")
            check(metric(m, "conflux_max_mbps") == 500, "a refused reload applied max_mbps")
            log = dmn.tail()
            check("threads (2 -> 4)" in log and "refused" in log, f"the refusal:\n{log}")

            # A file that does not load: nothing changes, the reason is given.
            with open(cfg, "a") as f:
                f.write("max_mbps = [\n")
            r = conflux(cli, "reload", addr, secret=NEW)
            check(r.returncode == 1 and "not valid" in r.stderr, f"bad file: {r.stdout}{r.stderr}")
            check(metric(dmn.metrics(), "conflux_config_reloads_total", result="error") == 1,
                  "error counted")

            # The old secret after the overlap: refused.
            time.sleep(4.5)
            ok, out = one_job(worker, aggs, 5, OLD)
            check(not ok and "auth" in out, f"the old secret after the overlap:\n{out}")
            r = conflux(cli, "reload", addr, secret=OLD)
            check(r.returncode == 1 and "refused" in r.stderr, "admin with the old secret")
            check(all(p.poll() is None for p in shared + tenant), "a running job ended")
        finally:
            stop_job(shared + tenant)
            dmn.stop()
    print("PASS")


if __name__ == "__main__":
    main()
