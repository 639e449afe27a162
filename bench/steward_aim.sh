#!/usr/bin/env bash
# AIM on the generated steward table (issue 38; docs/benchmarks.md, "AIM on a
# small table"): 5 seeds of the recipe with seeded noise (bench/steward_aim.cc,
# in-process: no server, no privacy claim), with the label round and without
# it (the budget of the paper's Alg. 2 alone), at each epsilon.
#
#   bench/steward_aim.sh [epsilons=1,0.3,0.1] [seeds=1,2,3,4,5]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
epsilons=${1:-1,0.3,0.1}
seeds=${2:-1,2,3,4,5}
cmake --build "$BUILD_DIR" --target steward_aim >/dev/null
for epsilon in ${epsilons//,/ }; do
  for mode in label paper; do
    "$BUILD_DIR/bench/steward_aim" "$epsilon" "$seeds" 2000 "$mode"
  done
done
