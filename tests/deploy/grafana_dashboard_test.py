#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/grafana-dashboard.json is valid JSON whose panels query only metrics that confluxd
exports (the metric table of aggregator/README.md, which a test keeps complete), each panel with
a Prometheus target. Usage: grafana_dashboard_test.py SOURCE_DIR"""
import json
import os
import re
import sys


def main():
    src = sys.argv[1]
    dash = json.load(open(os.path.join(src, "deploy", "grafana-dashboard.json")))
    readme = open(os.path.join(src, "aggregator", "README.md")).read()
    documented = set(re.findall(r"^\| `(conflux_\w+)` \|", readme, re.M))
    assert len(documented) > 20, "no metric table found in aggregator/README.md"
    used = set()
    assert dash["panels"], "no panels"
    for p in dash["panels"]:
        assert p["targets"], f"panel {p['title']} has no target"
        for t in p["targets"]:
            # Metric names only: "by (...)" names labels (conflux_job is one).
            names = set(re.findall(r"\b(conflux_\w+)", re.sub(r"by \([^)]*\)", "", t["expr"])))
            assert names, f"{p['title']}: {t['expr']} queries no conflux metric"
            unknown = names - documented
            assert not unknown, f"{p['title']}: {sorted(unknown)} are not confluxd metrics"
            used |= names
    for must in ("conflux_job_bytes_in_total", "conflux_dataplane_drops_total",
                 "conflux_jobs_active"):
        assert must in used, f"the dashboard does not show {must}"
    print(f"grafana dashboard: {len(dash['panels'])} panels over {len(used)} confluxd metrics")


if __name__ == "__main__":
    main()
