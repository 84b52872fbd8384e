#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The release check (scripts/check_no_test_hooks.sh) refuses the CUDA test double: as a binary
# (its strings), and inside a package under any path (a libcuda* file).
#   hook_check_test.sh CHECK_SCRIPT CUDA_DOUBLE_SO
set -uo pipefail
check=$1 double=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

out=$("$check" "$double" 2>&1) && fail "the double passed as a binary: $out"
grep -q "FAILED: libcuda.so.1 carries test hooks" <<<"$out" || fail "unexpected output: $out"

pkg=$work/pkg
mkdir -p "$pkg/DEBIAN" "$pkg/usr/lib/x86_64-linux-gnu"
printf 'Package: fake\nVersion: 1\nArchitecture: all\nMaintainer: t <t@t>\nDescription: t\n' \
  >"$pkg/DEBIAN/control"
printf 'not even ELF' >"$pkg/usr/lib/x86_64-linux-gnu/libcuda.so.1"
dpkg-deb --build "$pkg" "$work/fake.deb" >/dev/null || fail "dpkg-deb"
out=$("$check" "$work/fake.deb" 2>&1) && fail "a package with libcuda.so.1 passed: $out"
grep -q "ships a CUDA driver library: /usr/lib/x86_64-linux-gnu/libcuda.so.1" <<<"$out" ||
  fail "unexpected output: $out"
echo "PASS"
