#!/usr/bin/env bash
# The Adult benchmark: the demo pipeline (local server, upload, one DP-MERF
# release at (epsilon, delta) = (1, 1e-5), train, sample, evaluate) on UCI
# Adult, train on adult.data, test on adult.test, as the files are.
#
#   bench/adult.sh [--json] [extra `dpcurator demo` options]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
DATA_DIR=${ADULT_DIR:-../shared/data/adult}
exec "$BUILD_DIR/client/dpcurator" demo \
  --schema schemas/adult.schema.json \
  --train-csv "$DATA_DIR/adult.data" \
  --test-csv "$DATA_DIR/adult.test" \
  --epsilon 1 --delta 1e-5 "$@"
