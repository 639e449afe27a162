#!/usr/bin/env bash
# The Fashion-MNIST table of issues 14 (item 6) and 16: real data, DP-MERF
# and PEARL at epsilon 1 and 0.2 (delta 1e-5), one-shot and minibatch
# DP-MERF, and DP-kernel (conditional, kernel_witness steps), judged by the
# papers' CNN (5 seeds) and logistic regression, with the wall time of each
# phase; the 10 x 10 PNG grid of each row lands beside the table.
#
#   bench/fmnist.sh [OUT_DIR] [extra bench/fmnist flags...]
#   bench/fmnist.sh OUT --rows merf-1,kernel-1     # issue 16's comparison
#
# Default OUT_DIR: fmnist-results/<UTC date>. Needs the build (build/bench/
# fmnist, or FMNIST_BIN=path) and Debian's dataset-fashion-mnist
# (scripts/dev.sh). The rows before DP-kernel take about an hour on 2
# cores, each DP-kernel row adds its training time (see bench/fmnist.cc's
# defaults) and its judge; `build/bench/fmnist --quick` is the smoke test.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-fmnist-results/$(date -u +%Y%m%dT%H%M%SZ)}"
shift || true
mkdir -p "$out"
bin="${FMNIST_BIN:-build/bench/fmnist}"
if [[ ! -x "$bin" ]]; then
  echo "build it first: cmake --build build --target fmnist (or set FMNIST_BIN)" >&2
  exit 1
fi
{
  echo "# bench/fmnist.sh, $(date -u +%FT%TZ), $(nproc) cores: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
  "$bin" --out "$out" --threads 2 --seeds 5 "$@"
} 2> "$out/progress.log" | tee "$out/table.txt"
echo "table: $out/table.txt; grids: $out/*.png; progress: $out/progress.log" >&2
