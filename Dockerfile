# syntax=docker/dockerfile:1
# sloburn container image: a Rust build stage, then distroless (glibc, no shell) as non-root.
#   docker build -t sloburn:0.1.0 .
# The build runs scripts/build-image-binary.sh, which also builds the same binary without Docker.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock build.rs ./
# Shared build settings: the bundled SQLite's compile flags (.cargo/config.toml).
COPY .cargo ./.cargo
COPY src ./src
# The dashboard's files (uPlot, page, script, style), embedded with include_str!.
COPY assets ./assets
COPY scripts/build-image-binary.sh ./scripts/build-image-binary.sh
RUN --mount=type=cache,target=/usr/local/cargo/registry bash scripts/build-image-binary.sh

# cc: glibc and libgcc for the Rust binary (TLS is rustls, SQLite is bundled: nothing else).
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/sloburn /usr/local/bin/sloburn
# distroless' nonroot user; Kubernetes' runAsNonRoot needs it numeric.
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/sloburn"]
CMD ["serve","--config","/etc/sloburn/config.yaml","--log-format","json"]
