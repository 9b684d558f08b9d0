# oxibot in a container: `docker build -t oxibot .` then `docker compose up -d` (compose.yaml).
# Stage 1 builds `oxibot` (the kernel with its bundled plugins and channels built in); stage 2
# holds only that executable, run by an unprivileged user whose data directory is the /data volume.

FROM rust:1-slim-bookworm AS build
RUN apt-get update \
    && apt-get install -y --no-install-recommends pkg-config git \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --profile dist --locked -p oxibot-kernel --bin oxibot \
    && mkdir /out \
    && cp target/dist/oxibot /out/

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates tini \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 10001 oxibot \
    && mkdir /data && chown oxibot:oxibot /data
COPY --from=build /out/ /usr/local/bin/
USER oxibot
ENV OXIBOT_HOME=/data
VOLUME ["/data"]
# The health endpoint; channels that serve clients (api 18791, websocket 18792) listen too.
EXPOSE 18790 18791 18792
HEALTHCHECK --interval=30s --timeout=5s CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/18790"]
ENTRYPOINT ["tini", "--", "oxibot"]
CMD ["gateway"]
