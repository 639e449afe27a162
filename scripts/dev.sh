#!/usr/bin/env bash
# dpcurator developer entry point.
#
#   scripts/dev.sh demo    install what is missing, build, run `dpcurator demo`
#   scripts/dev.sh test    install what is missing, build, run the test suite
#   scripts/dev.sh build   install what is missing and build
#   scripts/dev.sh adult   build, then the Adult benchmark (bench/adult.sh)
#
# Environment: BUILD_DIR (default: build), JOBS (default: nproc),
# DPC_NATIVE (default OFF: a binary for any x86-64 machine; ON: -march=native),
# DPC_WERROR and DPC_CHECK_AVX512 (default OFF; .ci/run turns both ON:
# warnings are errors in CI only, and CI also compiles core/ for AVX-512).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
DPC_NATIVE=${DPC_NATIVE:-OFF}
DPC_WERROR=${DPC_WERROR:-OFF}
DPC_CHECK_AVX512=${DPC_CHECK_AVX512:-OFF}

# Debian bookworm packages only (BUILD-NOTES.md): nothing is downloaded at
# build or test time.
PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libeigen3-dev libsqlite3-dev libssl-dev libgtest-dev
  nlohmann-json3-dev libbenchmark-dev prometheus-cpp-dev openssl
  libsleef-dev libopenblas-dev zlib1g-dev libpng-dev dataset-fashion-mnist
)

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

build() {
  echo "build: configuring $BUILD_DIR (Release, DPC_NATIVE=$DPC_NATIVE, DPC_WERROR=$DPC_WERROR," \
    "DPC_CHECK_AVX512=$DPC_CHECK_AVX512)"
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPC_NATIVE="$DPC_NATIVE" \
    -DDPC_WERROR="$DPC_WERROR" -DDPC_CHECK_AVX512="$DPC_CHECK_AVX512" -DDPC_BUILD_TESTS=ON >/dev/null
  echo "build: compiling with $JOBS jobs"
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
  demo)
    install_missing
    build
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
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
