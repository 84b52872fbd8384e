#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Runs a command with a fresh confluxd on loopback (ephemeral ports) and checks the result.
#   with_confluxd.sh CONFLUXD EXPECT REGEX [--kill-after S] [--daemons N] [--no-daemon]
#                    [--daemon-arg ARG]... [--max-out-ratio R] [--min-out-ratio R]
#                    [--tree N,N,...] [--tree-mid M] [--tree-mid-levels K] [--kill-daemon I]
#                    [--forbid REGEX] [--kill-at-slots N] [--tree-direct] [--nofile N]
#                    [--idle-connections N] [--drain-daemon I]... -- CMD ARGS...
# EXPECT is zero|nonzero (the command's exit code); REGEX (several may be joined by " && ")
# must each match a line of its output; --forbid REGEX must match none.
# CONFLUX_AGGREGATORS is set to the daemons, comma-separated (or to a port nobody listens on
# with --no-daemon). --daemons N starts N daemons (default 1).
# --kill-after S sends SIGKILL, S seconds after the command starts, to the daemon (with
# several: to the last one only, or to daemon I with --kill-daemon I). --kill-at-slots N
# kills it instead once it has completed N slots (conflux_dataplane_slots_completed_total), so
# that the kill lands mid-run however fast the command is (or when the command exits).
# --tree N,N,... builds a reduction tree of depth 2 (protocol/SPEC.md §7): daemon 1 is the
# root, daemons 2.. are leaves with --parent = the root, and the ranks sit under the leaves
# in contiguous groups of these sizes: rank r gets its leaf as CONFLUX_DRIVER_AGGREGATORS_<r>
# (the driver puts it into CONFLUX_AGGREGATORS of that rank).
# --tree-mid M makes it depth 3: daemon 2 is a middle aggregator under the root, the first M
# leaves (daemons 3..) sit under it and the rest under the root; a rank under the middle one
# names its chain, "leaf>mid". --tree-mid-levels K stacks K middle aggregators (depth K + 2):
# daemons 2..K+1, each under the one before (daemon 2 under the root), the first M leaves
# under the lowest; a rank under them names "leaf>mid_K>...>mid_1".
# --tree-direct gives the root a multicast range (to send) and each leaf one of its own and
# tree_results = direct (SPEC.md §7, results straight down), and checks that the root sent
# results straight to the leaves' groups (conflux_dataplane_direct_results_total > 0).
# --nofile N starts every daemon under `ulimit -n N` (soft and hard RLIMIT_NOFILE).
# --idle-connections N opens N TCP connections from 127.0.0.1 to the first daemon's control
# port that never send a byte (a flood of clients that do not join), just before the command
# starts, and holds them until it exits; then a line of the output (for REGEX) says how many
# connections the first daemon evicted and refused ("confluxd 1 closed E connections without a
# Join to make room and refused R at accept").
# --drain-daemon I drains daemon I (POST /admin/drain on its metrics port, as `conflux drain`
# does) before the command starts: it refuses every Join with shutting_down (may be repeated).
# After the command, the first daemon's dataplane bytes in and out are printed (with --tree,
# every other daemon's bytes in too, and none may be 0); with
# --max-out-ratio R (--min-out-ratio R) the test fails if it sent more (less) than R times
# the bytes it received.
set -uo pipefail
confluxd=$1 expect=$2 regex=$3
shift 3
kill_after="" kill_at_slots="" no_daemon=0 daemon_args=() n_daemons=1 max_out_ratio="" min_out_ratio=""
tree="" tree_mid=0 mid_levels=1 kill_daemon="" forbid="" tree_direct=0 nofile="" idle=0
drain=()
while [[ $# -gt 0 && $1 != "--" ]]; do
  case $1 in
    --kill-after) kill_after=$2; shift 2 ;;
    --kill-at-slots) kill_at_slots=$2; shift 2 ;;
    --no-daemon) no_daemon=1; shift ;;
    --daemons) n_daemons=$2; shift 2 ;;
    --daemon-arg) daemon_args+=("$2"); shift 2 ;;
    --max-out-ratio) max_out_ratio=$2; shift 2 ;;
    --min-out-ratio) min_out_ratio=$2; shift 2 ;;
    --tree) tree=$2; shift 2 ;;
    --tree-mid) tree_mid=$2; shift 2 ;;
    --tree-mid-levels) mid_levels=$2; shift 2 ;;
    --kill-daemon) kill_daemon=$2; shift 2 ;;
    --forbid) forbid=$2; shift 2 ;;
    --tree-direct) tree_direct=1; shift ;;
    --nofile) nofile=$2; shift 2 ;;
    --idle-connections) idle=$2; shift 2 ;;
    --drain-daemon) drain+=("$2"); shift 2 ;;
    *) echo "with_confluxd: unknown option $1" >&2; exit 2 ;;
  esac
