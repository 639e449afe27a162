#!/usr/bin/env bash
# dpcurator developer entry point.
#
#   scripts/dev.sh demo    install what is missing, build the demo's two
#                          binaries (dpcurator, dpcurator-server), run `dpcurator demo`
#   scripts/dev.sh test    install what is missing, build everything, run the test suite
#   scripts/dev.sh build   install what is missing and build everything
#   scripts/dev.sh adult   build, then the Adult benchmark (bench/adult.sh)
#
# Environment: BUILD_DIR (default: build), JOBS (default: nproc),
# DPC_NATIVE (default OFF: a binary for any x86-64 machine; ON: -march=native),
# DPC_WERROR and DPC_CHECK_AVX512 (default OFF; .ci/run turns both ON:
# warnings are errors in CI only, and CI also compiles core/'s kernels for AVX-512).
# Compiles go through ccache when it is installed (it is in the package list;
# CCACHE_DISABLE=1 turns it off).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
DPC_NATIVE=${DPC_NATIVE:-OFF}
DPC_WERROR=${DPC_WERROR:-OFF}
DPC_CHECK_AVX512=${DPC_CHECK_AVX512:-OFF}

# Debian bookworm packages only (BUILD-NOTES.md): nothing is downloaded at
# build or test time. The lists are the ones the Dockerfile installs
# (deploy/packages/build.txt) plus the test suite's (dev.txt): one package a
# line, '#' comments.
read -r -a PACKAGES <<<"$(sed 's/#.*//' deploy/packages/build.txt deploy/packages/dev.txt | xargs)"

install_missing() {
  local missing=()
  for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" \
      || missing+=("$package")
  done
  if ((${#missing[@]} == 0)); then
    echo "setup: all ${#PACKAGES[@]} build packages are installed"
    return
  fi
  echo "setup: installing missing Debian packages: ${missing[*]}"
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then sudo=(sudo); fi
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
    "${missing[@]}"
}

# build [TARGET...]: configure, then build the targets named (all if none).
build() {
  echo "build: configuring $BUILD_DIR (Release, DPC_NATIVE=$DPC_NATIVE, DPC_WERROR=$DPC_WERROR," \
    "DPC_CHECK_AVX512=$DPC_CHECK_AVX512)"
  local launcher=()
  if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPC_NATIVE="$DPC_NATIVE" \
    -DDPC_WERROR="$DPC_WERROR" -DDPC_CHECK_AVX512="$DPC_CHECK_AVX512" -DDPC_BUILD_TESTS=ON \
    "${launcher[@]}" >/dev/null
  local targets=()
  if (($# > 0)); then targets=(--target "$@"); fi
  echo "build: compiling ${*:-everything} with $JOBS jobs"
  cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
}

case "${1:-}" in
  demo)
    install_missing
    # Only what the demo runs: the client, and the server it starts
    # (client/demo_cmd.cc) - not the test suite, which is most of the build.
    build dpcurator dpcurator-server
    shift
    exec "$BUILD_DIR/client/dpcurator" demo "$@"
    ;;
  test)
    install_missing
    build
    echo "test: running the suite"
    exec ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS" --timeout 900
    ;;
  build)
    install_missing
    build
    ;;
  adult)
    install_missing
    build
    shift
    exec bench/adult.sh "$@"
    ;;
  *)
    sed -n '2,/^set /{/^#/p}' "$0"
    exit 2
    ;;
esac
