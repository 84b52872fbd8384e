#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""`conflux plan`: the model's figures for the fabric of bench/fabric/README.md (8 workers at
100 Mbit/s; one aggregator at 8x; a tree of 2 leaves at 4x under a root at 2x), its table,
and a usage error."""
import json
import subprocess
import sys


def plan(conflux, *args):
    return subprocess.run([conflux, "plan", *args], capture_output=True, text=True, timeout=30)


def main():
    conflux = sys.argv[1]
    failures = []

    def check(what, ok):
        if not ok:
            failures.append(what)

    base = ["--workers", "8", "--worker-gbit", "0.1", "--agg-cores", "2", "--core-gbit", "10"]
    r = plan(conflux, *base, "--agg-gbit", "0.8", "--max-aggregators", "1", "--json")
    check(f"fat: exit {r.returncode} {r.stderr}", r.returncode == 0)
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    check("ring ceiling N/(2(N-1))", abs(rows["ring"]["of_link"] - 8 / 14) < 1e-9)
    check("one aggregator at 8x reaches the link", abs(rows["1 aggregator"]["of_link"] - 1) < 1e-9)
    check("aggregation is 1.75x the ring at N=8", abs(rows["1 aggregator"]["vs_ring"] - 1.75) < 1e-9)
    check("no tree with one aggregator host", not any(k.startswith("tree") for k in rows))
    hybrid = rows["1 aggregator + ring (hybrid)"]
    check(f"an aggregator at the link's sum needs no ring: {hybrid}",
          hybrid["ring_share"] == 0 and abs(hybrid["of_link"] - 1) < 1e-9)

    # The hybrid split at 4 workers, one aggregator at 0.25x: the ring carries
    # 1 - 1.5 / (16 - 1 + 1.5) = 10/11 of every AllReduce, algbw L / (10/11 * 1.5 + 1/11).
    r = plan(conflux, "--workers", "4", "--worker-gbit", "1", "--agg-gbit", "0.25",
             "--max-aggregators", "1", "--json")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    hybrid = rows["1 aggregator + ring (hybrid)"]
    check(f"hybrid at 0.25x: {hybrid}", abs(hybrid["ring_share"] - 10 / 11) < 1e-9 and
          abs(hybrid["algbw_gbit"] - 1 / (10 / 11 * 1.5 + 1 / 11)) < 1e-9)
    check("hybrid beats both its parts", hybrid["algbw_gbit"] > rows["ring"]["algbw_gbit"] and
          hybrid["algbw_gbit"] > rows["1 aggregator"]["algbw_gbit"])

    r = plan(conflux, *base, "--agg-gbit", "0.4", "--root-gbit", "0.2", "--max-aggregators", "3",
             "--json")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    tree = rows["tree 2 leaves + root"]
    # A leaf's link carries its 4 workers' streams and one to/from the root: 0.4 / 5.
    check(f"tree 2 leaves at 4x: {tree}", abs(tree["of_link"] - 0.8) < 1e-9)
    check("tree limited by the leaf link", tree["limit"] == "leaf link")
    check("tree needs 3 hosts", tree["aggregators"] == 3)
    check("one aggregator at 4x: half the link", abs(rows["1 aggregator"]["of_link"] - 0.5) < 1e-9)
    check("2 striped at 4x: the link", abs(rows["2 striped"]["of_link"] - 1) < 1e-9)

    # Results straight down (SPEC.md section 7): the leaf's link carries its 4 workers only,
    # so the same tree reaches the link, as measured (bench/fabric/README.md, run U).
    r = plan(conflux, *base, "--agg-gbit", "0.4", "--root-gbit", "0.2", "--max-aggregators", "3",
             "--tree-results", "direct", "--json")
    out = json.loads(r.stdout)
    check("tree_results in the JSON", out.get("tree_results") == "direct")
    tree = {x["layout"]: x for x in out["layouts"]}["tree 2 leaves + root"]
    check(f"direct tree 2 leaves at 4x: {tree}", abs(tree["of_link"] - 1) < 1e-9 and
          tree["limit"] == "worker link")
    # A parent sends straight down for at most 3 children. Leaves at 2x: 2 leaves of 4 workers
    # each, straight down: 0.2 / 4; 4 leaves of 2 workers each go through their leaves:
    # 0.2 / (2 + 1), where straight down would have reached the link.
    r = plan(conflux, *base, "--agg-gbit", "0.2", "--root-gbit", "0.8", "--max-aggregators", "5",
             "--tree-results", "direct", "--json")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    check(f"straight down for 2 children: {rows['tree 2 leaves + root']}",
          abs(rows["tree 2 leaves + root"]["of_link"] - 0.5) < 1e-9)
    check(f"not for 4: {rows['tree 4 leaves + root']}",
          abs(rows["tree 4 leaves + root"]["of_link"] - 2 / 3) < 1e-9)
    r = plan(conflux, *base, "--agg-gbit", "0.4", "--tree-results", "sideways")
    check(f"a bad --tree-results is a usage error: {r.returncode}", r.returncode == 2)

    # Cores bind: 1 core of 0.2 Gbit/s per aggregator.
    r = plan(conflux, "--workers", "8", "--worker-gbit", "0.1", "--agg-gbit", "10", "--agg-cores",
             "1", "--core-gbit", "0.2", "--max-aggregators", "1", "--json")
    one = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}["1 aggregator"]
    check(f"cores bind: {one}", one["limit"] == "aggregator cores" and
          abs(one["algbw_gbit"] - 0.025) < 1e-9)

    # Cores per aggregator host: 4 workers at 100 Gbit/s, aggregators at the
    # workers' speed (the default). One aggregator: its link carries 4 streams, 25 Gbit/s each;
    # it reduces 100 Gbit/s of contributions: 4 DPDK lcores of 28 (bench/capacity), 5 kernel-UDP
    # cores of 22, 2 of a given 50; 4 striped reach the workers' link: each aggregator takes a
    # quarter of 4 streams at 100 Gbit/s, again 100 Gbit/s, again 4 lcores.
    def rows_of(*args):
        r = plan(conflux, "--workers", "4", "--worker-gbit", "100", "--max-aggregators", "4",
                 "--json", *args)
        check(f"plan {args}: exit {r.returncode} {r.stderr}", r.returncode == 0)
        out = json.loads(r.stdout) if r.returncode == 0 else {"layouts": []}
        return out, {x["layout"]: x for x in out["layouts"]}
    out, rows = rows_of("--dataplane", "dpdk")
    one = rows.get("1 aggregator", {})
    check(f"dpdk default: {out.get('core_gbit')}", out.get("core_gbit") == 28 and
          out.get("dataplane") == "dpdk" and out.get("agg_gbit") == 100)
    check(f"1 aggregator, dpdk: {one}", one.get("cores") == 4 and
          abs(one.get("algbw_gbit", 0) - 25) < 1e-9 and one.get("limit") == "aggregator link")
    check(f"4 striped: {rows.get('4 striped')}", rows.get("4 striped", {}).get("cores") == 4 and
          rows.get("4 striped", {}).get("limit") == "worker link")
    check("the ring needs no aggregator core", rows.get("ring", {}).get("cores") == 0)
    out, rows = rows_of()
    check(f"udp by default: {out.get('core_gbit')} {rows.get('1 aggregator')}",
          out.get("dataplane") == "udp" and out.get("core_gbit") == 22 and
          rows.get("1 aggregator", {}).get("cores") == 5)
    _, rows = rows_of("--core-gbit", "50")
    check(f"given core speed: {rows.get('1 aggregator')}",
          rows.get("1 aggregator", {}).get("cores") == 2)
    # With a core count, cores bind below it and the row needs no more than it has.
    _, rows = rows_of("--agg-cores", "2")
    one = rows.get("1 aggregator", {})
    check(f"2 udp cores: {one}", one.get("limit") == "aggregator cores" and
          abs(one.get("algbw_gbit", 0) - 11) < 1e-9 and one.get("cores") == 2)
    r = plan(conflux, "--workers", "4", "--worker-gbit", "100")
    check(f"table has cores/host: {r.stdout[:300]}", "cores/host" in r.stdout and
          "cores as needed x 22 Gbit/s (udp, measured)" in r.stdout)
    r = plan(conflux, "--workers", "4", "--worker-gbit", "100", "--dataplane", "verbs")
    check(f"a bad --dataplane is a usage error: {r.returncode}", r.returncode == 2)

    # Depth 3 only when asked for: 16 workers, 4 leaves (4 workers each) under 2 middle
    # aggregators under a root. A leaf's link carries 4 + 1 streams (0.4 / 5), a middle one's
    # 2 + 1 (0.4 / 3), the root's 2 (0.2 / 2 or 0.15 / 2).
    deep = ["--workers", "16", "--worker-gbit", "0.1", "--agg-cores", "2", "--core-gbit", "10",
            "--agg-gbit", "0.4", "--max-aggregators", "7", "--json"]
    r = plan(conflux, *deep, "--root-gbit", "0.2")
    check("no depth-3 rows by default", " mid " not in r.stdout)
    r = plan(conflux, *deep, "--root-gbit", "0.2", "--max-depth", "3")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    t3 = rows.get("tree 4 leaves + 2 mid + root", {})
    check(f"depth 3 limited by the leaf link: {t3}", t3.get("limit") == "leaf link" and
          abs(t3.get("of_link", 0) - 0.8) < 1e-9 and t3.get("aggregators") == 7)
    check("depth 3 within 7 hosts only", all(x["aggregators"] <= 7 for x in rows.values()))
    r = plan(conflux, *deep, "--root-gbit", "0.15", "--max-depth", "3")
    t3 = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}["tree 4 leaves + 2 mid + root"]
    check(f"depth 3 limited by the root link: {t3}", t3["limit"] == "root link" and
          abs(t3["algbw_gbit"] - 0.075) < 1e-9)
    # Depth 4: 8 leaves of 2 workers (0.4 / 3 each way), 4 then 2 middle aggregators with 2
    # children each (0.4 / 3), a root with 2 (0.15 / 2 binds): 15 hosts.
    r = plan(conflux, *deep[:-3], "--max-aggregators", "15", "--json", "--root-gbit", "0.15",
             "--max-depth", "4")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    t4 = rows.get("tree 8 leaves + 4 + 2 mid + root", {})
    check(f"depth 4 limited by the root link: {t4}", t4.get("limit") == "root link" and
          abs(t4.get("algbw_gbit", 0) - 0.075) < 1e-9 and t4.get("aggregators") == 15)
    check("depth 4 lists depth 3 too", "tree 4 leaves + 2 mid + root" in rows)
    check("depth 4 lists no deeper tree", not any(k.count("+") > 3 for k in rows))
    check("depth 4 within 15 hosts only", all(x["aggregators"] <= 15 for x in rows.values()))
    # A middle level binds: 8 workers, 2 middle aggregators with 3 leaves each (6 leaves of at
    # most 2 workers: 0.3 / 3 = 0.1), a middle one's link 3 + 1 streams (0.3 / 4 = 0.075), the
    # root's 2 (0.3 / 2).
    r = plan(conflux, "--workers", "8", "--worker-gbit", "0.1", "--agg-gbit", "0.3",
             "--agg-cores", "2", "--core-gbit", "10", "--max-aggregators", "9", "--max-depth", "3",
             "--json")
    rows = {x["layout"]: x for x in json.loads(r.stdout)["layouts"]}
    t3 = rows.get("tree 6 leaves + 2 mid + root", {})
    check(f"depth 3 limited by the middle link: {t3}", t3.get("limit") == "middle link" and
          abs(t3.get("algbw_gbit", 0) - 0.075) < 1e-9 and t3.get("aggregators") == 9)
    # --top 1: per host count only the fastest layout. 8 workers at 0.1, aggregators at 0.3,
    # depth 3, up to 9 hosts: of the 4-host layouts "4 striped" (a quarter of 8 workers each:
    # 2 links of 0.1 under its 0.3, so the workers' link binds)
    # beats "tree 3 leaves + root" (a leaf's link carries 3 + 1 streams: 0.3 / 4).
    full = ["--workers", "8", "--worker-gbit", "0.1", "--agg-gbit", "0.3", "--agg-cores", "2",
            "--core-gbit", "10", "--max-aggregators", "9", "--max-depth", "3", "--json"]
    every = json.loads(plan(conflux, *full).stdout)["layouts"]
    r = plan(conflux, *full, "--top", "1")
    best = json.loads(r.stdout)["layouts"]
    hosts = sorted({x["aggregators"] for x in every})
    check(f"--top 1: one row per host count: {[x['aggregators'] for x in best]}",
          [x["aggregators"] for x in best] == hosts)
    for x in best:
        peers = [y["algbw_gbit"] for y in every if y["aggregators"] == x["aggregators"]]
        check(f"--top 1 keeps the fastest of {x['aggregators']} hosts: {x}",
              x["algbw_gbit"] == max(peers))
    four = [x["layout"] for x in best if x["aggregators"] == 4]
    check(f"4 hosts: striping beats the tree: {four}", four == ["4 striped"])
    two = [x["aggregators"] for x in json.loads(plan(conflux, *full, "--top", "2").stdout)["layouts"]]
    check(f"--top 2: at most two per host count: {two}",
          all(two.count(h) == min(2, sum(1 for x in every if x["aggregators"] == h)) for h in hosts))
    r = plan(conflux, *full, "--top", "0")
    check(f"--top 0 is a usage error: {r.returncode}", r.returncode == 2)

    r = plan(conflux, *deep, "--max-depth", "10")
    check(f"--max-depth 10 is a usage error: {r.returncode}", r.returncode == 2)

    r = plan(conflux, *base, "--agg-gbit", "0.4")
    check("table has a header and the tree row", r.returncode == 0 and "limited by" in r.stdout
          and "tree 2 leaves + root" in r.stdout)
    r = plan(conflux, "--worker-gbit", "1", "--agg-gbit", "1")
    check(f"missing --workers is a usage error: {r.returncode}", r.returncode == 2)
    r = plan(conflux, "--workers", "8", "--worker-gbit", "-1", "--agg-gbit", "1")
    check(f"negative rate is a usage error: {r.returncode}", r.returncode == 2)

    direct_checks(conflux, check)

    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} failure(s)")
    return 1 if failures else 0


def direct_checks(conflux, check):
    """--fabric direct through the CLI: the JSON document, the circuits, --pareto, the errors
    (direct_plan_tests has the planner's cases)."""
    # 6 workers of 4 ports and 2 of 3, 4-port devices, 1 device: a ring on every worker's
    # first two ports and a segment ring whose device takes the two 3-port workers.
    args = ["--fabric", "direct", "--workers", "8", "--worker-gbit", "10", "--ports", "4x6,3x2",
            "--device-ports", "4", "--devices", "1"]
    r = plan(conflux, *args, "--json")
    check(f"direct: exit {r.returncode} {r.stderr}", r.returncode == 0)
    out = json.loads(r.stdout) if r.returncode == 0 else {}
    p = out.get("plan", {})
    check(f"direct plan: {p.get('algbw_gbit')} {p.get('devices')}",
          abs(p.get("algbw_gbit", 0) - (80 / 7 + 10)) < 1e-9 and p.get("devices") == 1 and
          p.get("optimal") is True and p.get("gap") == 0)
    kinds = sorted(t["kind"] for t in p.get("topologies", []))
    check(f"direct kinds: {kinds}", kinds == ["ring", "segment ring"])
    check(f"ring only: {out.get('ring_only')}", out.get("ring_only", {}).get("rings") == 1)
    check(f"full tree: {out.get('full_tree')}", out.get("full_tree", {}).get("devices") == 9)
    circuits = p.get("circuits", [])
    # 8 ring links; the segment ring: 2 members, 6 other workers and the device in a ring of 7.
    check(f"{len(circuits)} circuits", len(circuits) == 8 + 2 + 7)
    check("the members are the 3-port workers",
          [1, "w6:2", "d0:0"] in circuits and [1, "w7:2", "d0:1"] in circuits)
    r = plan(conflux, *args[:-1], "4", "--pareto", "--json")
    rows = json.loads(r.stdout).get("pareto", []) if r.returncode == 0 else []
    check(f"--pareto: one row per budget 0..4: {len(rows)}",
          [x["budget"] for x in rows] == [0, 1, 2, 3, 4] and rows[0]["devices"] == 0 and
          all(x["devices"] == 1 for x in rows[1:]))
    r = plan(conflux, *args[:-1], "4", "--pareto")
    check(f"--pareto table: {r.stdout}", r.returncode == 0 and
          "        1-4       1" in r.stdout and "ring + segment ring" in r.stdout)
    r = plan(conflux, *args, "--circuits")
    check(f"--circuits table: {r.stdout}", "w6:2 <-> d0:0" in r.stdout)
    # Errors: no plan fits (exit 2, the reason), ports that do not add up, direct options
    # without --fabric direct.
    r = plan(conflux, "--fabric", "direct", "--workers", "8", "--worker-gbit", "10", "--ports",
             "1", "--device-ports", "4", "--devices", "2")
    check(f"one port, 2 devices: {r.returncode} {r.stderr}",
          r.returncode == 2 and "needs 3 devices" in r.stderr)
    r = plan(conflux, *args[:7], "4x5", "--devices", "1")
    check(f"5 of 8 workers: {r.returncode} {r.stderr}", r.returncode == 2 and "--ports 4x5" in r.stderr)
    r = plan(conflux, "--workers", "8", "--worker-gbit", "10", "--ports", "4")
    check(f"--ports without --fabric direct: {r.returncode}",
          r.returncode == 2 and "--fabric direct" in r.stderr)
    r = plan(conflux, "--fabric", "direct", "--workers", "8", "--worker-gbit", "10")
    check(f"--fabric direct without --ports: {r.returncode}", r.returncode == 2 and
          "--ports" in r.stderr)


if __name__ == "__main__":
    sys.exit(main())
