#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The main job: one confluxd and 4 worker processes on this machine doing AllReduce through
# libnccl-net-conflux.so, called exactly as NCCL's proxy calls it (tools/driver).
# Prints nccl-tests-style tables for the aggregator path, the hybrid (each AllReduce split
# between the aggregators and the workers' ring, the split measured and agreed while the job
# runs) and the plugin's pure ring, side by side, checks every element of every result, and
# ends with one line per path against the ring. A split helps where the aggregators alone are
# the limit (a slow or shared aggregator); where they are not, it keeps almost all on them.
#   scripts/demo.sh [--json FILE] [any conflux-nccl-driver flag, e.g. -e 256M --nranks 8]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export CONFLUX_BUILD_DIR=${CONFLUX_BUILD_DIR:-build}
CONFLUX_BUILD_TARGETS="confluxd nccl-net-conflux conflux-nccl-driver" scripts/build.sh
B=$CONFLUX_BUILD_DIR

work=$(mktemp -d)
daemon_pid=""
cleanup() {
  if [[ -n $daemon_pid ]]; then kill -TERM "$daemon_pid" 2>/dev/null; wait "$daemon_pid" 2>/dev/null; fi
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

# Loopback's MTU is 64 KiB, so both sides use the largest payload the protocol allows (one
# 61440-byte payload per datagram) instead of the 8 KiB default sized for 9000-byte jumbo frames.
payload=${CONFLUX_PAYLOAD_BYTES:-61440}
# Results go back by multicast (protocol/SPEC.md §8): one send per result for all workers, which
# loopback delivers to each of them. CONFLUX_DEMO_MULTICAST= (empty) sends each worker its own.
multicast=${CONFLUX_DEMO_MULTICAST-239.77.0.0/16}
"$B/aggregator/confluxd" --listen 127.0.0.1 --control-port 0 --data-port 0 --metrics-port 0 \
  --threads 2 --max-payload-bytes "$payload" --ready-file "$work/ready" --log-level warn \
  ${multicast:+--multicast-range "$multicast"} &
daemon_pid=$!
for _ in $(seq 1 100); do [[ -s $work/ready ]] && break; sleep 0.05; done
[[ -s $work/ready ]] || { echo "demo: confluxd did not start" >&2; exit 1; }
control=$(sed -n 's/^control_port=//p' "$work/ready")
metrics=$(sed -n 's/^metrics_port=//p' "$work/ready")
echo "# confluxd pid $daemon_pid: control 127.0.0.1:$control, metrics http://127.0.0.1:$metrics/metrics"

export CONFLUX_AGGREGATORS=127.0.0.1:$control CONFLUX_SOCKET_IFNAME=lo CONFLUX_PAYLOAD_BYTES=$payload
# The rows as JSON too (the caller's --json FILE, else one of our own), for the plot below.
json="$work/demo.json"
for a in "$@"; do [[ $a == --json=* ]] && json=${a#--json=}; done
prev=
for a in "$@"; do [[ $prev == --json ]] && json=$a; prev=$a; done
extra=()
[[ $json == "$work/demo.json" ]] && extra=(--json "$json")
"$B/tools/driver/conflux-nccl-driver" --plugin "$B/nccl_plugin/libnccl-net-conflux.so" \
  --nranks 4 --modes collnet,hybrid,ring --ring-fraction auto -b 4 -e 64M -f 4 -n 10 -w 2 \
  --require-collnet --idle-sleep-us 20 "${extra[@]}" "$@"

echo "# confluxd counters (summed over dataplane threads):"
curl -s "http://127.0.0.1:$metrics/metrics" |
  grep -E '^conflux_dataplane_(packets_in|packets_out|slots_completed|retransmits_served|drops)_total' |
  sed -E 's/thread="[0-9]+",?//; s/\{\}//' |
  awk '{ sum[$1] += $2 } END { for (k in sum) if (sum[k] > 0) printf "#   %s %d\n", k, sum[k] }' | sort
# A plot of the three paths next to the tables (Debian's python3-matplotlib), and one line per
# path against the ring.
/usr/bin/python3 bench/plot_results.py --driver-json "$json" --out "$B/demo.png" ||
  echo "# (no plot: bench/plot_results.py failed)"
