#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`conflux throttle` against a real confluxd with a secret (capped at 400 Mbit/s) while a 2-rank
CollNet job runs through the NCCL plugin (the driver loads it as NCCL does and verifies every
iteration): a wrong secret is refused (exit 1, nothing changes); a bad rate is a usage error
(exit 2); `--max-mbps 100` takes effect at once (`conflux_max_mbps`), the job's ranks hear
their new grant (`grant now 100 Mbit/s (was 400): cap changed`), and every result stays exact.
(The auto split's restart from a new grant is SplitController's and collnet_e2e's to test.)
Usage: throttle_test.py CONFLUX CONFLUXD DRIVER PLUGIN"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
from procs import Daemon, check, metric, wait_for  # noqa: E402

SECRET = "throttle-test-secret"


def conflux(cli, *args):
    env = dict(os.environ)
    env.pop("CONFLUX_SECRET", None)
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=30, env=env)


def main():
    cli, confluxd, driver, plugin = sys.argv[1:5]
    d = Daemon(confluxd, "--secret", SECRET, "--max-mbps", "400")
    addr = f"127.0.0.1:{d.metrics_port}"
    env = dict(os.environ, CONFLUX_AGGREGATORS=f"127.0.0.1:{d.control_port}",
               CONFLUX_SECRET=SECRET, CONFLUX_SOCKET_IFNAME="lo",
               CONFLUX_AGGREGATOR_TIMEOUT_MS="1500", NCCL_DEBUG="INFO")
    # 30 AllReduces of 1 MiB wholly through the aggregator: 2 MiB of results each, at least
    # 1.2 s under the 400 Mbit/s cap (the pacing makes it so on any machine), so the throttle
    # lands mid-job.
    job = subprocess.Popen([driver, "--plugin", plugin, "--nranks", "2", "--modes", "collnet",
                            "--require-collnet", "-d", "float", "-o",
                            "sum", "-b", "1M", "-e", "1M", "-n", "30", "-w", "1",
                            "--check-iters", "--timeout", "200"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(lambda: metric(d.metrics(), "conflux_job_packets_in_total") > 0,
                 "the CollNet job's packets")
        check(metric(d.metrics(), "conflux_max_mbps") == 400, "the configured cap")

        bad = conflux(cli, "throttle", addr, "--max-mbps", "100", "--secret", "not-the-secret")
        check(bad.returncode == 1, f"wrong secret: exit {bad.returncode}")
        check("refused: wrong secret" in bad.stderr, f"wrong secret: {bad.stderr!r}")
        check(metric(d.metrics(), "conflux_max_mbps") == 400, "a refused throttle changed nothing")
        usage = conflux(cli, "throttle", addr, "--max-mbps", "-3", "--secret", SECRET)
        check(usage.returncode == 2, f"a negative rate: exit {usage.returncode}")

        r = conflux(cli, "throttle", addr, "--max-mbps", "100", "--secret", SECRET)
        check(r.returncode == 0, f"throttle: exit {r.returncode}: {r.stderr}")
        check("max_mbps 100 Mbit/s; 1 job(s) told" in r.stdout, f"throttle: {r.stdout!r}")
        check(metric(d.metrics(), "conflux_max_mbps") == 100, "the new cap")

        out, _ = job.communicate(timeout=200)
        check(job.returncode == 0, f"the job failed after the throttle:\n{out}")
        check("verified: all results correct" in out, f"results not all verified:\n{out}")
        check("grant now 100 Mbit/s (was 400): cap changed" in out,
              f"the ranks did not hear the new grant:\n{out}")
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        check(d.stop() == 0, "confluxd exit 0")
    print("throttle: ok")


if __name__ == "__main__":
    main()
