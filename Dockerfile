# Build stage: compile the release binary.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin tickertape

# The country database (issue 20), from the same npm package and version
# as `make setup` installs (Makefile GEOIP_VERSION).
FROM node:22-bookworm-slim AS geoip
RUN npm install --no-audit --no-fund --prefix /geoip @ip-location-db/geo-whois-asn-country-mmdb@2.3.2026061719

# Runtime stage: the binary and CA certificates, nothing else. It needs
# MONGODB_URI: the embedded database is a development convenience that the
# image does not ship.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/tickertape /usr/local/bin/tickertape
COPY --from=geoip /geoip/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb /usr/share/tickertape/geo-whois-asn-country.mmdb
# The write-ahead journal lives here: a hit is answered once it is on this
# disk, so it must be a persistent volume.
RUN mkdir -p /var/lib/tickertape && chown nobody /var/lib/tickertape
VOLUME /var/lib/tickertape
ENV TICKERTAPE_LISTEN=0.0.0.0:8000 TICKERTAPE_DATA_DIR=/var/lib/tickertape \
    TICKERTAPE_GEOIP_DB=/usr/share/tickertape/geo-whois-asn-country.mmdb
EXPOSE 8000
USER nobody
ENTRYPOINT ["tickertape"]
CMD ["serve"]
