# SPDX-License-Identifier: Apache-2.0
"""ctest fabric_ranks_per_host: several ranks per emulated host with NCCL's connection count
(bench/fabric/ranks_per_host.py), small: 2 hosts x 4 ranks, 18 p2p comms per rank.
  1. Every result verified (ring and PXN), every rank process at most CONFLUX_NET_PROGRESS_THREADS
     (4) + 3 threads (the driver's main, liveness and service threads), exactly 4 of them the
     plugin's cfx-net helpers, as sampled from outside; no namespace left.
  2. The same bound with no room for the driver's threads (--extra-threads 0) must fail and say
     so: the thread check can fail.
  3. A run stopped by SIGTERM while its ranks run leaves no namespace and no rank process.
Usage: fabric_ranks_per_host.py SCRIPT --plugin P --driver D. Exit 0 pass, 1 fail, 77 skipped."""
import os
import re
import signal
import subprocess
import sys
import time

from fabric_smoke import SKIP, fail, skip

SMALL = ["--hosts", "2", "--ranks-per-host", "4", "--hold-conns", "8", "-b", "4", "-e", "1M",
         "-f", "8", "-n", "3", "--progress-threads", "4", "--sample", "0.02"]
# The script's namespaces are named after this process (fabric_ns: cfx<pid of a live owner>),
# whatever launches the interpreter (a pyenv shim forks, so the child's pid may not be it).
PREFIX = f"cfx{os.getpid()}"
ROW_RE = re.compile(r"^#\s+(\d+)\s+w[01]\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s", re.M)


def namespaces(prefix):
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix + "-")]


def running(pid):
    """Whether pid is a live process (not gone, not a zombie waiting for init to reap it)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def run(script, bins, extra, timeout):
    p = subprocess.Popen([sys.executable, script, *bins, *SMALL, "--prefix", PREFIX, *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        fail(f"{' '.join(extra) or 'the run'} took over {timeout} s", out)
    return p.returncode, out, PREFIX


def main():
    if os.geteuid() != 0:
        return skip("not root (network namespaces and tc need root)")
    if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
        return skip("`ip netns` unavailable")
    script, bins = sys.argv[1], sys.argv[2:]

    # 1. the small run passes, and its per-process figures are there and within the bound
    rc, out, prefix = run(script, bins, [], 30)
    if rc == SKIP:
        print(out)
        return skip("the script skipped")
    if rc != 0 or "# ranks_per_host: passed" not in out:
        fail(f"exit code {rc}", out)
    rows = ROW_RE.findall(out)
    if len(rows) != 8 or sorted(int(r[0]) for r in rows) != list(range(8)):
        fail(f"{len(rows)} per-process rows, not one for each of the 8 ranks", out)
    for r, _pid, threads, net, fds in rows:
        if not (int(net) == 4 and int(net) < int(threads) <= 7 and int(fds) > 18):
            fail(f"rank {r}: threads {threads}, cfx-net {net}, fds {fds}", out)
    if "# | 4 | 8 (2 x 4) | 18 | " not in out or "| yes |" not in out:
        fail("the summary table has no verified row", out)
    if namespaces(prefix):
        fail(f"namespaces left: {namespaces(prefix)}", out)

    # 2. the thread check can fail
    rc, out2, prefix = run(script, bins, ["--extra-threads", "0"], 30)
    if rc != 1 or "had more than 4 threads (4 + 0)" not in out2:
        fail(f"--extra-threads 0: exit code {rc}, no thread failure reported", out2)
    if namespaces(prefix):
        fail(f"namespaces left after a failed check: {namespaces(prefix)}", out2)

    # 3. SIGTERM while the ranks run: they and the namespaces are gone
    p = subprocess.Popen([sys.executable, script, *bins, *SMALL, "--prefix", PREFIX, "-e", "4M",
                          "-f", "4", "-n", "20"], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    prefix = PREFIX
    ranks = []
    deadline = time.monotonic() + 15
    while len(ranks) < 8 and time.monotonic() < deadline and p.poll() is None:
        ranks = [int(x) for h in ("w0", "w1") for x in subprocess.run(
            ["ip", "netns", "pids", f"{prefix}-{h}"], capture_output=True,
            text=True).stdout.split()]
        time.sleep(0.1)
    if len(ranks) < 8:
        p.kill()
        fail(f"SIGTERM run: {len(ranks)} rank processes seen in 15 s", p.communicate()[0])
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    try:
        out3, _ = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("SIGTERM run did not exit within 20 s", p.communicate()[0])
    alive = [pid for pid in ranks if running(pid)]
    if p.returncode == 0 or namespaces(prefix) or alive:
        fail(f"after SIGTERM: exit code {p.returncode}, namespaces {namespaces(prefix)}, "
             f"ranks alive {alive}", out3)
    print(out[-3000:])
    print("fabric_ranks_per_host: passed (verified, threads within the bound, the bound can "
          "fail, nothing left after SIGTERM)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
