# SPDX-License-Identifier: Apache-2.0
"""Real confluxd and worker processes on 127.0.0.1 for the deploy and CLI tests, and the
fail/check helpers every deploy test reports through."""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


class Daemon:
    """confluxd on loopback with ephemeral ports (or the given control and data ports: a
    restart on the same address); stopped with SIGTERM by stop(), or SIGKILL by kill()."""

    def __init__(self, confluxd, *extra, control_port=0, data_port=0, listen="127.0.0.1",
                 log_level="warn"):
        self.listen = listen
        self.dir = tempfile.mkdtemp(prefix="conflux-deploy-")
        ready = os.path.join(self.dir, "ready")
        self.log = open(os.path.join(self.dir, "confluxd.log"), "w")
        self.proc = subprocess.Popen(
            [confluxd, "--listen", listen, "--control-port", str(control_port),
             "--data-port", str(data_port),
             "--metrics-port", "0", "--ready-file", ready,
             *(["--log-level", log_level] if log_level else []), *extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"confluxd did not start: {self.tail()}")
            time.sleep(0.02)
        fields = dict(l.split("=", 1) for l in open(ready).read().split())
        self.control_port = int(fields["control_port"])
        self.metrics_port = int(fields["metrics_port"])

    def tail(self):
        self.log.flush()
        return open(self.log.name).read()[-2000:]

    def metrics(self):
        url = f"http://{self.listen}:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.read().decode()

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=10)
        return self.proc.returncode


def metric(text, name, **labels):
    """Sum of the samples of `name` whose labels include `labels`."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        head, value = line.rsplit(" ", 1)
        base = head.split("{", 1)[0]
        if base != name:
            continue
        if all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(value)
    return total


def start_job(worker, aggregators, nranks, job_key=1, count=1 << 20, iters=2000, secret=None):
    """nranks worker processes of one AllReduce job that runs for a while (killed by the caller
    once it has seen what it needs, or left to finish); `secret`: their CONFLUX_SECRET."""
    env = dict(os.environ, **({"CONFLUX_SECRET": secret} if secret else {}))
    return [subprocess.Popen([worker, "--aggregators", aggregators, "--nranks", str(nranks),
                              "--rank", str(r), "--job-key", str(job_key), "--count", str(count),
                              "--iters", str(iters), "--warmup", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
            for r in range(nranks)]


def stop_job(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait(timeout=10)


def closed_port():
    """A loopback TCP port nothing listens on (bound once by us, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(predicate, what, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
