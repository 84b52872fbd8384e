#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# `bash -n` and shellcheck (every severity) on the shell an operator or CI runs: the Slurm batch
# script, scripts/*.sh, .ci/run and these tests' own scripts. And shellcheck has teeth: an
# unquoted expansion is reported.   shell_lint_test.sh SOURCE_DIR
set -euo pipefail
cd "$1"
files=(deploy/slurm/conflux-job.sbatch scripts/*.sh .ci/run tests/deploy/*.sh)
for f in "${files[@]}"; do
  bash -n "$f" || { echo "FAILED: bash -n $f"; exit 1; }
done
shellcheck --shell=bash "${files[@]}" || { echo "FAILED: shellcheck"; exit 1; }
# shellcheck disable=SC2016  # the single quotes are the point: a script for shellcheck
if printf '#!/bin/bash\nrm -rf $1/x\n' | shellcheck - >/dev/null 2>&1; then
  echo "FAILED: shellcheck accepted an unquoted expansion"
  exit 1
fi
echo "bash -n and shellcheck clean: ${files[*]}"
