# Two commands set everything up on a fresh machine:
#   make run    build and serve on an embedded local database
#   make test   formatting, lints and every test
# Both install what they need (cmake, the local database server, and for
# tests Debian's chromium, prometheus, time and python3-aiosmtpd (the
# email tests' SMTP server), and the schemathesis fuzzer; the
# country database from npm) into the system or the ignored .tools directory.

SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools
SECANTUS_VERSION := 0.5.3-beta.196
SECANTUS := $(TOOLS)/bin/secantusd-rs
CHROMIUM ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver
# The accessibility checker the browser tests inject into Chromium (npm).
AXE_VERSION := 4.14.1
AXE := $(CURDIR)/target/npm/node_modules/axe-core/axe.min.js
# The peers' own trackers the compatibility tests run (npm, MIT): Plausible's
# in Chromium, Umami's node client in node.
PLAUSIBLE_TRACKER_VERSION := 0.4.6
UMAMI_NODE_VERSION := 0.4.0
PEER_TRACKERS := $(CURDIR)/target/npm/.peers-$(PLAUSIBLE_TRACKER_VERSION)-$(UMAMI_NODE_VERSION)
# The IP-to-country database (npm, CC0 with NRO data under CC BY 4.0; see
# docs/classification.md), IPv4 and IPv6 in one file. Not in git.
GEOIP_VERSION := 2.3.2026061719
GEOIP := $(TOOLS)/geoip/geo-whois-asn-country.mmdb
GEOIP_STAMP := $(TOOLS)/geoip/.version-$(GEOIP_VERSION)
# The API fuzzer (PyPI) in a virtual environment of its own; its
# dependencies are pinned too (tests/api/schemathesis-constraints.txt), so a
# seed generates the same cases everywhere.
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_VENV := $(TOOLS)/schemathesis-$(SCHEMATHESIS_VERSION)
SCHEMATHESIS := $(SCHEMATHESIS_VENV)/bin/schemathesis

export TICKERTAPE_LOCALDB_BIN ?= $(SECANTUS)
export TICKERTAPE_SCHEMATHESIS ?= $(SCHEMATHESIS)

.PHONY: setup rust-components test-deps run test test-long lint fmt clean-data bench bench-quick bench-big

setup: $(SECANTUS) rust-components $(GEOIP)

$(SECANTUS):
	@scripts/need cmake cmake
	@echo "installing secantusd-rs $(SECANTUS_VERSION) into .tools (about 6 minutes, once)"
	cargo install secantus-mdb --version $(SECANTUS_VERSION) --locked --ignore-rust-version --root $(TOOLS)
	@$(SECANTUS) --version

rust-components:
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy

test-deps: setup $(AXE) $(SCHEMATHESIS) $(PEER_TRACKERS)
	@scripts/need $(CHROMIUM) chromium
	@scripts/need $(CHROMEDRIVER) chromium-driver
	@scripts/need promtool prometheus
	@scripts/need /usr/bin/time time
	@scripts/need /usr/lib/python3/dist-packages/aiosmtpd python3-aiosmtpd

# Debian's python3 has `venv` only with python3-venv (its ensurepip).
$(SCHEMATHESIS): tests/api/schemathesis-constraints.txt
	@scripts/need python3 python3
	@python3 -c 'import ensurepip' 2>/dev/null || scripts/need /usr/share/doc/python3-venv python3-venv
	rm -rf $(SCHEMATHESIS_VENV)
	python3 -m venv $(SCHEMATHESIS_VENV)
	$(SCHEMATHESIS_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  -c tests/api/schemathesis-constraints.txt schemathesis==$(SCHEMATHESIS_VERSION) \
	  || { rm -rf $(SCHEMATHESIS_VENV); exit 1; }
	@$(SCHEMATHESIS) --version

$(AXE):
	@scripts/need npm npm
	npm install --no-audit --no-fund --prefix $(CURDIR)/target/npm axe-core@$(AXE_VERSION)

$(PEER_TRACKERS):
	@scripts/need npm npm
	@scripts/need node nodejs
	npm install --no-audit --no-fund --prefix $(CURDIR)/target/npm \
	  @plausible-analytics/tracker@$(PLAUSIBLE_TRACKER_VERSION) @umami/node@$(UMAMI_NODE_VERSION)
	rm -f $(CURDIR)/target/npm/.peers-*
	touch $@

# The stamp names the version, so that bumping GEOIP_VERSION installs anew.
$(GEOIP): $(GEOIP_STAMP)
	@scripts/need npm npm
	npm install --no-audit --no-fund --prefix $(CURDIR)/target/npm @ip-location-db/geo-whois-asn-country-mmdb@$(GEOIP_VERSION)
	cp $(CURDIR)/target/npm/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb $@

$(GEOIP_STAMP):
	mkdir -p $(TOOLS)/geoip
	rm -f $(TOOLS)/geoip/.version-*
	touch $@

# First start: a demo site with 30 days of synthetic traffic, and (printed
# by serve) the first admin's one-time credentials.
run: setup
	cargo build --release
	./target/release/tickertape serve --demo-if-empty

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

# The crash tests spawn the release binary (TICKERTAPE_BIN), as deployed.
test: test-deps lint
	cargo build --release --bin tickertape
	TICKERTAPE_BIN=$(CURDIR)/target/release/tickertape cargo test --lib --bins --tests

# Longer checks than `make test`, one command each; each draws its own
# seed and prints it (the line it prints says how to replay it): the
# reference model with more traffic and ranges (REFERENCE_SEED=<n>
# replays one) and schemathesis.
test-long: test-deps
	cargo test --test api reference_model -- --ignored --nocapture
	cargo test --test api schemathesis_with_a_random_seed -- --ignored --nocapture

# Ingestion scenarios, storage table and report latency; results as
# markdown on stdout (see docs/benchmarks.md). BENCH_QUICK=1 for a short run.
bench: setup
	@scripts/need wrk wrk
	cargo build --release --bin tickertape
	cargo bench --bench load
	cargo bench --bench classify

bench-quick:
	BENCH_QUICK=1 $(MAKE) bench

# Only the big-site reports (issue 22): BENCH_BIG=PAGESxDAYS,... to choose.
bench-big:
	BENCH_BIG_ONLY=1 $(MAKE) bench

fmt:
	cargo fmt --all

# Removes the embedded database's files (all local data).
clean-data:
	rm -rf data
