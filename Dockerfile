# examples/server as an image: a rate-limited HTTP server configured by flags, environment
# variables (REDLIMIT_*) and secret files (REDLIMIT_*_FILE). Not built or run by the test
# suite (no Docker there); scripts/test.sh checks the same `cargo build` command
# (`cargo check`).
#
#   docker build -t redlimit-server .
#   docker compose up        # with compose.yaml: the server and Redis 7

FROM rust:1.88-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --example server --features admin,config,jwks,tls-ring

FROM debian:bookworm-slim
# CA roots for rediss:// URLs.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/examples/server /usr/local/bin/redlimit-server
COPY examples/redlimit.toml /etc/redlimit/redlimit.toml
USER 65532:65532
# The service, /metrics, the admin API (with an admin token).
EXPOSE 3000 9090 9091
ENTRYPOINT ["redlimit-server"]
CMD ["--bind", "0.0.0.0:3000", "--metrics-bind", "0.0.0.0:9090", "--config", "/etc/redlimit/redlimit.toml"]
