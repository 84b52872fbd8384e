#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `systemd-analyze verify` of the unit the aggregator package installs, in the throwaway root
# of package_build.sh (OUT/root): --root makes systemd-analyze resolve ExecStart= and the unit's
# dependencies inside that root, so it checks that the unit names the installed confluxd; it
# works without systemd as PID 1 (containers). --man=no: no man pages to look up. A warning
# (e.g. an unknown key) does not change its exit code, so any output fails the test.
#   systemd_verify_test.sh OUT
set -euo pipefail
root=$1/root
unit=/usr/lib/systemd/system/confluxd.service
fail() { echo "FAILED: $*"; exit 1; }
[ -f "$root$unit" ] || fail "$unit not installed"
grep -qx "ExecStart=/usr/bin/confluxd --config /etc/conflux/confluxd.toml" "$root$unit" ||
  fail "ExecStart= does not name the installed confluxd and config: $(grep ExecStart= "$root$unit")"
if ! msgs=$(systemd-analyze --root="$root" --man=no verify "$unit" 2>&1); then
  fail "systemd-analyze verify: $msgs"
fi
[ -z "$msgs" ] || fail "systemd-analyze verify warned: $msgs"
# The check itself catches a broken unit: a misspelt key and a missing binary.
bad=$root/usr/lib/systemd/system/confluxd-broken.service
sed 's/^Nice=/Nicee=/' "$root$unit" >"$bad"
msgs=$(systemd-analyze --root="$root" --man=no verify /usr/lib/systemd/system/confluxd-broken.service 2>&1) || true
rm -f "$bad"
[[ "$msgs" == *"Unknown key"* ]] || fail "a misspelt key went unnoticed: $msgs"
sed 's|^ExecStart=/usr/bin/confluxd|ExecStart=/usr/bin/confluxd-missing|' "$root$unit" >"$bad"
rc=0
systemd-analyze --root="$root" --man=no verify /usr/lib/systemd/system/confluxd-broken.service >/dev/null 2>&1 || rc=$?
rm -f "$bad"
[ "$rc" -ne 0 ] || fail "a missing ExecStart binary went unnoticed"
echo "systemd-analyze verify: $unit clean"
