#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Include-layer check: fails when a lower folder includes a higher one.

Reads the quoted #include lines of every C++/CUDA source, resolves each to a file of the
tree (the including file's folder first, then the include roots below, as the build sets
them), and compares the layers of the two folders. Two orders are checked:

  * the top-level components (LAYERS; a subfolder named there is a component of its own): a component may include its own files and those of
    lower layers; two components on the same layer may not include each other;
  * the folders inside aggregator/ (AGGREGATOR_LAYERS), nccl_plugin/ (PLUGIN_LAYERS) and
    tools/ (TOOLS_LAYERS), the same way; "." in such a table names the files directly in the
    component's folder (aggregator/config.h). A source in a folder that its component's table
    does not name fails too (a new folder gets a layer), unless that folder is a component of
    its own in LAYERS (aggregator/cli).

Usage: scripts/check_layers.py [--root DIR] [--verbose]   (exit 1 on a backward include)
       scripts/check_layers.py --self-test                 (checks the check on a small tree)
"""
import argparse
import os
import re
import sys
import tempfile

# Lower numbers are lower layers. Components on one layer are peers (no arrow either way).
LAYERS = {
    "common": 0,
    "protocol": 1,
    "aggregator": 2,
    "nccl_plugin": 2,
    "aggregator/cli": 3,  # conflux, the operator CLI: the daemon's config and the worker client
    "tools": 3,
    "bench": 4,
    "tests": 4,
}
PLUGIN_LAYERS = {
    "nccl": 0,    # NCCL's declarations: types, versioned structs, constants
    "net": 1,     # the TCP transport
    "client": 1,  # the worker engine that talks to the aggregators
    "cuda": 1,    # the CUDA driver API, loaded at run time
    "core": 2,    # version-neutral ncclNet core, parameters, process state
    "collnet": 3,
    "tuner": 4,
    "abi": 5,     # the per-version adapters NCCL loads
}
TOOLS_LAYERS = {
    "util": 0,    # process, ready-file and metrics helpers (conflux_tools_util)
    "verify": 0,  # element codec and rank-order reference (conflux_tools_verify)
    "worker": 1,  # conflux-allreduce-worker
    "driver": 1,  # conflux-nccl-driver
}
AGGREGATOR_LAYERS = {
    "util": 0,       # token bucket, rate limiter, random, link speed, IPv4 text (endpoints, ranges)
    ".": 1,          # the files directly in aggregator/: Config, its parameter table, its loading
    "engine": 1,     # jobs, slots, the reduction engine (reads no Config)
    "dataplane": 2,  # the Dataplane interface and its backends (udp/, dpdk/)
    "tree": 2,       # reduction tree, leaf side: the uplink thread, SlotEngine's leaf path
    "control": 3,    # the control thread: connections, rendezvous, job life cycle, multicast
    "metrics": 4,    # Prometheus text and its HTTP endpoint, over the control plane
    "daemon": 5,     # confluxd as an object (the threads wired together) and main()
    "fuzz": 6,       # stateful fuzz targets, the slot engine's and a whole daemon's
}
# The folders inside a component, ordered the same way.
INNER_LAYERS = {
    "aggregator": AGGREGATOR_LAYERS,
    "nccl_plugin": PLUGIN_LAYERS,
    "tools": TOOLS_LAYERS,
}
# Where the build lets a quoted include be found (besides the including file's folder).
INCLUDE_ROOTS = [
    ".",
    "nccl_plugin",
    "common/include",
    "common/src",
    "protocol/include",
    "nccl_plugin/client/include",
    "nccl_plugin/client/src",
    "tools",
]
SOURCE_EXT = (".h", ".hpp", ".cc", ".cpp", ".cu", ".cuh")
SKIP_DIRS = {"build", ".git"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def folder_layer(rel):
    """(name, layer, order) of the folder a file belongs to, for each order it is in."""
    parts = rel.split("/")
    out = []
    for n in (2, 1):  # the longest prefix named in LAYERS
        name = "/".join(parts[:n])
        if len(parts) > n and name in LAYERS:
            out.append((name, LAYERS[name], "top"))
            break
    inner = INNER_LAYERS.get(parts[0], {})
    if len(parts) > 2 and parts[1] in inner:
        out.append((parts[0] + "/" + parts[1], inner[parts[1]], parts[0]))
    elif len(parts) == 2 and "." in inner:  # a file directly in the component's folder
        out.append((parts[0] + "/.", inner["."], parts[0]))
    return out


def unplaced(mine):
    """The component whose inner table names no layer for this file's folder, else None."""
    top = [name for name, _, order in mine if order == "top"]
    if top and top[0] in INNER_LAYERS and all(order != top[0] for _, _, order in mine):
        return top[0]
    return None


