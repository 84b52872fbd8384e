#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Debian's real Prometheus scrapes a confluxd that serves two jobs, and every query of
deploy/grafana-dashboard.json that groups by the per-job label returns one series per job,
each with its own `conflux_job` id, while the scrape job keeps its `job` label ("conflux") and
nothing is renamed to `exported_job`. The check has teeth: the same query grouped by `job` (what
the dashboard did when the daemon's label was `job`) adds both jobs into one series.
Usage: prometheus_dashboard_test.py CONFLUXD WORKER SOURCE_DIR"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.parse
import urllib.request

from procs import Daemon, check, closed_port, metric, start_job, stop_job, wait_for


def query(port, expr):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        doc = json.load(r)
    check(doc["status"] == "success", doc)
    return [s["metric"] for s in doc["data"]["result"]]


def main():
    confluxd, worker, src = sys.argv[1:4]
    if shutil.which("prometheus") is None:
        check(os.environ.get("CONFLUX_CI") != "1", "prometheus not installed (scripts/setup.sh)")
        print("SKIP: prometheus not installed (scripts/setup.sh installs it)")
        return
    dash = json.load(open(os.path.join(src, "deploy", "grafana-dashboard.json")))
    per_job = [t["expr"] for p in dash["panels"] for t in p["targets"] if "conflux_job)" in t["expr"]]
    check(len(per_job) >= 3, f"the dashboard has no per-job queries: {per_job}")

    work = tempfile.mkdtemp(prefix="conflux-prom-")
    d = Daemon(confluxd)
    agg = f"127.0.0.1:{d.control_port}"
    jobs = [start_job(worker, agg, 2, job_key=k, count=1 << 14, iters=1 << 20) for k in (1, 2)]
    prom = None
    try:
        def two_jobs():
            m = d.metrics()
            return m if metric(m, "conflux_jobs_active") == 2 else None
        m = wait_for(two_jobs, "two jobs in /metrics")
        ids = {line.split('conflux_job="', 1)[1].split('"', 1)[0]
               for line in m.splitlines() if line.startswith("conflux_job_workers{")}
        check(len(ids) == 2, m)

        port = closed_port()
        cfg = os.path.join(work, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: conflux\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{d.metrics_port}']\n")
        log = open(os.path.join(work, "prometheus.log"), "w")
        prom = subprocess.Popen(
            ["prometheus", f"--config.file={cfg}", f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{port}"], stdout=log, stderr=subprocess.STDOUT)

        def answers(expr, n):
            def ready():
                try:
                    got = query(port, expr)
                except OSError:
                    return None  # not listening yet
                return got if len(got) >= n else None
            return wait_for(ready, f"{n} series from {expr}", timeout=60)

        # Every per-job panel: one series per job, told apart by conflux_job.
        for expr in per_job:
            got = answers(expr, 2)
            check(len(got) == 2 and {s.get("conflux_job") for s in got} == ids, (expr, got))
            check(all("exported_job" not in s for s in got), (expr, got))
        # The raw series: Prometheus's own job label is the scrape job's, ours is kept.
        raw = answers("conflux_job_workers", 2)
        check({(s["job"], s["conflux_job"]) for s in raw} == {("conflux", i) for i in ids}, raw)
        check(all("exported_job" not in s for s in raw), raw)
        # Grouped by `job`, as before the rename: both jobs in one series.
        old = query(port, "sum by (instance, job) (rate(conflux_job_bytes_in_total[1m]))")
        check(len(old) == 1, old)
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        for j in jobs:
            stop_job(j)
    check(d.stop() == 0, d.tail())
    shutil.rmtree(work, ignore_errors=True)
    print(f"prometheus: {len(per_job)} per-job dashboard queries give one series per job "
          f"({sorted(ids)})")


if __name__ == "__main__":
    main()
