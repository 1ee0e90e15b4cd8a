# syntax=docker/dockerfile:1
# Multi-stage: build with the Rust toolchain, run on slim Debian as a non-root user.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and the compiled dependencies between builds, so a source
# edit recompiles callbackd only. rusqlite's `bundled` feature compiles SQLite in: the
# runtime image needs no libsqlite3.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p callbackd --bin callbackd \
    && cp target/release/callbackd /usr/local/bin/callbackd

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --home-dir /data callbackd \
    && mkdir -p /data && chown callbackd /data
COPY --from=build /usr/local/bin/callbackd /usr/local/bin/callbackd
USER callbackd
WORKDIR /data
# In a container 127.0.0.1 is the container's own loopback: listen on all interfaces and
# publish the port on the host's loopback (docker run -p 127.0.0.1:7420:7420).
ENV CALLBACKD_LISTEN=0.0.0.0:7420 \
    CALLBACKD_ALLOW_REMOTE=true \
    CALLBACKD_DB=/data/callbackd.db
VOLUME ["/data"]
EXPOSE 7420
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s CMD ["callbackd", "healthcheck"]
ENTRYPOINT ["callbackd"]
CMD ["serve"]
