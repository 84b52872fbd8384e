# SPDX-License-Identifier: Apache-2.0
"""A direct-connect fabric in network namespaces, wired as a plan of `conflux plan --fabric
direct --json` says: no switch on the data path; every circuit of the plan is a veth pair between
two namespaces (a worker's port and another worker's, or a device's), shaped with tbf at the
link rate in both directions.

Addresses (all inside the namespaces):
  10.78.0.(1+i)/32   worker i's data address, on an interface data0 of its own (a veth whose
                     peer stays unused: this kernel has no dummy interfaces); the plugin listens
                     there (CONFLUX_SOCKET_IFNAME==data0)
  10.79.0.(1+d)/32   device d's data address, where its confluxd listens
  10.80.k.1-2/30     the two ends of circuit k
Routes: a worker reaches the data address of its ring neighbours over the circuit to each, and
of every device it is wired to over that circuit; nothing else (no default route), so each
topology's traffic takes its own ports and nothing can take a shortcut. A plan without a ring
still needs one between the workers for what is not an AllReduce's share (NCCL's point-to-point
connections, the plugin's connect exchanges and its failover ring): there the first device's
host forwards IP between its workers, so that ring shares that device's ports.

The bootstrap of the driver's ranks (the rendezvous NCCL does over its own network) runs on an
unshaped management bridge, 10.77.0.(11+i)/24 (eth0, as in fabric_ns.Fabric), which no plugin
traffic can take: the data addresses are not routed there.

Hosts look like fabric_ns.Fabric's to fabric_run.Runner: `workers` (ip: the management
address, for the bootstrap), `aggs` {"d<j>": Host} (ip: the device's data address).
"""
import re

import fabric_ns
from fabric_ns import FabricError, Host, sh

MGMT = "10.77.0"
WORKER_DATA, DEVICE_DATA, LINKS = "10.78.0", "10.79.0", "10.80"


def parse_end(text):
    """'w3:1' -> ('w', 3, 1); 'd0:5' -> ('d', 0, 5)."""
    m = re.fullmatch(r"([wd])(\d+):(\d+)", text)
    if not m:
        raise FabricError(f"plan circuit end {text!r} is not wN:port or dN:port")
    return m.group(1), int(m.group(2)), int(m.group(3))


