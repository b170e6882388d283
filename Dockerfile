# Build stage: compile the release binary.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin tickertape

# Runtime stage: the binary and CA certificates, nothing else. It needs
# MONGODB_URI: the embedded database is a development convenience that the
# image does not ship.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/tickertape /usr/local/bin/tickertape
# The write-ahead journal lives here: a hit is answered once it is on this
# disk, so it must be a persistent volume.
RUN mkdir -p /var/lib/tickertape && chown nobody /var/lib/tickertape
VOLUME /var/lib/tickertape
ENV TICKERTAPE_LISTEN=0.0.0.0:8000 TICKERTAPE_DATA_DIR=/var/lib/tickertape
EXPOSE 8000
USER nobody
ENTRYPOINT ["tickertape"]
CMD ["serve"]
