# syntax=docker/dockerfile:1.7
# One Dockerfile, six images: `--build-arg BINARY=<component>` picks the binary, so each
# Deployment runs an image holding only its own program (docs/install.md, "Images").
#
#   docker buildx build --build-arg BINARY=maas-client -t ghcr.io/capmaas-rs/maas-client:v0.10.0 .
#
# `just images` builds all six. Dependencies are cached across builds in BuildKit cache mounts
# (the cargo registry and the target folder), so a code change recompiles only our crates.

# The workspace's rust-version (Cargo.toml) or newer.
ARG RUST_VERSION=1.89
ARG BINARY=maas-client

FROM docker.io/library/rust:${RUST_VERSION}-bookworm AS build
ARG BINARY
WORKDIR /src
COPY . .
# The image's toolchain builds (rust-toolchain.toml would make rustup download another).
RUN rm -f rust-toolchain.toml
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin "${BINARY}" \
 && install -D -m 0755 "target/release/${BINARY}" "/out/${BINARY}"

# glibc and nothing else (TLS is rustls, no OpenSSL); no shell; UID 65532 (nonroot).
FROM gcr.io/distroless/cc-debian12:nonroot
ARG BINARY
COPY --from=build /out/${BINARY} /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
