#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Formatting check: every tracked C++/CUDA source must be as clang-format (.clang-format,
# Google style, 100 columns) leaves it. Fix with: clang-format -i $(git ls-files '*.cc' '*.h' '*.cu')
# Layer check: no folder includes a higher one (scripts/check_layers.py names the layers: the
# top-level components, and the folders inside aggregator/, nccl_plugin/ and tools/); its
# self-test first, so that a broken check cannot pass everything.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || scripts/setup.sh
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu')
clang-format --dry-run -Werror "${files[@]}"
echo "lint: ${#files[@]} files formatted as .clang-format says"
python3 scripts/check_layers.py --self-test | tail -n 1
python3 scripts/check_layers.py
# Docs check: licence lines in every source, links and named paths in every Markdown file
# exist, no Markdown file speaks of sessions or issue numbers (its self-test first).
python3 scripts/check_docs.py --self-test
python3 scripts/check_docs.py
