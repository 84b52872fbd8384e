#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# PXN-shared connections (CONFLUX_NET_MAX_RECVS=8: one connection per peer, grouped irecvs,
# unexpected messages buffered and matched by tag) against a connection per sender
# (CONFLUX_NET_MAX_RECVS=1, as NCCL's socket transport declares), through the driver's pxn
# mode on loopback. The two settings alternate (A B A B ...) PAIRS times for each sender count,
# so both see the same host; one line per run and size, then min..max per setting.
#   bench/p2p/pxn_max_recvs.sh [BUILD_DIR] [PAIRS] [SENDERS...]
# PXN_TIMEOUT_S (60): the driver's --timeout per run; a run that fails is listed, and its
# sizes that finished still count.
set -euo pipefail
build=${1:-build}
pairs=${2:-3}
shift $(( $# > 2 ? 2 : $# ))
senders=("$@")
[[ $# -eq 0 ]] && senders=(2 4)
driver=$build/tools/driver/conflux-nccl-driver
plugin=$build/nccl_plugin/libnccl-net-conflux.so
export CONFLUX_SOCKET_IFNAME=lo
timeout=${PXN_TIMEOUT_S:-60}
out=$(mktemp)
fails=$(mktemp)
trap 'rm -f "$out" "$fails"' EXIT
for s in "${senders[@]}"; do
  for ((p = 1; p <= pairs; ++p)); do
    for m in 8 1; do
      log=$(CONFLUX_NET_MAX_RECVS=$m "$driver" --nranks 2 --plugin "$plugin" --modes pxn \
            -b 64K -e 4M -f 4 -n 5 -w 1 --pxn-senders "$s" --timeout "$timeout" 2>&1) || true
      if ! grep -q "verified: all results correct" <<<"$log"; then
        # A run that fails (e.g. "NCCL would hang" at the timeout) keeps its finished sizes.
        echo "senders $s maxRecvs $m pair $p FAILED: $(grep -m1 'error' <<<"$log")" | tee -a "$fails"
      fi
      res=$(grep -o "threads [0-9.]*, fds [0-9.]*" <<<"$log" | head -1)
      # Rows: bytes count type op time_us algbw busbw wrong.
      awk -v s="$s" -v m="$m" -v p="$p" -v res="$res" \
          '/^ +[0-9]+ +[0-9]+ +uint8/ {printf "senders %s maxRecvs %s pair %s bytes %s GB/s %s %s\n", s, m, p, $1, $6, res}' \
          <<<"$log" | tee -a "$out"
    done
  done
done
echo "# senders maxRecvs bytes: GB/s min..max (median) over the pairs; threads, fds per rank"
awk '{k = $2 " " $4 " " $8; v[k] = v[k] " " $10; r[k] = $11 " " $12 " " $13 " " $14}
     END {for (k in v) print k ":" v[k] " | " r[k]}' "$out" | sort -k1,1n -k3,3n -k2,2nr |
  while IFS=: read -r key vals; do
    nums=${vals%%|*}
    res=${vals#*| }
    stats=$(tr ' ' '\n' <<<"$nums" | grep . | sort -g |
            awk '{a[NR] = $1} END {printf "%s..%s (%s)", a[1], a[NR], a[int((NR + 1) / 2)]}')
    echo "$key: $stats; $res"
  done
[[ -s $fails ]] && { echo "# failed runs:"; cat "$fails"; }
exit 0
