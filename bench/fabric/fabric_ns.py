# SPDX-License-Identifier: Apache-2.0
"""Emulated cluster in network namespaces: one "switch" namespace holding a Linux bridge, one
namespace per worker and per aggregator, each joined to the bridge by a veth pair (MTU 9000).
Both directions of every link are shaped with tbf (host egress + switch-port egress); optional
random loss is an nftables rule on the receiving host's input hook (this kernel has no netem).

Every namespace is named <prefix>-<role>; the prefix is cfx<pid> of the owning process, so
`cleanup_stale()` can tell abandoned fabrics (owner dead) from live ones. Only addresses in
10.77.0.0/24 inside the namespaces are used. Called from the main thread only; every method
raises FabricError (with the failing command) on failure.
"""
import os
import re
import signal
import subprocess
import time

SUBNET = "10.77.0"
WORKER_BASE, AGG_BASE = 11, 101
NS_RE = re.compile(r"^cfx(\d+)-")


class FabricError(RuntimeError):
    pass


def free_page_reporting(sysfs="/sys"):
    """The virtio device bound to virtio_balloon when the kernel reports free pages to the
    hypervisor through it (page_reporting loaded), else None. Such a guest hands back memory a
    system freed, and the next system's fresh pages then fault on the host: its copies run at
    half speed, so runs after another are bimodal (bench/fabric/README.md, "On a VM")."""
    driver = os.path.join(sysfs, "bus/virtio/drivers/virtio_balloon")
    if not os.path.isdir(os.path.join(sysfs, "module/page_reporting")) or \
            not os.path.isdir(driver):
        return None
    bound = sorted(d for d in os.listdir(driver) if d.startswith("virtio"))
    return bound[0] if bound else None


