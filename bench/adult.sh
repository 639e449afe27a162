#!/usr/bin/env bash
# The Adult benchmark: the demo pipeline (local server, upload, release at
# (epsilon, delta) = (1, 1e-5), train, sample, evaluate) on UCI Adult, train
# on adult.data, test on adult.test, as the files are.
#
#   bench/adult.sh [--json] [extra `dpcurator demo` options]
#       one demo run (DP-MERF unless --method says otherwise)
#   bench/adult.sh --methods aim,mst,merf --epsilons 1,0.2 --seeds 1,2,3 \
#       [--out DIR] [extra `dpcurator demo` options]
#       one demo run per (method, epsilon, seed), each on a fresh local server
#       and dataset (so one method's ledger never limits another's), every
#       run's JSON and synthetic rows kept under DIR (default
#       bench-out/adult-<UTC time>), then one table: per method and epsilon,
#       the mean over seeds (and each seed's value) of every shape check's
#       worst gap to real, the education <-> education-num agreement, the
#       3-way marginal distance, logistic-regression TSTR ROC-AUC, the average
#       ROC-AUC over the evaluator's classifiers, and the wall time. The table
#       is printed and written to DIR/table.md; `dpcurator report` pages of
#       the first seed's rows per method and epsilon go to DIR/report-*.html
#       unless --no-reports.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
DATA_DIR=${ADULT_DIR:-../shared/data/adult}
CLI="$BUILD_DIR/client/dpcurator"
COMMON=(--schema schemas/adult.schema.json --train-csv "$DATA_DIR/adult.data"
        --test-csv "$DATA_DIR/adult.test" --delta 1e-5)

methods="" epsilons="" seeds="" out="" reports=1
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --methods) methods=$2; shift 2 ;;
    --epsilons) epsilons=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-reports) reports=0; shift ;;
    *) extra+=("$1"); shift ;;
  esac
done

if [[ -z "$methods$epsilons$seeds" ]]; then
  exec "$CLI" demo "${COMMON[@]}" --epsilon 1 "${extra[@]}"
fi
methods=${methods:-merf}
epsilons=${epsilons:-1}
seeds=${seeds:-1}
out=${out:-bench-out/adult-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
echo "bench/adult.sh: methods $methods, epsilons $epsilons, seeds $seeds -> $out" >&2
IFS=, read -ra method_list <<<"$methods"
IFS=, read -ra epsilon_list <<<"$epsilons"
IFS=, read -ra seed_list <<<"$seeds"
for epsilon in "${epsilon_list[@]}"; do
  for seed in "${seed_list[@]}"; do
    for method in "${method_list[@]}"; do
      run="$out/$method-eps$epsilon-seed$seed"
      echo "$(date -u +%H:%M:%S) $method epsilon $epsilon seed $seed" >&2
      # The budget cap leaves room for the one release at any epsilon here.
      "$CLI" demo "${COMMON[@]}" --method "$method" --epsilon "$epsilon" \
        --budget "$(python3 -c "print(max(3.0, 2 * $epsilon))")" --seed "$seed" --json \
        --save-synthetic "$run.csv" "${extra[@]}" >"$run.json"
    done
  done
done
python3 bench/adult_table.py "$out" "$methods" "$epsilons" "$seeds" | tee "$out/table.md"
if [[ $reports -eq 1 ]]; then
  # One report page per method and epsilon (the first seed's rows), the
  # comparison of all of them in one page with several --synthetic files.
  for epsilon in "${epsilon_list[@]}"; do
    files=() labels=()
    for method in "${method_list[@]}"; do
      files+=("$out/$method-eps$epsilon-seed${seed_list[0]}.csv")
      labels+=("$method")
    done
    (IFS=,; "$CLI" report --schema schemas/adult.schema.json --real "$DATA_DIR/adult.test" \
      --synthetic "${files[*]}" --labels "${labels[*]}" --no-tstr \
      --out "$out/report-eps$epsilon.html" >&2)
  done
fi
