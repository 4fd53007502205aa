# syntax=docker/dockerfile:1
# Umbra control plane image: global-cp, zone-cp and umbractl in /usr/local/bin.
#
#   docker build -t umbra:local .
#
# Protos are compiled with protox (pure Rust): no protoc needed. The build is self-contained:
# nothing outside this directory is read (../shared is only used by tests).

FROM rust:1-bookworm AS builder
WORKDIR /src
# The umbra-xds build script compiles ~480 Envoy protos; optimise build scripts in release too
# (the workspace only does so for dev builds).
ENV CARGO_PROFILE_RELEASE_BUILD_OVERRIDE_OPT_LEVEL=3
# The whole workspace: every member's Cargo.toml (tests/ included) must be present for --locked.
COPY . .
# The registry and target caches are BuildKit cache mounts, so the binaries are copied out of
# target/ within the same step. `cargo fetch` first downloads every locked package, so the
# umbra-xds build script's `cargo metadata --offline` finds the envoy-types proto files.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo fetch --locked \
    && cargo build --release --locked -p umbra-global-cp -p umbra-zone-cp -p umbractl \
    && mkdir -p /out \
    && cp target/release/global-cp target/release/zone-cp target/release/umbractl /out/

FROM debian:bookworm-slim
# curl: container health checks (GET /ready); openssl: the compose `kds-tls` one-shot (KDS
# TLS certificates).
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl openssl \
    && rm -rf /var/lib/apt/lists/*
# A fixed non-root uid; /tokens, /kds-tls, /dp and /var/lib/umbra exist owned by it so that named
# volumes mounted there start writable for it (Docker copies an image directory's owner into an
# empty volume; a volume mounted where the image has no directory starts root-owned, and the
# `zone-N-dp-credentials` one-shots could not write /dp).
RUN groupadd --system --gid 10001 umbra \
    && useradd --system --uid 10001 --gid umbra --home-dir /var/lib/umbra --shell /usr/sbin/nologin umbra \
    && mkdir -p /var/lib/umbra /tokens /kds-tls /dp \
    && chown umbra:umbra /var/lib/umbra /tokens /kds-tls /dp
COPY --from=builder /out/ /usr/local/bin/
# Listen on every interface by default inside a container (the binaries default to 127.0.0.1);
# flags override these.
ENV UMBRA_API_ADDR=0.0.0.0:5681 \
    UMBRA_KDS_ADDR=0.0.0.0:5685 \
    UMBRA_ADS_ADDR=0.0.0.0:5678
USER 10001:10001
WORKDIR /var/lib/umbra
# 5681 REST API (both CPs), 5685 KDS (Global), 5678 ADS (zone).
EXPOSE 5681 5685 5678
CMD ["global-cp"]
