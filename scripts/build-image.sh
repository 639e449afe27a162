#!/usr/bin/env bash
# Builds the dpcurator server image from the Dockerfile without a Docker
# engine, then starts the server inside it and checks that it answers the
# health probe the image's HEALTHCHECK uses.
#
#   scripts/build-image.sh            build the image "dpcurator", then check it
#   scripts/build-image.sh --check    only check an image built earlier
#
# buildah stores images with the vfs driver and runs them with chroot
# isolation, so this works as root in an unprivileged sandbox. The base
# images (debian:bookworm, debian:bookworm-slim) are made locally by
# ../shared/tools/container-base-image.sh (debootstrap from Debian's mirror);
# nothing is pulled from a registry (--pull=never).
#
# Environment: IMAGE (default dpcurator), SHARED_DIR (default ../shared),
# PROBE_PORT (default 50551: the server listens on the host's loopback, since
# chroot isolation shares the host's network), DPC_WERROR (default OFF; passed
# to the Dockerfile), CCACHE_DIR (unset: the build stage compiles from
# scratch, about 10 min on 2 cores; set: that ccache directory is mounted at
# /ccache for the build stage's compiles). .ci/run passes the cache its own
# build filled, with CCACHE_BASEDIR at the clone, deploy/ccache.conf, LANG and the
# same DPC_WERROR, so the image's compiles are cache hits and only the links
# remain: ccache's default compiler check (size and mtime) matches, since
# dpkg installs the same g++ package with the same mtime in both places.
set -euo pipefail
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-dpcurator}
SHARED_DIR=${SHARED_DIR:-../shared}
PROBE_PORT=${PROBE_PORT:-50551}
export STORAGE_DRIVER=vfs
# The storage driver comes from STORAGE_DRIVER, as in container-base-image.sh
# (passing --storage-driver as well made buildah look in another store).
buildah=(buildah)

if [[ $(id -u) -ne 0 ]]; then
  echo "build-image: buildah with vfs storage and chroot isolation needs root" >&2
  exit 2
fi

if [[ ${1:-} != --check ]]; then
  echo "build-image: local base images (debootstrap; minutes the first time)"
  bash "$SHARED_DIR/tools/container-base-image.sh"
  volumes=()
  if [[ -n ${CCACHE_DIR:-} ]]; then
    mkdir -p "$CCACHE_DIR"
    volumes=(--volume "$(cd "$CCACHE_DIR" && pwd):/ccache")
    echo "build-image: building $IMAGE from Dockerfile with the ccache at $CCACHE_DIR"
  else
    echo "build-image: building $IMAGE from Dockerfile (no CCACHE_DIR: compiles the server," \
      "~10 min on 2 cores)"
  fi
  # Docker format keeps the HEALTHCHECK instruction (OCI image config has no
  # health check field).
  SECONDS=0
  "${buildah[@]}" bud --isolation chroot --pull=never --format docker --layers=false \
    --build-arg DPC_WERROR="${DPC_WERROR:-OFF}" "${volumes[@]}" -t "$IMAGE" .
  echo "build-image: image built in ${SECONDS} s"
fi

echo "build-image: checking image configuration"
config=$("${buildah[@]}" inspect --type image --format \
  '{{.Docker.Config.User}}|{{.Docker.Config.Healthcheck.Test}}|{{.Docker.Config.Volumes}}' \
  "localhost/$IMAGE")
echo "  user|healthcheck|volumes = $config"
IFS='|' read -r user healthcheck volumes <<<"$config"
[[ $user == dpcurator ]] || { echo "build-image: FAIL: image does not run as dpcurator" >&2; exit 1; }
[[ $healthcheck == *dpcurator-health-probe* ]] ||
  { echo "build-image: FAIL: no HEALTHCHECK with the health probe" >&2; exit 1; }
[[ $volumes == */var/lib/dpcurator* ]] ||
  { echo "build-image: FAIL: no volume for the database" >&2; exit 1; }

container=$("${buildah[@]}" from "localhost/$IMAGE")
trap '"${buildah[@]}" rm "$container" >/dev/null 2>&1 || true' EXIT

# Every shared library the three binaries load must be in the image: a
# package missing from deploy/packages/runtime.txt shows here as "not found"
# (tests/deploy checks the list itself on the build machine).
echo "build-image: checking the binaries' shared libraries inside the image (ldd)"
"${buildah[@]}" run --isolation chroot "$container" -- /bin/sh -c '
  missing=0
  for binary in /usr/local/bin/dpcurator-server /usr/local/bin/dpcurator \
                /usr/local/bin/dpcurator-health-probe; do
    [ -x "$binary" ] || { echo "  $binary: not in the image" >&2; missing=1; continue; }
    out=$(ldd "$binary") || { echo "  ldd $binary failed" >&2; missing=1; continue; }
    echo "  $binary: $(echo "$out" | grep -c "=>") libraries"
    if echo "$out" | grep "not found" >&2; then missing=1; fi
  done
  exit $missing
' || { echo "build-image: FAIL: a library the binaries load is missing from the image" \
         "(deploy/packages/runtime.txt)" >&2; exit 1; }

echo "build-image: starting the server inside the image and probing it"
# As the image's user, the way the entrypoint runs it: a fresh database on
# the volume path, a token file, plaintext on loopback (--insecure_dev).
# The probe must first fail (nothing listening: it can fail), then pass once
# the server serves, then the server stops cleanly on SIGTERM.
"${buildah[@]}" run --isolation chroot --user dpcurator "$container" -- /bin/sh -c "
  set -e
  addr=127.0.0.1:$PROBE_PORT
  if dpcurator-health-probe --addr \$addr --plaintext --timeout-ms 500 2>/dev/null; then
    echo 'probe answered before the server started: port $PROBE_PORT is taken' >&2; exit 1
  fi
  echo 'curator probe-token-0123456789abcdef' > /var/lib/dpcurator/tokens.txt
  dpcurator-server --db /var/lib/dpcurator/check.db --listen \$addr \
    --tokens /var/lib/dpcurator/tokens.txt --insecure_dev 2> /var/lib/dpcurator/server.log &
  server=\$!
  for i in \$(seq 1 60); do
    if dpcurator-health-probe --addr \$addr --plaintext --timeout-ms 500; then
      kill -TERM \$server; wait \$server; status=\$?
      echo \"server exited with \$status after SIGTERM\"
      sed 's/^/  server: /' /var/lib/dpcurator/server.log
      rm -f /var/lib/dpcurator/check.db* /var/lib/dpcurator/tokens.txt /var/lib/dpcurator/server.log
      exit \$status
    fi
    sleep 0.5
  done
  echo 'server never answered the health probe' >&2
  sed 's/^/  server: /' /var/lib/dpcurator/server.log >&2
  kill -KILL \$server || true
  exit 1
"
echo "build-image: OK: image $IMAGE builds, runs as dpcurator, and its server answers the health probe"
