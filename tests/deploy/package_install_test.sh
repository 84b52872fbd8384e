#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The packages built by package_build.sh (in OUT): names, dependencies, conffiles, the files
# where cmake/ConfluxInstall.cmake and the README say they are, and the installed programs
# run: confluxd --help, confluxd --print-config on the installed config, conflux --help, and a
# dlopen(RTLD_NOW) of the installed plugin that finds NCCL's entry symbols.
#   package_install_test.sh OUT
set -euo pipefail
out=$1 root=$1/root
fail() { echo "FAILED: $*"; exit 1; }

for f in /usr/bin/confluxd /usr/bin/conflux /usr/lib/libnccl-net-conflux.so \
  /usr/lib/systemd/system/confluxd.service /etc/conflux/confluxd.toml \
  /usr/share/doc/conflux/README.md /usr/share/doc/conflux/confluxd.example.toml \
  /usr/share/doc/conflux/dpdk.md /usr/share/doc/conflux/dpu.md \
  /usr/share/doc/conflux/grafana-dashboard.json /usr/share/doc/conflux-aggregator/copyright \
  /usr/share/doc/conflux-nccl-plugin/copyright; do
  [ -f "$root$f" ] || fail "$f not installed"
done
# The packages' copyright files (machine-readable, Debian's format) name the licence.
for p in conflux-aggregator conflux-nccl-plugin; do
  grep -q "^License: Apache-2.0" "$root/usr/share/doc/$p/copyright" ||
    fail "$p's copyright file names no Apache-2.0 licence"
done
for p in confluxd conflux; do [ -x "$root/usr/bin/$p" ] || fail "$p not executable"; done
cmp -s "$root/etc/conflux/confluxd.toml" "$root/usr/share/doc/conflux/confluxd.example.toml" ||
  fail "/etc/conflux/confluxd.toml is not the example config"

agg=("$out"/packages/conflux-aggregator_*.deb)
plugin=("$out"/packages/conflux-nccl-plugin_*.deb)
# Each package holds only its own component.
dpkg-deb -c "${plugin[0]}" | grep -q confluxd && fail "the plugin package holds confluxd"
dpkg-deb -c "${agg[0]}" | grep -q libnccl-net-conflux && fail "the aggregator package holds the plugin"
dpkg-deb -e "${agg[0]}" "$out/control"
grep -qx /etc/conflux/confluxd.toml "$out/control/conffiles" || fail "config is not a conffile"

# Dependencies (dpkg-shlibdeps): present, and every one a package installed here, where the
# programs were built and run (so each name is a real package providing the libraries).
provided=$(dpkg-query -W -f='${db:Status-Abbrev} ${Provides}\n' | awk '$1 == "ii" {$1 = ""; print}')
for deb in "${agg[0]}" "${plugin[0]}"; do
  deps=$(dpkg-deb -f "$deb" Depends)
  echo "$(basename "$deb"): Depends: $deps"
  for need in libc6 libstdc++6; do
    [[ ",$deps" == *", $need "* || ",$deps" == *",$need "* ]] || fail "$deb does not depend on $need"
  done
  IFS=',' read -ra items <<<"$deps"
  for item in "${items[@]}"; do
    name=$(echo "$item" | awk '{print $1}')
    # Installed, or provided by an installed package (libspdlog1.10-fmt9 is virtual).
    dpkg-query -W -f='${Status}' "$name" 2>/dev/null | grep -q "install ok installed" ||
      grep -qE "(^| )$name(,| |\$)" <<<"$provided" ||
      fail "$deb depends on $name, which no package installed here is or provides"
  done
done
[[ "$(dpkg-deb -f "${agg[0]}" Depends)" == *libspdlog* ]] || fail "confluxd's spdlog dependency missing"

# The installed programs run, with the installed config.
"$root/usr/bin/confluxd" --help >"$out/help.txt" || fail "confluxd --help exited $?"
grep -q -- "--config" "$out/help.txt" || fail "confluxd --help does not mention --config"
"$root/usr/bin/confluxd" --config "$root/etc/conflux/confluxd.toml" --print-config >"$out/cfg.txt" ||
  fail "confluxd rejects the installed config"
grep -q "control_port" "$out/cfg.txt" || fail "--print-config printed no control_port"
"$root/usr/bin/conflux" --help >"$out/cli.txt" || fail "conflux --help exited $?"
grep -q "status" "$out/cli.txt" || fail "conflux --help lists no status subcommand"

# NCCL's view of the plugin: dlopen with RTLD_NOW (every symbol resolves), entry points found.
python3 - "$root/usr/lib/libnccl-net-conflux.so" <<'PY' || fail "dlopen of the installed plugin"
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_NOW | os.RTLD_LOCAL)
for sym in ("ncclNetPlugin_v8", "ncclNetPlugin_v11", "ncclCollNetPlugin_v11"):
    getattr(lib, sym)  # AttributeError (exit 1) when absent
print("dlopen(RTLD_NOW) ok:", sys.argv[1])
PY
echo "package install test passed"
