#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""bench/fabric/fabric_goals.py's arithmetic on made-up conflux_fabric.py reports: the figures
of one run (ratios against Gloo's row of the same size, confluxd's CPU and wake-ups from its
counters), medians over runs, and each goal met or not by the median."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "fabric"))
import fabric_goals  # noqa: E402

FAILED = []


def check(what, got, want, tol=1e-9):
    ok = (got is None and want is None) or (
        got is not None and want is not None and abs(got - want) <= tol)
    if not ok:
        FAILED.append(f"{what}: got {got!r}, want {want!r}")


def report(c_algbw, c_cpu, g_algbw, g_cpu, over_link, cpu_s, bytes_in, sleeps, gloo=True):
    rows = [{"fabric": "lossless", "system": "conflux 1 agg @4x", "bytes": 64 << 20,
             "algbw": c_algbw, "host_cpu_s_per_gb": c_cpu},
            # a smaller size and a lossy row: neither may be taken
            {"fabric": "lossless", "system": "conflux 1 agg @4x", "bytes": 1 << 20,
             "algbw": 9.0, "host_cpu_s_per_gb": 1.0},
            {"fabric": "lossy", "system": "conflux 1 agg @4x", "bytes": 128 << 20,
             "algbw": 9.0, "host_cpu_s_per_gb": 1.0}]
    if gloo:
        rows.append({"fabric": "lossless", "system": "gloo ring (tcp)", "bytes": 64 << 20,
                     "algbw": g_algbw, "host_cpu_s_per_gb": g_cpu})
    aggs = [{"fabric": "lossless", "topology": "fat", "role": "a0", "bytes_in": bytes_in,
             "cpu_seconds": cpu_s, "sleeps": sleeps},
            {"fabric": "lossy", "topology": "fat", "role": "a0", "bytes_in": 1,
             "cpu_seconds": 100.0, "sleeps": 1}]
    return {"meta": {"labels": {"fat": "conflux 1 agg @4x"}, "aggregators": aggs},
            "figures": {"algbw_over_link_fat": over_link}, "rows": rows}


def main():
    f = fabric_goals.run_figures(report(0.6, 3.0, 0.4, 6.0, 0.96, 2.0, 8e9, 1000))
    check("algbw ratio", f["algbw_ratio"], 1.5)
    check("host cpu ratio", f["host_cpu_ratio"], 0.5)
    check("over link", f["algbw_over_link"], 0.96)
    check("daemon cpu per GB", f["daemon_cpu_s_per_gb"], 0.25)
    check("KiB per wake-up", f["kib_per_wakeup"], 8e9 / 1000 / 1024)
    # No Gloo row: no ratios, the rest still measured; no sleeps counted: no per-wake figure.
    f = fabric_goals.run_figures(report(0.6, 3.0, 0, 0, 0.9, 2.0, 8e9, 0, gloo=False))
    check("no gloo: algbw ratio", f["algbw_ratio"], None)
    check("no gloo: cpu ratio", f["host_cpu_ratio"], None)
    check("no gloo: daemon", f["daemon_cpu_s_per_gb"], 0.25)
    check("no sleeps", f["kib_per_wakeup"], None)

    def figs(ratio, cpu, link, daemon):
        return {"algbw_ratio": ratio, "host_cpu_ratio": cpu, "algbw_over_link": link,
                "daemon_cpu_s_per_gb": daemon, "kib_per_wakeup": 500.0}
    by_rate = {
        1000: [figs(1.5, 0.7, 0.99, 0.3), figs(1.5, 0.7, 0.94, 0.3), figs(1.5, 0.7, 0.96, 0.3)],
        2500: [figs(1.5, 0.65, 0.98, 0.31), figs(1.5, 0.59, 0.98, 0.19),
               figs(1.5, 0.70, 0.98, 0.35)],
        5000: [figs(1.61, 0.58, 0.9, 0.2), figs(0.93, 1.01, 0.6, 0.3), figs(1.68, 0.55, 0.9, 0.2),
               figs(1.40, 0.64, 0.9, 0.2)],
    }
    lines, medians, verdicts = fabric_goals.summarize(by_rate)
    check("median 1000 link", medians[1000]["algbw_over_link"], 0.96)
    check("median 2500 cpu", medians[2500]["host_cpu_ratio"], 0.65)
    check("median 5000 ratio (even count)", medians[5000]["algbw_ratio"], (1.40 + 1.61) / 2)
    want = [True, False, False, True, False]  # 0.96>=0.95, 0.31>0.2, 0.65>0.6, 1.505>=1.42, 0.61>0.6
    got = [met for _, _, met in verdicts]
    if got != want:
        FAILED.append(f"verdicts: got {got}, want {want}")
    if not any("NOT met" in line for line in lines) or not any(": met" in line for line in lines):
        FAILED.append("the printed goals say neither 'met' nor 'NOT met'")
    # A rate not run: its goals are not measured, not met.
    _, _, verdicts = fabric_goals.summarize({2500: by_rate[2500]})
    if [met for _, _, met in verdicts] != [None, False, False, None, None]:
        FAILED.append(f"missing rates: got {[met for _, _, met in verdicts]}")
    for line in FAILED:
        print("FAIL " + line)
    print("ok" if not FAILED else f"{len(FAILED)} failed")
    return 1 if FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
