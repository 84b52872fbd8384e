#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`promtool check metrics` on a live /metrics of confluxd scraped while a 2-rank job runs an
AllReduce (jobs_active 1, the job's packets counted), and promtool catches a broken exposition.
Usage: live_metrics_test.py CONFLUXD WORKER"""
import subprocess
import sys

from procs import Daemon, metric, start_job, stop_job, wait_for


def promtool(text):
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                          text=True)


def main():
    confluxd, worker = sys.argv[1:3]
    d = Daemon(confluxd)
    job = start_job(worker, f"127.0.0.1:{d.control_port}", 2)
    try:
        def running():
            m = d.metrics()
            ok = (metric(m, "conflux_jobs_active") == 1 and
                  metric(m, "conflux_job_packets_in_total") > 0)
            return m if ok else None
        scrape = wait_for(running, "a running job in /metrics")
    finally:
        stop_job(job)
    assert metric(scrape, "conflux_job_workers") == 2, scrape
    r = promtool(scrape)
    print(r.stdout + r.stderr)
    assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), "promtool found problems"
    # The check has teeth: a counter without _total and a malformed sample are reported.
    bad = promtool("# HELP x_bytes Bytes.\n# TYPE x_bytes counter\nx_bytes 1\n")
    assert bad.returncode != 0 and "_total" in bad.stdout + bad.stderr, bad
    broken = promtool(scrape + "conflux_broken{conflux_job=\"1\" 3\n")
    assert broken.returncode != 0, broken
    assert d.stop() == 0, d.tail()
    print(f"promtool check metrics: {len(scrape.splitlines())} lines clean during an AllReduce")


if __name__ == "__main__":
    main()
