#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The Kubernetes files of deploy/kubernetes, parsed (python3-yaml) and checked for what makes
the deployment work: the DaemonSet runs confluxd on the host network (workers reach the node
address, no NAT) with the control and metrics ports of the example config declared, readiness
and liveness probes on the metrics port's /healthz, and CONFLUX_SECRET from the Secret the file
defines; a rolling update of one daemon at a time whose preStop drains it (`conflux drain --wait`)
within the grace period, readiness on /readyz; a headless Service over the pods, which the
training-job fragment names (dns:NAME:PORT) as it loads the plugin and takes the same secret.
Usage: k8s_manifest_test.py SOURCE_DIR"""
import os
import sys
import tomllib

import yaml

from procs import check, fail


def env_map(container):
    return {e["name"]: e for e in container.get("env", [])}


def main():
    src = sys.argv[1]
    kdir = os.path.join(src, "deploy", "kubernetes")
    cfg = tomllib.load(open(os.path.join(src, "deploy", "confluxd.example.toml"), "rb"))
    control_port, metrics_port = cfg.get("control_port", 7470), cfg.get("metrics_port", 9470)

    docs = [d for d in yaml.safe_load_all(open(os.path.join(kdir, "confluxd-daemonset.yaml"))) if d]
    kinds = {d["kind"]: d for d in docs}
    check(set(kinds) >= {"Secret", "DaemonSet", "Service"}, f"kinds {sorted(kinds)}")
    secret = kinds["Secret"]
    secret_keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    ds = kinds["DaemonSet"]
    check(ds["apiVersion"] == "apps/v1", "DaemonSet apiVersion")
    check(ds["spec"]["selector"]["matchLabels"].items() <=
          ds["spec"]["template"]["metadata"]["labels"].items(), "selector does not match the pods")
    pod = ds["spec"]["template"]["spec"]
    check(pod.get("hostNetwork") is True, "hostNetwork is not true")
    check(pod.get("dnsPolicy") == "ClusterFirstWithHostNet", "dnsPolicy with hostNetwork")
    (c,) = [c for c in pod["containers"] if c["name"] == "confluxd"]
    ports = {p["name"]: p for p in c["ports"]}
    check(ports["control"]["containerPort"] == control_port and
          ports["control"].get("protocol", "TCP") == "TCP", f"control port {ports.get('control')}")
    check(ports["metrics"]["containerPort"] == metrics_port, f"metrics port {ports.get('metrics')}")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        get = c.get(probe, {}).get("httpGet")
        check(get is not None, f"no {probe}")
        check(get["path"] == path and get["port"] in (metrics_port, "metrics"), f"{probe} {get}")
    # Rolling upgrade: one daemon at a time, each drained (--wait) before it stops, within the
    # grace period.
    strategy = ds["spec"].get("updateStrategy", {})
    check(strategy.get("type") == "RollingUpdate" and
          strategy.get("rollingUpdate", {}).get("maxUnavailable") == 1, f"updateStrategy {strategy}")
    stop = c.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
    check(stop[:3] == ["/usr/bin/conflux", "drain", "--wait"] and
          stop[-1] == f"127.0.0.1:{metrics_port}", f"preStop {stop}")
    wait_s = float(stop[stop.index("--wait-timeout") + 1])
    check(pod.get("terminationGracePeriodSeconds", 30) > wait_s,
          "terminationGracePeriodSeconds must exceed the drain's --wait-timeout")
    # Discovery: a headless Service selecting the DaemonSet's pods on the control port.
    svc = kinds.get("Service")
    check(svc is not None and svc["spec"].get("clusterIP") == "None", "no headless Service")
    check(svc["spec"]["selector"].items() <= ds["spec"]["template"]["metadata"]["labels"].items(),
          "the Service selects no confluxd pod")
    check([p["port"] for p in svc["spec"]["ports"]] == [control_port], "Service ports")
    ann = ds["spec"]["template"]["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/port") == str(metrics_port), "prometheus.io/port annotation")
    ref = env_map(c)["CONFLUX_SECRET"]["valueFrom"]["secretKeyRef"]
    check(ref["name"] == secret["metadata"]["name"] and ref["key"] in secret_keys,
          f"CONFLUX_SECRET references {ref}, the Secret is {secret['metadata']['name']}:{secret_keys}")
    check("--config" in c.get("args", []), "confluxd args name no --config")
    # The shared configuration: a ConfigMap mounted where --config points, whose TOML the
    # daemon's keys read, with multicast sliced per daemon (multicast_slice > 0).
    config_path = c["args"][c["args"].index("--config") + 1]
    cm = kinds.get("ConfigMap")
    check(cm is not None, "no ConfigMap with the daemons' configuration")
    (vol,) = [v for v in pod.get("volumes", []) if v.get("configMap", {}).get("name") ==
              cm["metadata"]["name"]]
    (mount,) = [m for m in c.get("volumeMounts", []) if m["name"] == vol["name"]]
    name = os.path.relpath(config_path, mount["mountPath"])
    check(name in cm["data"], f"{config_path} is not in the ConfigMap ({sorted(cm['data'])})")
    shared = tomllib.loads(cm["data"][name])
    check(shared.get("control_port", 7470) == control_port and
          shared.get("metrics_port", 9470) == metrics_port, f"ConfigMap ports {shared}")
    check(shared.get("multicast_range") and shared.get("multicast_slice", 64) > 0,
          f"the shared configuration must slice its multicast range: {shared}")

    job = yaml.safe_load(open(os.path.join(kdir, "training-job-env.yaml")))
    env = {e["name"]: e for e in job["env"]}
    check(env["NCCL_NET_PLUGIN"]["value"] == "conflux", "NCCL_NET_PLUGIN")
    check(env["NCCL_COLLNET_ENABLE"]["value"] == "1", "NCCL_COLLNET_ENABLE")
    for a in env["CONFLUX_AGGREGATORS"]["value"].split(","):
        check(a.rsplit(":", 1)[1] == str(control_port), f"aggregator {a} not on the control port")
    svc_name = svc["metadata"]["name"]
    check(env["CONFLUX_AGGREGATORS"]["value"].startswith(f"dns:{svc_name}."),
          "the job does not find the aggregators through the Service")
    jref = env["CONFLUX_SECRET"]["valueFrom"]["secretKeyRef"]
    check(jref == ref, f"the job's secret reference {jref} differs from the daemon's {ref}")
    print("kubernetes manifests: host network, ports, probes and secret reference as expected")


if __name__ == "__main__":
    main()
