# SPDX-License-Identifier: Apache-2.0
# Sourced by bench/fairshare/*.sh: starts one confluxd on loopback with one dataplane thread,
# capped at $cap Mbit/s, from build folder $B; sets work (a temporary folder, unless already
# set), daemon (its pid), control and metrics (its ports), and stops it and removes $work on
# exit. With $daemon_config set, the daemon reads that TOML file too; with $confluxd set, that
# binary runs instead of $B/aggregator/confluxd.
work=${work:-$(mktemp -d)}
config_arg=()
[[ -n ${daemon_config:-} ]] && config_arg=(--config "$daemon_config")
"${confluxd:-$B/aggregator/confluxd}" --listen 127.0.0.1 --control-port 0 --data-port 0 --metrics-port 0 \
  --threads 1 --max-mbps "$cap" --ready-file "$work/ready" --log-level warn "${config_arg[@]}" &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 1 100); do [[ -s $work/ready ]] && break; sleep 0.05; done
[[ -s $work/ready ]] || { echo "$0: confluxd did not start" >&2; exit 1; }
control=$(sed -n 's/^control_port=//p' "$work/ready")
metrics=$(sed -n 's/^metrics_port=//p' "$work/ready")
