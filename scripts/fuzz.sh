#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/ with clang (ASan + UBSan) in a
# separate build directory and runs each one for N seconds on its seed
# corpus (fuzz/corpus/<target>, never modified: new inputs go to the work
# directory). A crash or failed invariant leaves the input in
# <build>/fuzz-work/<target>/artifacts/; add it to fuzz/corpus/<target>/ as
# a regression once fixed (the ctest smoke run replays every corpus file).
#
# Usage: scripts/fuzz.sh [seconds-per-target (60)] [build-dir (/tmp/dpc-fuzz)]
#        TARGETS="csv report" JOBS=2 scripts/fuzz.sh 300
set -uo pipefail

seconds=${1:-60}
build=${2:-/tmp/dpc-fuzz}
targets=${TARGETS:-csv schema report}
jobs=${JOBS:-2}
source_dir=$(cd "$(dirname "$0")/.." && pwd)

launcher=()
if command -v ccache > /dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$source_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DDPC_FUZZ=ON "${launcher[@]}" \
  > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
build_targets=()
for t in $targets; do build_targets+=("${t}_fuzz"); done
cmake --build "$build" -j "$jobs" --target "${build_targets[@]}" || exit 1

status=0
summary=()
for t in $targets; do
  work="$build/fuzz-work/$t"
  mkdir -p "$work/corpus" "$work/artifacts"
  echo "=== $t: ${seconds}s"
  # halt_on_error: a UBSan report is a crash, so the input is kept.
  UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    "$build/fuzz/${t}_fuzz" -max_total_time="$seconds" -max_len=8192 -rss_limit_mb=2048 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$source_dir/fuzz/corpus/$t" > "$work/log" 2>&1
  rc=$?
  tail -n 25 "$work/log"
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$work/log" | tail -1 | cut -d' ' -f2)
  if [[ $rc -eq 0 ]]; then result=ok; else result="CRASH (rc $rc; see $work/artifacts)"; status=1; fi
  summary+=("$(printf '%-8s %8ss %12s %10s %8s  %s' "$t" "$seconds" "${runs:-?}" "${rate:-?}" \
    "${cov:-?}" "$result")")
done
echo
printf '%-8s %9s %12s %10s %8s  %s\n' target time runs exec/s cov result
printf '%s\n' "${summary[@]}"
exit $status
