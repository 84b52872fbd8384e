#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`conflux status` against real daemons: two confluxd with a 2-rank job striped over both
(JSON parsed: health, version, dataplane, threads, the job with its workers, slots, nonzero
packet/byte rates, its grant and its tenant's weight; the table names both), a daemon that is down (exit 1, clear error, the
others still shown), usage errors (exit 2), and the job gone after its workers leave.
Usage: status_test.py CONFLUX CONFLUXD WORKER VERSION"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, closed_port, metric, start_job, stop_job, wait_for  # noqa: E402


def conflux(cli, *args):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=30)


def main():
    cli, confluxd, worker, version = sys.argv[1:5]
    # The job is tenant "research" (weight 3) on both daemons, each capped at 1000 Mbit/s.
    tenants = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    tenants.write('[tenants.research]\nsecret = "status-test-secret"\nweight = 3\n')
    tenants.close()
    daemons = [Daemon(confluxd, "--config", tenants.name, "--max-mbps", "1000")
               for _ in range(2)]
    addrs = [f"127.0.0.1:{d.metrics_port}" for d in daemons]
    aggs = ",".join(f"127.0.0.1:{d.control_port}" for d in daemons)
    job = start_job(worker, aggs, 2, job_key=7, secret="status-test-secret")
    try:
        for d in daemons:
            wait_for(lambda d=d: metric(d.metrics(), "conflux_job_packets_in_total") > 0,
                     "the job's packets on both daemons")
        r = conflux(cli, "status", *addrs, "--json", "--interval-ms", "300")
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert [d["address"] for d in doc["daemons"]] == addrs, doc
        for d in doc["daemons"]:
            assert d["ok"] is True and d["health"] == "ok", d
            assert d["version"] == version and d["dataplane"] == "udp", d
            assert d["threads"] == 2 and d["jobs_active"] == 1 and d["uptime_seconds"] >= 0, d
            assert d["control_connections"] == 2, d  # one per rank
            (j,) = d["jobs"]
            assert j["workers"] == 2 and j["slots"] > 0, j
            assert j["packets_per_second"] > 0 and j["bytes_per_second"] > 0, j
            assert j["drops"] >= 0 and j["retransmits_served"] >= 0, j
            assert d["packets_per_second"] >= j["packets_per_second"] * 0.5, d
            assert j["grant_mbps"] == 1000, j  # alone: the whole cap
            assert j["share_weight"] == 3 and j["tenant"] == "research", j
            assert j["results"] == "unicast", j  # no multicast_range
            assert d["multicast_unasked_mbps"] == 0, d  # no multicast job to watch for
        table = conflux(cli, "status", *addrs, "--interval-ms", "100")
        assert table.returncode == 0, table.stderr
        lines = table.stdout.splitlines()
        assert lines[0].split()[:4] == ["DAEMON", "HEALTH", "VERSION", "DATAPLANE"], lines
        for a in addrs:
            (row,) = [l for l in lines if l.startswith(a)]
            assert row.split()[1:4] == ["ok", version, "udp"], row
        assert sum(1 for l in lines if l.strip().startswith("job ")) == 2, table.stdout
        assert sum(1 for l in lines
                   if "grant 1000 Mbit/s  weight 3 (tenant research)  results by unicast" in l) \
            == 2, table.stdout
    finally:
        stop_job(job)

    # A daemon that is down: exit 1, a clear error, the live one still reported.
    down = f"127.0.0.1:{closed_port()}"
    r = conflux(cli, "status", addrs[0], down, "--json", "--interval-ms", "100")
    assert r.returncode == 1, r
    doc = json.loads(r.stdout)
    assert doc["daemons"][0]["ok"] is True, doc
    assert doc["daemons"][1]["ok"] is False and "cannot connect" in doc["daemons"][1]["error"], doc
    assert f"conflux: {down}: cannot connect" in r.stderr, r.stderr
    r = conflux(cli, "status", down)
    assert r.returncode == 1 and "DOWN" in r.stdout, r
    # Usage errors: exit 2.
    for bad in (["status"], [], ["status", "127.0.0.1:notaport"]):
        r = conflux(cli, *bad)
        assert r.returncode == (1 if bad[1:] else 2), (bad, r)
    # The job leaves: the daemons delete it and status lists no job.
    for d, a in zip(daemons, addrs):
        wait_for(lambda d=d: metric(d.metrics(), "conflux_jobs_active") == 0 and
                 metric(d.metrics(), "conflux_jobs_deleted_total") == 1, "the job deleted")
        doc = json.loads(conflux(cli, "status", a, "--json", "--interval-ms", "50").stdout)
        assert doc["daemons"][0]["jobs"] == [] and doc["daemons"][0]["jobs_active"] == 0, doc
    for d in daemons:
        assert d.stop() == 0, d.tail()
    os.unlink(tenants.name)
    print("conflux status: two daemons, a striped job, a down daemon and usage errors as expected")


if __name__ == "__main__":
    main()
