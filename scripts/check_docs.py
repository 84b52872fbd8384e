#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The docs check of scripts/lint.sh, over the files git tracks:
  - every source (.cc .h .cu .py .sh, .ci/run) names its licence (an SPDX-License-Identifier
    line in its first three lines);
  - every relative link of every Markdown file, and every repository path a Markdown file
    names in backquotes (bench/..., scripts/..., `tests/...`), exists;
  - no Markdown file speaks of working sessions or of issue numbers (history lives in git).
Exit 1 with one line per problem. --self-test runs the checks on made-up files first."""
import os
import re
import subprocess
import sys

SPDX = "SPDX-License-Identifier: Apache-2.0"
SOURCE = re.compile(r"\.(cc|h|cu|py|sh)$")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
# A path under a top-level folder of the tree, in backquotes: `bench/fabric/README.md`.
TOPS = ("aggregator", "bench", "cmake", "common", "deploy", "nccl_plugin", "protocol", "scripts",
        "tests", "tools")
NAMED = re.compile(r"`((?:%s)/[A-Za-z0-9_./+-]*[A-Za-z0-9_/])`" % "|".join(TOPS))
HISTORY = re.compile(
    r"\b(?:this|that|the next|the previous|an earlier|a later|one|each|every|earlier|later) "
    r"sessions?\b|\bsession \d+\b|\bissues? #?\d+\b|\((?:see )?#\d+\)|\bsee #\d+\b", re.IGNORECASE)


def tracked(root):
    out = subprocess.run(["git", "ls-files"], cwd=root, capture_output=True, text=True, check=True)
    return out.stdout.split()


def check_source(path, text):
    head = text.split("\n", 3)[:3]
    return [] if any(SPDX in line for line in head) else [f"{path}: no '{SPDX}' line at its top"]


def exists(root, md_dir, target):
    target = target.split("#", 1)[0]
    if not target:
        return True
    return os.path.exists(os.path.normpath(os.path.join(root, md_dir, target)))


def build_product(root, name):
    """A program or library a build makes (`aggregator/confluxd`, `nccl_plugin/libx.so`), named
    by where it lands in a build folder: its folder is in the tree, it is not."""
    base = os.path.basename(name)
    return ("." not in base or base.endswith(".so")) and \
        os.path.isdir(os.path.join(root, os.path.dirname(name)))


def check_markdown(root, path, text):
    problems = []
    md_dir = os.path.dirname(path)
    in_fence = False
    for n, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            if not exists(root, md_dir, target):
                problems.append(f"{path}:{n}: link to {target}, which does not exist")
        if not in_fence:
            for name in NAMED.findall(line):
                if "*" in name or "<" in name or build_product(root, name):
                    continue
                if not (exists(root, "", name) or exists(root, md_dir, name)):
                    problems.append(f"{path}:{n}: names {name}, which does not exist")
        m = HISTORY.search(line)
        if m:
            problems.append(f"{path}:{n}: speaks of history ('{m.group(0)}'): git keeps it")
    return problems


def check_tree(root, files):
    problems = []
    for f in files:
        p = os.path.join(root, f)
        if not os.path.isfile(p):
            continue
        if SOURCE.search(f) or f == ".ci/run":
            problems += check_source(f, open(p, encoding="utf-8", errors="replace").read())
        if f.endswith(".md"):
            problems += check_markdown(root, f, open(p, encoding="utf-8").read())
    return problems


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        os.makedirs(os.path.join(d, "bench"))
        files = {"a.cc": "// " + SPDX + "\nint x;\n", "b.py": "#!/usr/bin/env python3\nprint(1)\n",
                 "bench/x.sh": "#!/bin/sh\n# " + SPDX + "\n",
                 "README.md": "See [x](bench/x.sh), [gone](bench/gone.md), `bench/x.sh`,\n"
                              "`bench/none.py`, [web](https://example.com) and [top](#top).\n"
                              "Done in this session, see issue 57 and (#58); request #71.\n"
                              "Control sessions against a live daemon are fine.\n"}
        for name, text in files.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        got = check_tree(d, list(files))
        want = ["b.py: no", "README.md:1: link to bench/gone.md", "README.md:2: names bench/none.py",
                "README.md:3: speaks of history ('this session')"]
        missing = [w for w in want if not any(g.startswith(w) for g in got)]
        if missing or len(got) != len(want):
            print("check_docs self-test FAILED:", missing or got)
            return 1
    print("check_docs self-test: ok")
    return 0


def main():
    if "--self-test" in sys.argv:
        return self_test()
    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                          check=True).stdout.strip()
    files = tracked(root)
    problems = check_tree(root, files)
    for p in problems:
        print(p)
    n_md = sum(f.endswith(".md") for f in files)
    print(f"check_docs: {len(problems)} problem(s) in {len(files)} files ({n_md} Markdown)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