done
shift  # --
work=$(mktemp -d)
daemon_pids=()
idle_pid=""
cleanup() {
  [[ -n $idle_pid ]] && kill -KILL "$idle_pid" 2>/dev/null
  for p in "${daemon_pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

if [[ $no_daemon -eq 1 ]]; then
  # A port from the ephemeral range that nothing listens on: bind it, note it, close it.
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  export CONFLUX_AGGREGATORS=127.0.0.1:$port
else
  endpoints=()
  groups=()
  if [[ -n $tree ]]; then
    IFS=, read -r -a groups <<<"$tree"
    n_daemons=$((1 + ${#groups[@]} + (tree_mid > 0 ? mid_levels : 0)))
  fi
  mids=$((tree_mid > 0 ? mid_levels : 0))  # middle aggregators: daemons 2..mids+1
  first_leaf=$((2 + mids))                 # daemon number of leaf 0
  for i in $(seq 1 "$n_daemons"); do
    extra=()
    if [[ -n $tree && $i -gt 1 ]]; then extra=(--parent "${endpoints[0]}"); fi
    if [[ -n $tree && $i -gt 2 && $i -le $((mids + 1)) ]]; then  # a middle one under the one before
      extra=(--parent "${endpoints[$((i - 2))]}")
    fi
    if [[ -n $tree && $tree_mid -gt 0 && $i -ge $first_leaf && $((i - first_leaf)) -lt $tree_mid ]]; then
      extra=(--parent "${endpoints[$mids]}")  # the lowest middle one
    fi
    if [[ $tree_direct -eq 1 && $i -eq 1 ]]; then extra+=(--multicast-range 239.76.0.0/24); fi
    if [[ $tree_direct -eq 1 && $i -ge $first_leaf ]]; then
      extra+=(--multicast-range "239.77.$((i - first_leaf)).0/24" --tree-results direct)
    fi
    (
      if [[ -n $nofile ]]; then ulimit -n "$nofile" || exit 1; fi
      exec "$confluxd" --listen 127.0.0.1 --control-port 0 --data-port 0 --metrics-port 0 \
        --ready-file "$work/ready$i" --log-level warn "${daemon_args[@]}" "${extra[@]}"
    ) >"$work/daemon$i.log" 2>&1 &
    daemon_pids+=($!)
    for _ in $(seq 1 100); do [[ -s $work/ready$i ]] && break; sleep 0.05; done
    if [[ ! -s $work/ready$i ]]; then
      echo "with_confluxd: confluxd $i did not become ready"; cat "$work/daemon$i.log"; exit 1
    fi
    endpoints+=("127.0.0.1:$(sed -n 's/^control_port=//p' "$work/ready$i")")
  done
  CONFLUX_AGGREGATORS=$(IFS=,; echo "${endpoints[*]}")
  export CONFLUX_AGGREGATORS
  rank=0
  for g in "${!groups[@]}"; do
    for _ in $(seq 1 "${groups[$g]}"); do
      chain=${endpoints[$((g + first_leaf - 1))]}
      if [[ $g -lt $tree_mid ]]; then
        for m in $(seq "$mids" -1 1); do chain="$chain>${endpoints[$m]}"; done
      fi
      export "CONFLUX_DRIVER_AGGREGATORS_$rank=$chain"
      rank=$((rank + 1))
    done
  done
fi

# metric_total I NAME: the sum of metric NAME over its samples on daemon I's /metrics.
metric_total() {
  curl -s "http://127.0.0.1:$(sed -n 's/^metrics_port=//p' "$work/ready$1")/metrics" |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%.0f", s }'
}

for d in "${drain[@]}"; do
  if ! curl -sf -X POST "http://127.0.0.1:$(sed -n 's/^metrics_port=//p' "$work/ready$d")/admin/drain" \
      >"$work/drain$d"; then
    echo "with_confluxd: could not drain confluxd $d"; exit 1
  fi
  echo "with_confluxd: confluxd $d drained: $(cat "$work/drain$d")"
done

if [[ $idle -gt 0 && $no_daemon -eq 0 ]]; then
  # Connects every socket (the kernel completes each handshake into the daemon's accept queue),
  # says so, then holds them all until killed.
  python3 -c '
import socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held = []
for _ in range(n):
    s = socket.socket()
    s.connect(("127.0.0.1", port))
    held.append(s)
print("with_confluxd: %d idle connections open" % n, flush=True)
time.sleep(3600)
' "$(sed -n 's/^control_port=//p' "$work/ready1")" "$idle" >"$work/idle" 2>&1 &
  idle_pid=$!
  for _ in $(seq 1 200); do [[ -s $work/idle ]] && break; sleep 0.01; done
  if ! grep -q "idle connections open" "$work/idle"; then
    echo "with_confluxd: could not open $idle idle connections"; cat "$work/idle"; exit 1
  fi
fi

"$@" >"$work/out" 2>&1 &
cmd_pid=$!
if [[ (-n $kill_after || -n $kill_at_slots) && ${#daemon_pids[@]} -gt 0 ]]; then
  v=${#daemon_pids[@]}
  if [[ -n $kill_daemon ]]; then v=$kill_daemon; fi
  victim=${daemon_pids[$((v - 1))]}
  if [[ -n $kill_at_slots ]]; then
    slots=0
    while kill -0 "$cmd_pid" 2>/dev/null; do
      slots=$(metric_total "$v" conflux_dataplane_slots_completed_total)
      [[ ${slots:-0} -ge $kill_at_slots ]] && break
      sleep 0.02
    done
    killed="with_confluxd: SIGKILL to confluxd (pid $victim) after $slots slots"
  else
    sleep "$kill_after"
    killed="with_confluxd: SIGKILL to confluxd (pid $victim) at +${kill_after}s"
  fi
  kill -KILL "$victim" 2>/dev/null
fi
wait "$cmd_pid"
rc=$?
if [[ -n $idle_pid ]]; then
  kill -KILL "$idle_pid" 2>/dev/null
  wait "$idle_pid" 2>/dev/null
  cat "$work/idle" >>"$work/out"
  idle_pid=""
fi
# After the command's output: a line appended while it ran would be overwritten by it.
[[ -n ${killed:-} ]] && echo "$killed" >>"$work/out"
cat "$work/out"
if [[ $rc -ne 0 && $no_daemon -eq 0 ]]; then
  for f in "$work"/daemon*.log; do echo "== $f"; tail -n 20 "$f"; done
fi
# dataplane_bytes I: "<bytes in> <bytes out>" of daemon I's dataplane, over its threads.
dataplane_bytes() {
  curl -s "http://127.0.0.1:$(sed -n 's/^metrics_port=//p' "$work/ready$1")/metrics" | awk '
    /^conflux_dataplane_bytes_in_total/ { i += $2 }
    /^conflux_dataplane_bytes_out_total/ { o += $2 }
    END { printf "%.0f %.0f\n", i, o }'
}
if [[ $no_daemon -eq 0 && -z $kill_after ]]; then
  read -r bytes_in bytes_out < <(dataplane_bytes 1)
  echo "with_confluxd: confluxd 1 dataplane bytes in $bytes_in, out $bytes_out"
  # check_ratio max|min R: out <= R x in, or out >= R x in (nothing received fails both).
  check_ratio() {
    [[ -z $2 ]] && return 0
    awk -v i="$bytes_in" -v o="$bytes_out" -v r="$2" -v k="$1" \
      'BEGIN { exit !(i > 0 && (k == "max" ? o <= r * i : o >= r * i)) }' && return 0
    echo "FAIL: confluxd sent $bytes_out bytes for $bytes_in received" \
         "($([[ $1 == max ]] && echo more || echo less) than $2 times)"
    exit 1
  }
  check_ratio max "$max_out_ratio"
  check_ratio min "$min_out_ratio"
  if [[ -n $tree && ${#drain[@]} -eq 0 ]]; then  # every level carried the job (none drained)
    for i in $(seq 2 "$n_daemons"); do
      read -r b _ < <(dataplane_bytes "$i")
      echo "with_confluxd: confluxd $i dataplane bytes in $b"
      if [[ ${b:-0} -eq 0 ]]; then echo "FAIL: confluxd $i of the tree received nothing"; exit 1; fi
    done
  fi
  if [[ $idle -gt 0 ]]; then  # into the output, for REGEX
    echo "with_confluxd: confluxd 1 closed $(metric_total 1 conflux_control_evicted_total)" \
         "connections without a Join to make room and refused" \
         "$(metric_total 1 conflux_control_refused_total) at accept" | tee -a "$work/out"
  fi
  if [[ $tree_direct -eq 1 ]]; then
    direct=$(metric_total 1 conflux_dataplane_direct_results_total)
    echo "with_confluxd: confluxd 1 sent $direct results straight to the leaves' groups"
    if [[ ${direct:-0} -eq 0 ]]; then echo "FAIL: no result went straight down"; exit 1; fi
  fi
fi
if [[ $expect == zero && $rc -ne 0 ]]; then echo "FAIL: exit code $rc, expected 0"; exit 1; fi
if [[ $expect == nonzero && $rc -eq 0 ]]; then echo "FAIL: exit code 0, expected non-zero"; exit 1; fi
rest=$regex
while [[ -n $rest ]]; do
  one=${rest%% && *}
  if [[ $one == "$rest" ]]; then rest=""; else rest=${rest#* && }; fi
  if ! grep -Eq -- "$one" "$work/out"; then echo "FAIL: output does not match: $one"; exit 1; fi
done
if [[ -n $forbid ]] && grep -E -- "$forbid" "$work/out"; then
  echo "FAIL: output matches the forbidden $forbid (lines above)"
  exit 1
fi
echo "PASS"
