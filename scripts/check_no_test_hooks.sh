#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Fails when a shipped binary carries a test hook: fault-injection code, its settings or its
# metric (what CONFLUX_TEST_HOOKS=ON compiles in). Takes .deb packages (every ELF file inside
# is checked) or binaries.   scripts/check_no_test_hooks.sh FILE...
# It reads the strings and the symbol table: the settings' names (CONFLUX_FAULT_*, fault_drop,
# ...), their log and error texts, the metric, and the injectors' classes and functions; and the
# CUDA driver test double (tests/gpu_memory): no libcuda* file in a package, none of its strings.
set -euo pipefail
(($#)) || { echo "usage: $0 PACKAGE.deb|BINARY..." >&2; exit 2; }
# Case-insensitive; "fault" alone would also match "default".
PATTERN='conflux[-_]cuda[-_]double|cuda test double|conflux_fault|fault_(drop|dup|reorder|abort|rank|probe|multicast|rx)|faults?[ _]inject|faultinject|faultaction|channelfaults|test_hooks|conflux_test_hooks'
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
bins=()
for f in "$@"; do
  case $f in
    *.deb)
      d="$work/$(basename "$f" .deb)"
      mkdir -p "$d"
      dpkg-deb -x "$f" "$d"
      if cuda=$(find "$d" -name 'libcuda*' -print -quit) && [[ -n $cuda ]]; then
        echo "FAILED: $(basename "$f") ships a CUDA driver library: ${cuda#"$d"}"
        exit 1
      fi
      while IFS= read -r -d '' b; do
        head -c 4 "$b" | grep -q $'^\x7fELF' && bins+=("$b")
      done < <(find "$d" -type f -print0)
      ;;
    *) bins+=("$f") ;;
  esac
done
((${#bins[@]})) || { echo "FAILED: no binary found in $*"; exit 1; }
bad=0
for b in "${bins[@]}"; do
  nm="nm"  # the host's binutils do not read AArch64 objects (scripts/cross_aarch64.sh packages)
  if head -c 20 "$b" | od -An -tx1 | tr -d ' \n' | grep -q '^7f454c46.*b700$'; then
    nm=aarch64-linux-gnu-nm
  fi
  mapfile -t hits < <({ strings -a "$b"; "$nm" -C "$b" 2>/dev/null || true; } |
    grep -Eio "[^ ]*($PATTERN)[^ ]*" | sort -u | head -n 20 || true)
  if ((${#hits[@]})); then
    echo "FAILED: $(basename "$b") carries test hooks:"
    printf '  %s\n' "${hits[@]}"
    bad=1
  else
    echo "ok: $(basename "$b"): no test hook"
  fi
done
exit $bad
