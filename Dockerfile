# dpcurator server image: build on bookworm, run on bookworm-slim as a
# non-root user with the database on a volume.
FROM debian:bookworm AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      build-essential cmake ninja-build pkg-config \
      libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
      libabsl-dev libeigen3-dev libsqlite3-dev libssl-dev nlohmann-json3-dev \
      prometheus-cpp-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Portable build: no -march=native, the image must run on any x86-64.
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDPC_NATIVE=OFF \
      -DDPC_BUILD_TESTS=OFF -DDPC_BUILD_BENCHMARKS=OFF \
    && cmake --build /build -j "$(nproc)" --target dpcurator-server dpcurator dpcurator-health-probe

FROM debian:bookworm-slim
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libsqlite3-0 libssl3 ca-certificates \
      libabsl20220623 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home /var/lib/dpcurator --create-home dpcurator
COPY --from=build /build/server/dpcurator-server /build/client/dpcurator \
     /build/deploy/dpcurator-health-probe /usr/local/bin/
USER dpcurator
VOLUME ["/var/lib/dpcurator"]
EXPOSE 50051
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["dpcurator-health-probe", "--addr", "127.0.0.1:50051", "--plaintext"]
ENTRYPOINT ["dpcurator-server", "--db", "/var/lib/dpcurator/curator.db", \
            "--listen", "0.0.0.0:50051", "--tokens", "/etc/dpcurator/tokens.txt"]
CMD ["--insecure_dev"]