class DirectFabric:
    """plan: the "plan" object of the planner's JSON (topologies, circuits); workers: N;
    link_mbit: every circuit's rate, each direction."""

    def __init__(self, prefix, workers, plan, link_mbit, mtu=9000):
        if not fabric_ns.NS_RE.match(prefix + "-"):
            raise FabricError(f"prefix {prefix!r} must look like cfx<pid>")
        self.prefix, self.mtu, self.link_mbit = prefix, mtu, link_mbit
        self.switch = f"{prefix}-sw"
        self.circuits = []  # (topology, end a, end b)
        for c in plan["circuits"]:
            self.circuits.append((int(c[0]), parse_end(c[1]), parse_end(c[2])))
        if len(self.circuits) > 255:
            raise FabricError(f"{len(self.circuits)} circuits: at most 255 here")
        devices = sorted({e[1] for _, a, b in self.circuits for e in (a, b) if e[0] == "d"})
        self.workers = [Host(f"w{i}", f"{prefix}-w{i}", f"{MGMT}.{11 + i}", link_mbit)
                        for i in range(workers)]
        for i, w in enumerate(self.workers):
            w.data_ip = f"{WORKER_DATA}.{1 + i}"
        self.aggs = {}
        for d in devices:
            ports = sum(1 for _, a, b in self.circuits for e in (a, b) if e[:2] == ("d", d))
            h = Host(f"d{d}", f"{prefix}-d{d}", f"{DEVICE_DATA}.{1 + d}", link_mbit * ports)
            h.data_ip = h.ip
            self.aggs[h.role] = h
        self.created = []

    def hosts(self):
        return self.workers + list(self.aggs.values())

    def host(self, end):
        kind, idx, _ = end
        return self.workers[idx] if kind == "w" else self.aggs[f"d{idx}"]

    def _add_ns(self, ns):
        sh(["ip", "netns", "add", ns])
        self.created.append(ns)
        sh(["ip", "-n", ns, "link", "set", "lo", "up"])
        for key in ("net.ipv6.conf.all.disable_ipv6=1", "net.ipv4.conf.all.rp_filter=0",
                    "net.ipv4.conf.default.rp_filter=0"):
            sh(["ip", "netns", "exec", ns, "sysctl", "-qw", key], check=False)

    def _data_address(self, h):
        sh(["ip", "-n", h.ns, "link", "add", "data0", "type", "veth", "peer", "name", "data0p"])
        for dev in ("data0", "data0p"):
            sh(["ip", "-n", h.ns, "link", "set", dev, "mtu", str(self.mtu), "up"])
        sh(["ip", "-n", h.ns, "addr", "add", f"{h.data_ip}/32", "dev", "data0"])

    def _circuit(self, k, a, b):
        ha, hb = self.host(a), self.host(b)
        da, db = f"p{a[2]}", f"p{b[2]}"
        ia, ib = f"{LINKS}.{k}.1", f"{LINKS}.{k}.2"
        sh(["ip", "-n", ha.ns, "link", "add", da, "type", "veth", "peer", "name", db, "netns",
            hb.ns])
        for h, dev, ip in ((ha, da, ia), (hb, db, ib)):
            sh(["ip", "-n", h.ns, "link", "set", dev, "mtu", str(self.mtu), "up"])
            sh(["ip", "-n", h.ns, "addr", "add", f"{ip}/30", "dev", dev])
            fabric_ns.Fabric._shape(h.ns, dev, self.link_mbit)
        # Each end reaches the other's data address over this circuit only.
        sh(["ip", "-n", ha.ns, "route", "add", f"{hb.data_ip}/32", "via", ib, "dev", da])
        sh(["ip", "-n", hb.ns, "route", "add", f"{ha.data_ip}/32", "via", ia, "dev", db])

    def build(self):
        self._add_ns(self.switch)
        sh(["ip", "-n", self.switch, "link", "add", "br0", "type", "bridge"])
        sh(["ip", "-n", self.switch, "link", "set", "br0", "up"])
        for w in self.workers:
            self._add_ns(w.ns)
            sh(["ip", "-n", w.ns, "link", "add", "eth0", "type", "veth", "peer", "name", w.role,
                "netns", self.switch])
            sh(["ip", "-n", w.ns, "link", "set", "eth0", "up"])
            sh(["ip", "-n", w.ns, "addr", "add", f"{w.ip}/24", "dev", "eth0"])
            sh(["ip", "-n", self.switch, "link", "set", w.role, "master", "br0", "up"])
            self._data_address(w)
        for h in self.aggs.values():
            self._add_ns(h.ns)
            self._data_address(h)
        for k, (_, a, b) in enumerate(self.circuits):
            self._circuit(k, a, b)
        if not any(a[0] == "w" and b[0] == "w" for _, a, b in self.circuits):
            self._ring_through_a_device()
        self._wait_reachable()

    def _ring_through_a_device(self):
        """Each worker reaches its ring neighbours (i +- 1) through the first device it is
        wired to, which forwards: the ring of a plan that has none."""
        n = len(self.workers)
        for i, w in enumerate(self.workers):
            routes = sh(["ip", "-n", w.ns, "route", "show"])
            m = re.search(rf"^{DEVICE_DATA}\.\d+ via (\S+) dev (\S+)", routes, re.M)
            if not m:
                raise FabricError(f"{w.role} has neither a ring nor a device")
            for j in {(i + 1) % n, (i - 1) % n} - {i}:
                # From the data address: the neighbour answers over its own route back.
                sh(["ip", "-n", w.ns, "route", "add", f"{self.workers[j].data_ip}/32", "via",
                    m.group(1), "dev", m.group(2), "src", w.data_ip])
        for h in self.aggs.values():
            sh(["ip", "netns", "exec", h.ns, "sysctl", "-qw", "net.ipv4.ip_forward=1"])

    def _wait_reachable(self):
        """Every data address each worker has a route to, reachable from it: the circuits and
        the routes at both ends work."""
        for w in self.workers:
            routes = sh(["ip", "-n", w.ns, "route", "show"])
            ips = re.findall(rf"^({WORKER_DATA}\.\d+|{DEVICE_DATA}\.\d+) via", routes, re.M)
            fabric_ns.wait_reachable(w.ns, ips)

    def drop_report(self):
        lines = []
        for h in self.hosts():
            parts = []
            for dev in sorted(re.findall(r"^\d+: (p\d+)@", sh(["ip", "-n", h.ns, "link"]), re.M)):
                t = sh(["tc", "-s", "-n", h.ns, "qdisc", "show", "dev", dev], check=False)
                m = re.search(r"dropped (\d+)", t)
                parts.append(f"{dev} tbf dropped {m.group(1) if m else '?'}")
            lines.append(f"#   {h.role}: " + ", ".join(parts))
        return "\n".join(lines)

    def teardown(self):
        fabric_ns.delete_namespaces(list(reversed(self.created)))
        self.created = []

    def describe(self):
        lines = [f"# direct-connect fabric {self.prefix}: {len(self.workers)} workers, "
                 f"{len(self.aggs)} devices, {len(self.circuits)} circuits at {self.link_mbit} "
                 f"Mbit/s each way (tbf both ends), MTU {self.mtu}; bootstrap on {self.switch}"]
        for t, a, b in self.circuits:
            lines.append(f"#   topology {t}: {self.host(a).role}:p{a[2]} <-> "
                         f"{self.host(b).role}:p{b[2]}")
        return "\n".join(lines)
