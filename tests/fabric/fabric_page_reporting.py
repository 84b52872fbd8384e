#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""fabric_ns.free_page_reporting on fake sysfs trees: a balloon device bound to virtio_balloon
with page_reporting loaded is named; no device, no driver or no page_reporting is None. And
fabric_ns.transparent_hugepages: the marked mode, or None without one or without the file."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench",
                                "fabric"))
import fabric_ns  # noqa: E402


def tree(root, reporting, driver, devices):
    if reporting:
        os.makedirs(os.path.join(root, "module/page_reporting/parameters"))
    if driver:
        d = os.path.join(root, "bus/virtio/drivers/virtio_balloon")
        os.makedirs(d)
        for name in ["bind", "unbind", "uevent"] + devices:
            open(os.path.join(d, name), "w").close()
    return root


def main():
    cases = [
        ((True, True, ["virtio3"]), "virtio3"),
        ((True, True, ["virtio5", "virtio1"]), "virtio1"),
        ((True, True, []), None),          # driver loaded, device unbound
        ((False, True, ["virtio0"]), None),  # a balloon that does not report free pages
        ((True, False, []), None),         # no balloon driver
    ]
    failed = 0
    for (reporting, driver, devices), want in cases:
        with tempfile.TemporaryDirectory() as root:
            got = fabric_ns.free_page_reporting(tree(root, reporting, driver, devices))
            if got != want:
                print(f"FAIL reporting={reporting} driver={driver} devices={devices}: "
                      f"got {got!r}, want {want!r}")
                failed += 1
    thp_cases = [
        ("always [madvise] never\n", "madvise"),
        ("[always] madvise never\n", "always"),
        ("always madvise [never]\n", "never"),
        ("always madvise never\n", None),  # no mode marked
        (None, None),                      # a kernel without transparent huge pages
    ]
    for text, want in thp_cases:
        with tempfile.TemporaryDirectory() as root:
            if text is not None:
                d = os.path.join(root, "kernel/mm/transparent_hugepage")
                os.makedirs(d)
                with open(os.path.join(d, "enabled"), "w") as f:
                    f.write(text)
            got = fabric_ns.transparent_hugepages(root)
            if got != want:
                print(f"FAIL transparent_hugepages {text!r}: got {got!r}, want {want!r}")
                failed += 1
    cases += thp_cases
    print(f"{len(cases) - failed}/{len(cases)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