def transparent_hugepages(sysfs="/sys"):
    """The kernel's transparent huge page mode ("always", "madvise" or "never"), or None where
    the kernel has none. Under "madvise" the ranks' large buffers (both systems') sit on 4 KiB
    pages, and Conflux's copies out of and into them slow down more than Gloo's do
    (bench/capacity/README.md): runs under different modes do not compare."""
    try:
        with open(os.path.join(sysfs, "kernel/mm/transparent_hugepage/enabled")) as f:
            text = f.read()
    except OSError:
        return None
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def sh(argv, check=True, capture=True, timeout=30):
    """Runs argv (no shell); returns stdout. Raises FabricError when check and rc != 0."""
    r = subprocess.run(argv, capture_output=capture, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise FabricError(f"{' '.join(argv)}: rc={r.returncode}: {(r.stderr or '').strip()}")
    return r.stdout or ""


def list_namespaces():
    out = sh(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _kill_ns_processes(ns):
    # Only namespaces this harness created reach here, so every process in them is ours.
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for p in sh(["ip", "netns", "pids", ns], check=False).split()]
        if not pids:
            return
        for p in pids:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        time.sleep(0.3)


def delete_namespaces(names):
    for ns in names:
        _kill_ns_processes(ns)
        sh(["ip", "netns", "del", ns], check=False)


def cleanup_stale(force=False):
    """Deletes cfx<pid>-* namespaces whose owner pid is gone (all of them with force)."""
    stale = []
    for ns in list_namespaces():
        m = NS_RE.match(ns)
        if not m:
            continue
        pid = int(m.group(1))
        if force or pid == os.getpid() or not os.path.exists(f"/proc/{pid}"):
            stale.append(ns)
    delete_namespaces(stale)
    return stale


def wait_reachable(ns, ips):
    """From namespace ns, a TCP connect to a closed port of each of ips, retried for 10 s: a
    refusal (RST) proves the path works (no ping on this machine). FabricError otherwise."""
    probe = ("import socket,sys\n"
             "for ip in sys.argv[1:]:\n"
             "  for _ in range(50):\n"
             "    try: socket.create_connection((ip, 1), timeout=0.2).close(); break\n"
             "    except ConnectionRefusedError: break\n"
             "    except OSError: pass\n"
             "  else: sys.exit('unreachable: ' + ip)\n")
    r = subprocess.run(["ip", "netns", "exec", ns, "/usr/bin/python3", "-c", probe] + ips,
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise FabricError(f"from {ns}: {r.stderr.strip()}")


class Host:
    def __init__(self, role, ns, ip, mbit):
        self.role, self.ns, self.ip, self.mbit = role, ns, ip, mbit


class Fabric:
    """workers: count; worker_mbit: their line rate; aggs: list of (role, mbit) such as
    [("a0", 2000), ("a1", 500)]; loss_pct: random loss at every receiver (0 = none);
    lossy_workers: {worker index: loss percent} at those workers' hosts only (the others and
    the aggregators lose nothing unless loss_pct says so; a worker's own entry wins);
    loss_from: a host's role (e.g. "a0"): the loss rules drop only what comes from that host
    (its path to the others), not the rest (default: everything arriving);
    deaf_workers: indices of workers whose hosts drop all IPv4 multicast at input."""

    def __init__(self, prefix, workers, worker_mbit, aggs, loss_pct=0.0, mtu=9000,
                 deaf_workers=(), igmp_snooping=False, lossy_workers=None, loss_from=None):
        if not NS_RE.match(prefix + "-"):
            raise FabricError(f"prefix {prefix!r} must look like cfx<pid>")
        self.prefix, self.mtu, self.loss_pct = prefix, mtu, loss_pct
        self.deaf_workers = list(deaf_workers)
        self.igmp_snooping = igmp_snooping
        self.switch = f"{prefix}-sw"
        self.workers = [Host(f"w{i}", f"{prefix}-w{i}", f"{SUBNET}.{WORKER_BASE + i}", worker_mbit)
                        for i in range(workers)]
        self.aggs = {role: Host(role, f"{prefix}-{role}", f"{SUBNET}.{AGG_BASE + j}", mbit)
                     for j, (role, mbit) in enumerate(aggs)}
        self.created = []
        self.loss_from = loss_from
        # role -> loss percent at that host's input (nftables table cfxloss)
        self.loss = {h.role: loss_pct for h in self.hosts() if loss_pct > 0}
        for i, pct in (lossy_workers or {}).items():
            if pct > 0:
                self.loss[self.workers[i].role] = pct

    def hosts(self):
        return self.workers + list(self.aggs.values())

    def _add_ns(self, ns):
        sh(["ip", "netns", "add", ns])
        self.created.append(ns)
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        sh(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"],
           check=False)

    @staticmethod
    def _shape(ns, dev, mbit):
        rate_bytes = mbit * 1e6 / 8
        burst = max(128 << 10, int(rate_bytes * 0.002))
        limit = max(4 << 20, int(rate_bytes * 0.02))
        sh(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{mbit}mbit",
            "burst", str(burst), "limit", str(limit)])

    def _add_loss(self, ns, pct):
        thresh = int(round(pct * 100))  # numgen mod 10000: hundredths of a percent
        src = ([] if self.loss_from is None else
               ["ip", "saddr", {h.role: h.ip for h in self.hosts()}[self.loss_from]])
        sh(["ip", "netns", "exec", ns, "nft", "add", "table", "inet", "cfxloss"])
        sh(["ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "cfxloss", "in",
            "{ type filter hook input priority 0; policy accept; }"])
        sh(["ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "cfxloss", "in", "iifname",
            "eth0"] + src + ["numgen", "random", "mod", "10000", "<", str(thresh), "counter",
                             "drop"])

    def _add_deaf(self, ns):
        """Drops every IPv4 multicast datagram arriving on eth0 (the group's results and
        probes), as a host behind a switch that does not forward the group would see it."""
        sh(["ip", "netns", "exec", ns, "nft", "add", "table", "inet", "cfxdeaf"])
        sh(["ip", "netns", "exec", ns, "nft", "add", "chain", "inet", "cfxdeaf", "in",
            "{ type filter hook input priority 0; policy accept; }"])
        sh(["ip", "netns", "exec", ns, "nft", "add", "rule", "inet", "cfxdeaf", "in", "iifname",
            "eth0", "ip", "daddr", "224.0.0.0/4", "counter", "drop"])

    def loss_counts(self):
        """{role: packets dropped by the loss rule} of every lossy host (empty without loss)."""
        out = {}
        for h in self.hosts():
            if h.role not in self.loss:
                continue
            text = sh(["ip", "netns", "exec", h.ns, "nft", "list", "chain", "inet", "cfxloss",
                       "in"], check=False)
            m = re.search(r"counter packets (\d+)", text)
            out[h.role] = int(m.group(1)) if m else -1
        return out

    def build(self):
        self._add_ns(self.switch)
        # A Linux bridge snoops IGMP by default but floods every group while it hears no
        # querier; with one of its own it sends a group only to the ports that joined it, as a
        # data-centre switch with IGMP snooping does.
        # Until its first query's response time has passed it still floods (the kernel's
        # querier delay): 1 s instead of the default 10 (centiseconds), and build() waits it out.
        # IGMPv3 queries: after a v2 query the hosts answer in v2, to the group itself, which
        # the bridge forwards to the group's other members, and a v2 host that hears another's
        # report suppresses its own, so the bridge never learns it (measured: 4-6 of 8 joined
        # workers in its table), and those workers get none of the group's traffic.
        snoop = (["mcast_snooping", "1", "mcast_querier", "1", "mcast_igmp_version", "3",
                  "mcast_query_response_interval", "100", "mcast_startup_query_interval", "100"]
                 if self.igmp_snooping else [])
        sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"] + snoop)
        sh(["ip", "-n", self.switch, "link", "set", "br0", "mtu", str(self.mtu), "up"])
        for h in self.hosts():
            self._add_ns(h.ns)
            sh(["ip", "-n", h.ns, "link", "add", "eth0", "type", "veth", "peer", "name", h.role,
                "netns", self.switch])
            sh(["ip", "-n", h.ns, "link", "set", "eth0", "mtu", str(self.mtu), "up"])
            sh(["ip", "-n", h.ns, "addr", "add", f"{h.ip}/24", "dev", "eth0"])
            sh(["ip", "-n", self.switch, "link", "set", h.role, "mtu", str(self.mtu),
                "master", "br0", "up"])
            self._shape(h.ns, "eth0", h.mbit)           # host -> switch
            self._shape(self.switch, h.role, h.mbit)    # switch -> host
            if h.role in self.loss:
                self._add_loss(h.ns, self.loss[h.role])
        for i in self.deaf_workers:
            self._add_deaf(self.workers[i].ns)
        self._wait_reachable()
        if self.igmp_snooping:
            time.sleep(2)  # the querier delay above, with a margin

    def _wait_reachable(self):
        """Every host reachable from worker 0 (wait_reachable)."""
        wait_reachable(self.workers[0].ns, [h.ip for h in self.hosts()[1:]])

    def drop_report(self):
        """One line per place a packet can be lost: tbf drops/overlimits per link end, UDP
        receive-buffer errors per host, veth/backlog drops (softnet_stat, machine-wide)."""
        lines = []
        for h in self.hosts():
            parts = []
            for ns, dev, tag in ((h.ns, "eth0", "up"), (self.switch, h.role, "down")):
                t = sh(["tc", "-s", "-n", ns, "qdisc", "show", "dev", dev], check=False)
                m = re.search(r"dropped (\d+), overlimits (\d+)", t)
                parts.append(f"tbf-{tag} dropped {m.group(1) if m else '?'}")
            u = sh(["ip", "netns", "exec", h.ns, "nstat", "-az", "UdpRcvbufErrors",
                    "UdpInErrors", "TcpRetransSegs"], check=False)
            for name in ("UdpRcvbufErrors", "UdpInErrors", "TcpRetransSegs"):
                m = re.search(name + r"\s+(\d+)", u)
                parts.append(f"{name} {m.group(1) if m else '?'}")
            lines.append(f"#   {h.role}: " + ", ".join(parts))
        drops = 0
        with open("/proc/net/softnet_stat") as f:
            for line in f:
                drops += int(line.split()[1], 16)
        lines.append(f"#   softnet backlog drops (whole machine, since boot): {drops}")
        return "\n".join(lines)

    def teardown(self):
        delete_namespaces(list(reversed(self.created)))
        self.created = []

    def describe(self):
        lines = [f"# fabric {self.prefix}: switch {self.switch} (bridge br0), MTU {self.mtu}, "
                 f"tbf both directions, loss {self.loss_pct}% at every receiver" +
                 ("; more at the hosts so marked"
                  if any(v != self.loss_pct for v in self.loss.values()) else "") +
                 (", IGMP snooping with a querier" if self.igmp_snooping else "")]
        for h in self.hosts():
            lines.append(f"#   {h.role:4s} {h.ns:16s} {h.ip:12s} {h.mbit} Mbit/s" +
                         (f", loss {self.loss[h.role]}% at input"
                          if self.loss.get(h.role, self.loss_pct) != self.loss_pct else "") +
                         (f" of what comes from {self.loss_from}"
                          if self.loss_from and h.role in self.loss else ""))
        return "\n".join(lines)
