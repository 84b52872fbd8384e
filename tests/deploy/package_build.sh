#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fixture of the package tests: builds the Debian packages with CPack from BUILD_DIR and
# unpacks them into a throwaway root OUT/root (dpkg -x: no maintainer scripts, no dpkg
# database of the host touched), next to a copy of the host's systemd units (for
# `systemd-analyze --root`).   package_build.sh BUILD_DIR OUT
set -euo pipefail
build=$1 out=$2
rm -rf "$out"
mkdir -p "$out/root/usr/lib/systemd"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$out/packages" >"$out/cpack.log" 2>&1 || {
  cat "$out/cpack.log"
  exit 1
}
for p in conflux-aggregator conflux-nccl-plugin; do
  deb=("$out/packages/${p}"_*.deb)
  [ -f "${deb[0]}" ] || { echo "FAILED: no $p package in $out/packages"; ls "$out/packages"; exit 1; }
  dpkg -x "${deb[0]}" "$out/root"
done
# The units systemd-analyze needs to resolve the unit's dependencies (sysinit.target, ...).
cp -an /usr/lib/systemd/system "$out/root/usr/lib/systemd/"
echo "packages:" "$out"/packages/*.deb
