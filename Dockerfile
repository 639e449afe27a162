# dpcurator server image: build on bookworm, run on bookworm-slim as a
# non-root user with the database on a volume.
#
# The package lists are deploy/packages/*.txt, the same files scripts/dev.sh
# installs from (one package a line, '#' comments), so the image and a
# developer's build cannot drift apart; tests/deploy checks that runtime.txt
# names every package whose library the binaries load.
FROM debian:bookworm AS build
COPY deploy/packages/build.txt /tmp/packages/
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $(sed 's/#.*//' /tmp/packages/build.txt) \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Portable build: no -march=native, the image must run on any x86-64.
# DPC_WERROR: warnings are errors only where asked (CI passes ON, as in its
# own build).
#
# The build directory is /src/build, the layout of a clone, and compiles go
# through ccache with CCACHE_BASEDIR=/src and deploy/ccache.conf:
# scripts/build-image.sh can mount at /ccache a cache that a host build of the
# same sources filled with the same settings (CI does), and since every path
# ccache hashes is then relative and the flags are the same, the objects are
# found, not compiled again. Without a mount (a plain `docker build`) the
# cache starts empty and everything is compiled. The stats log counts this
# build's hits and misses alone.
ARG DPC_WERROR=OFF
# LANG: ccache hashes the locale variables; .ci/run sets the same.
ENV CCACHE_DIR=/ccache CCACHE_BASEDIR=/src CCACHE_CONFIGPATH=/src/deploy/ccache.conf \
    CCACHE_STATSLOG=/tmp/ccache-stats.log LANG=C.UTF-8
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPC_NATIVE=OFF \
      -DDPC_WERROR="$DPC_WERROR" -DDPC_BUILD_TESTS=OFF -DDPC_BUILD_BENCHMARKS=OFF \
      -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    && cmake --build build -j "$(nproc)" --target dpcurator-server dpcurator dpcurator-health-probe \
    && ccache --show-log-stats

FROM debian:bookworm-slim
COPY deploy/packages/runtime.txt /tmp/packages/
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      $(sed 's/#.*//' /tmp/packages/runtime.txt) \
    && apt-get clean && rm -rf /var/lib/apt/lists/* /tmp/packages \
    && useradd --system --uid 10001 --home /var/lib/dpcurator --create-home dpcurator
COPY --from=build /src/build/server/dpcurator-server /src/build/client/dpcurator \
     /src/build/deploy/dpcurator-health-probe /usr/local/bin/
USER dpcurator
VOLUME ["/var/lib/dpcurator"]
EXPOSE 50051
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["dpcurator-health-probe", "--addr", "127.0.0.1:50051", "--plaintext"]
ENTRYPOINT ["dpcurator-server", "--db", "/var/lib/dpcurator/curator.db", \
            "--listen", "0.0.0.0:50051", "--tokens", "/etc/dpcurator/tokens.txt"]
CMD ["--insecure_dev"]
