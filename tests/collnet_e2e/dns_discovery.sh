#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# CONFLUX_AGGREGATORS=dns:NAME:PORT end to end, in a network namespace of the test's own whose
# resolver is a dnsmasq that answers NAME with two addresses (as a Kubernetes headless Service
# over two aggregator pods would): two confluxd listen on 127.0.0.2:PORT and 127.0.0.3:PORT;
#  - the driver's ranks (CollNet through the plugin) stripe over both: rank 0 resolved the name
#    and every rank used its list (the plugin's INFO line), every result exact;
#  - `conflux check` resolves the same way and finds both usable;
#  - a name that does not resolve: every rank declines CollNet with the reason, the ring runs.
#   dns_discovery.sh CONFLUXD DRIVER PLUGIN CONFLUX
set -uo pipefail
confluxd=$1 driver=$2 plugin=$3 cli=$4
skip() {
  if [[ ${CONFLUX_CI:-} == 1 ]]; then echo "FAIL: $*"; exit 1; fi
  echo "SKIP: $*"
  exit 0
}
fail() { echo "FAIL: $*"; exit 1; }
[[ $(id -u) -eq 0 ]] || skip "needs root (a network namespace)"
command -v dnsmasq >/dev/null || skip "dnsmasq not installed (scripts/setup.sh installs dnsmasq-base)"
ns=cfxdns$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  rm -rf "/etc/netns/$ns" "$work"
}
trap cleanup EXIT
ip netns add "$ns" || skip "cannot create a network namespace"
ip -n "$ns" link set lo up
# `ip netns exec` puts these over /etc/resolv.conf and /etc/hosts inside the namespace.
mkdir -p "/etc/netns/$ns"
echo "nameserver 127.0.0.53" >"/etc/netns/$ns/resolv.conf"
echo "127.0.0.1 localhost" >"/etc/netns/$ns/hosts"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns dnsmasq --keep-in-foreground --conf-file=/dev/null --no-resolv --no-hosts \
  --listen-address=127.0.0.53 --bind-interfaces --port=53 --user=root \
  --host-record=conflux-agg.test,127.0.0.2 --host-record=conflux-agg.test,127.0.0.3 \
  >"$work/dnsmasq.log" 2>&1 &
pids+=($!)
port=7470
for ip in 127.0.0.2 127.0.0.3; do
  in_ns "$confluxd" --listen "$ip" --control-port "$port" --data-port 0 --metrics-port 0 \
    --ready-file "$work/ready-$ip" --log-level warn >"$work/confluxd-$ip.log" 2>&1 &
  pids+=($!)
done
for _ in $(seq 1 100); do
  [[ -s $work/ready-127.0.0.2 && -s $work/ready-127.0.0.3 ]] && break
  sleep 0.05
done
[[ -s $work/ready-127.0.0.2 && -s $work/ready-127.0.0.3 ]] || fail "confluxd did not start"
# The resolver answers before anything depends on it (dnsmasq starts in the background).
for _ in $(seq 1 100); do
  in_ns getent ahostsv4 conflux-agg.test >/dev/null && break
  sleep 0.05
done

run_driver() {  # run_driver AGGREGATORS ARGS...
  local aggs=$1
  shift
  in_ns env CONFLUX_SOCKET_IFNAME=lo CONFLUX_AGGREGATORS="$aggs" NCCL_DEBUG=INFO \
    NCCL_DEBUG_SUBSYS=INIT,COLL "$driver" --plugin "$plugin" --nranks 3 -d float -o sum \
    -b 4 -e 1M -f 16 -n 2 -w 1 --check-iters --timeout 60 "$@" 2>&1
}
out=$(run_driver "dns:conflux-agg.test:$port" --modes collnet --require-collnet)
echo "$out" | grep -v "NCCL INFO" | tail -5
grep -q "verified: all results correct" <<<"$out" || fail "the run was not verified"
grep -q "CONFLUX_AGGREGATORS=dns:conflux-agg.test:$port is 127.0.0.2:$port,127.0.0.3:$port" \
  <<<"$out" || fail "rank 0 did not resolve the name to both aggregators"
grep -q "on 2 aggregator(s)" <<<"$out" || fail "the ranks did not join both aggregators"

check=$(in_ns "$cli" check --aggregators "dns:conflux-agg.test:$port" --json --timeout-ms 2000)
echo "$check"
python3 - "$check" "$port" <<'PY' || fail "conflux check"
import json, sys
doc, port = json.loads(sys.argv[1]), sys.argv[2]
assert doc["resolved"] == f"127.0.0.2:{port},127.0.0.3:{port}", doc
assert doc["usable"] and len(doc["aggregators"]) == 2, doc
PY

out=$(run_driver "dns:no-such-agg.test:$port" --modes collnet,ring)
echo "$out" | grep -v "NCCL INFO" | tail -4
grep -q "verified: all results correct" <<<"$out" || fail "the ring run was not verified"
grep -q "CollNet declined on every rank: rank 0 cannot use the aggregators (CONFLUX_AGGREGATORS: .*resolving no-such-agg.test" <<<"$out" ||
  fail "the plugin did not say why CollNet was declined"
echo "PASS"
