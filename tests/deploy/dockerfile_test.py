#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""deploy/container/Dockerfile builds the way scripts/build.sh does: its build stage runs
scripts/setup.sh and scripts/build.sh (no cmake/ninja line of its own that could drift), sets
only variables build.sh reads, passes only -D options the CMake files define, and takes its
outputs from the build directory it gave build.sh, where CPack (cmake/ConfluxInstall.cmake)
puts the aggregator package; every tool build.sh runs is installed by scripts/setup.sh; the
runtime image starts confluxd as the systemd unit does for the prefix /usr.
Usage: dockerfile_test.py SOURCE_DIR"""
import glob
import json
import os
import re
import sys

from procs import check, fail


def instructions(path):
    """(keyword, argument) of every instruction, continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in open(path):
        s = line.rstrip("\n")
        if not cur and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        kw, _, arg = cur.strip().partition(" ")
        out.append((kw.upper(), " ".join(arg.split())))
        cur = ""
    return out


def main():
    src = sys.argv[1]
    build_sh = open(os.path.join(src, "scripts", "build.sh")).read()
    setup_sh = open(os.path.join(src, "scripts", "setup.sh")).read()
    stages, name = {}, None
    for kw, arg in instructions(os.path.join(src, "deploy", "container", "Dockerfile")):
        if kw == "FROM":
            m = re.fullmatch(r"(\S+)(?: AS (\S+))?", arg, re.I)
            name = m.group(2) or f"stage{len(stages)}"
            stages[name] = [(kw, arg)]
        else:
            stages[name].append((kw, arg))
    check("build" in stages, "no build stage (FROM ... AS build)")
    runs = [a for k, a in stages["build"] if k == "RUN"]
    run = " && ".join(runs)
    check("scripts/setup.sh" in run, "the build stage does not run scripts/setup.sh")
    check(re.search(r"(^|[\s;&])scripts/build\.sh", run), "the build stage does not run scripts/build.sh")
    check(run.index("scripts/setup.sh") < run.index("scripts/build.sh"), "setup.sh after build.sh")
    for own in (r"\bcmake\s+(-S|-B|--build)", r"\bninja\b", r"\bmake\b"):
        check(not re.search(own, run), f"the build stage builds by itself ({own}): {run}")

    # Variables given to build.sh are ones it reads; -D options exist in the CMake files.
    env = dict(re.findall(r"\b(CONFLUX_[A-Z_]+)=(\S+)\s+(?=[A-Z_]+=|scripts/build\.sh)", run))
    check("CONFLUX_BUILD_DIR" in env, "build.sh is not given CONFLUX_BUILD_DIR")
    for var in env:
        check("${" + var in build_sh, f"{var} is set for build.sh, which does not read it")
    cmake_text = "".join(open(f).read() for f in
                         glob.glob(os.path.join(src, "**", "CMakeLists.txt"), recursive=True) +
                         glob.glob(os.path.join(src, "cmake", "*.cmake")))
    tail = run[run.index("scripts/build.sh"):].split("&&")[0]
    for opt in re.findall(r"-D(\w+)=", tail):
        check(opt.startswith("CMAKE_") or re.search(r"option\(\s*" + opt + r"\b", cmake_text),
              f"-D{opt} is no option of the CMake files")

    # What build.sh runs: cmake with the Ninja generator; setup.sh installs both.
    check("-G Ninja" in build_sh and "cmake --build" in build_sh, "build.sh changed its commands")
    for pkg in ("cmake", "ninja-build"):
        check(re.search(r"(^|\s)" + re.escape(pkg) + r"(\s|$)", setup_sh), f"setup.sh lacks {pkg}")

    # Outputs: the package CPack writes into the build directory.
    bdir = env["CONFLUX_BUILD_DIR"]
    check(re.search(rf"cd {re.escape(bdir)} && cpack -G DEB", run), "no cpack in the build dir")
    install_cmake = open(os.path.join(src, "cmake", "ConfluxInstall.cmake")).read()
    check("set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)" in install_cmake,
          "CPack no longer writes to <build>/packages")
    check("CPACK_DEBIAN_AGGREGATOR_PACKAGE_NAME conflux-aggregator" in install_cmake,
          "the aggregator package is no longer conflux-aggregator")
    runtime = stages[list(stages)[-1]]
    copies = [a for k, a in runtime if k == "COPY" and a.startswith("--from=build")]
    check(copies, "the runtime stage copies nothing from the build stage")
    for c in copies:
        check(c.split()[1].startswith(bdir + "/packages/conflux-aggregator_"), f"COPY {c}")

    # The runtime image starts confluxd as the unit does for the prefix /usr.
    unit = open(os.path.join(src, "deploy", "systemd", "confluxd.service.in")).read()
    exec_start = re.search(r"^ExecStart=(.*)$", unit, re.M).group(1)
    exec_start = exec_start.replace("@CONFLUX_BINDIR@", "/usr/bin").replace(
        "@CONFLUX_CONFDIR@", "/etc/conflux")
    (entry,) = [json.loads(a) for k, a in runtime if k == "ENTRYPOINT"]
    check(" ".join(entry) == exec_start, f"ENTRYPOINT {entry} differs from ExecStart {exec_start}")
    print("Dockerfile: build stage runs scripts/setup.sh + scripts/build.sh; outputs and "
          "entry point match")


if __name__ == "__main__":
    main()