def resolve(root, including_rel, target):
    candidates = [os.path.dirname(including_rel)] + INCLUDE_ROOTS
    for base in candidates:
        path = os.path.normpath(os.path.join(base, target))
        if not path.startswith("..") and os.path.isfile(os.path.join(root, path)):
            return path.replace(os.sep, "/")
    return None


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and not d.startswith("build"))
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def check(root, verbose=False, out=sys.stdout):
    """Returns the list of violations (strings) and prints them."""
    violations = []
    arrows = {}
    nfiles = 0
    for rel in sources(root):
        mine = folder_layer(rel)
        if not mine:
            continue
        nfiles += 1
        if comp := unplaced(mine):
            violations.append(f"{rel}: its folder has no layer in {comp}'s table "
                              f"(scripts/check_layers.py INNER_LAYERS)")
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                target = resolve(root, rel, m.group(1))
                if target is None:
                    continue
                theirs = {order: (name, layer) for name, layer, order in folder_layer(target)}
                for name, layer, order in mine:
                    if order not in theirs:
                        continue
                    tname, tlayer = theirs[order]
                    if tname == name:
                        continue
                    arrows[(name, tname)] = arrows.get((name, tname), 0) + 1
                    if tlayer >= layer:
                        kind = "a peer" if tlayer == layer else "a higher folder"
                        violations.append(
                            f"{rel}:{lineno}: {name} (layer {layer}) includes {kind}: "
                            f'"{m.group(1)}" -> {tname} (layer {tlayer})')
    for v in violations:
        print(v, file=out)
    if verbose:
        for (a, b), n in sorted(arrows.items()):
            print(f"  {a} -> {b}: {n} include(s)", file=out)
    status = "FAILED" if violations else "ok"
    print(f"check_layers: {status}: {nfiles} files, {sum(arrows.values())} includes across "
          f"{len(arrows)} folder pairs, {len(violations)} violation(s)", file=out)
    return violations


def self_test():
    """Builds a small tree with five backward includes, a file in no layer, and allowed ones."""
    files = {
        "common/include/conflux/common/a.h": '#include "conflux/protocol/b.h"\n',
        "protocol/include/conflux/protocol/b.h": '#include "conflux/common/a.h"\n',
        "nccl_plugin/nccl/types.h": "// bottom\n",
        "nccl_plugin/core/state.h": '#include "nccl/types.h"\n\n#include "collnet/api.h"\n',
        "nccl_plugin/collnet/api.h": '#include "core/state.h"\n',
        "nccl_plugin/net/socket.h": '#include <vector>\n#include "conflux/client/engine.h"\n',
        "nccl_plugin/client/include/conflux/client/engine.h": "// engine\n",
        "tests/x_test.cc": '#include "nccl_plugin/core/state.h"\n#include "missing.h"\n',
        # aggregator/: its own files (".") sit above util/ and beside engine/
        "aggregator/config.h": '#include "aggregator/util/ipv4.h"\n',
        "aggregator/config.cc": '#include "config.h"\n#include "aggregator/control/groups.h"\n',
        "aggregator/util/ipv4.h": "// bottom\n",
        "aggregator/engine/job.h": '#include "aggregator/util/ipv4.h"\n#include "aggregator/config.h"\n',
        "aggregator/control/groups.h": '#include "aggregator/config.h"\n#include "aggregator/engine/job.h"\n',
        "aggregator/daemon/main.cc": '#include "aggregator/control/groups.h"\n',
        "aggregator/misc/x.h": "// in a folder the table does not name\n",
        "aggregator/cli/main.cc": '#include "aggregator/daemon/main.cc"\n',  # not inside aggregator/
    }
    with tempfile.TemporaryDirectory() as root:
        for rel, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                f.write(text)
        with open(os.devnull, "w", encoding="utf-8") as null:
            got = check(root, out=null)
    want = [
        "aggregator/config.cc:2: aggregator/. (layer 1) includes a higher folder",
        "aggregator/engine/job.h:2: aggregator/engine (layer 1) includes a peer",
        "aggregator/misc/x.h: its folder has no layer in aggregator's table",
        "common/include/conflux/common/a.h:1: common (layer 0) includes a higher folder",
        "nccl_plugin/core/state.h:3: nccl_plugin/core (layer 2) includes a higher folder",
        "nccl_plugin/net/socket.h:2: nccl_plugin/net (layer 1) includes a peer",
    ]
    ok = len(got) == len(want) and all(g.startswith(w) for g, w in zip(got, want))
    for g in got:
        print("  found:", g)
    print("check_layers self-test:", "ok" if ok else "FAILED (wanted: %s)" % want)
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--verbose", action="store_true", help="also list every folder arrow")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return 0 if self_test() else 1
    return 1 if check(os.path.abspath(args.root), args.verbose) else 0


if __name__ == "__main__":
    sys.exit(main())
