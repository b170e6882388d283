# Two commands set everything up on a fresh machine:
#   make run         build and serve on an embedded local database
#   make test        formatting, lints and every test
#   make test-fast   the same without the browser, crash, explorer,
#                    schemathesis and reference-model tiers (docs/testing.md)
# Both install what they need (cmake, the local database server, and for
# tests Debian's chromium, prometheus, time and python3-aiosmtpd (the email
# tests' SMTP server), and the schemathesis fuzzer; the
# country database from npm). What takes long to build or fetch is kept once
# per machine, by version, in the user's cache (TICKERTAPE_CACHE) and linked
# or copied into the clone's ignored .tools directory, so a new clone (or a CI
# run with a kept cache) does not build the database server again.

SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools
TICKERTAPE_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/tickertape
CACHE := $(TICKERTAPE_CACHE)
SECANTUS_VERSION := 0.5.3-beta.196
# Built once per machine (about 6 to 10 minutes); .tools/bin links to it so
# that the app, the tests and the benches find it without the Makefile.
SECANTUS_CACHED := $(CACHE)/secantusd-rs-$(SECANTUS_VERSION)/bin/secantusd-rs
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
# Fetched once per machine into the cache, copied into .tools/geoip (where
# the app looks, and what a deployment copies).
GEOIP_VERSION := 2.3.2026061719
GEOIP_CACHED := $(CACHE)/geoip-$(GEOIP_VERSION)/geo-whois-asn-country.mmdb
GEOIP := $(TOOLS)/geoip/geo-whois-asn-country.mmdb
# The API fuzzer (PyPI) in a virtual environment of its own; its
# dependencies are pinned too (tests/api/schemathesis-constraints.txt), so a
# seed generates the same cases everywhere. Built once per machine for each
# version and set of pins (a venv cannot move, so it stays in the cache and
# .tools links to it).
SCHEMATHESIS_VERSION := 4.32.5
SCHEMATHESIS_PINS := $(shell sha256sum tests/api/schemathesis-constraints.txt | cut -c1-12)
SCHEMATHESIS_VENV := $(CACHE)/schemathesis-$(SCHEMATHESIS_VERSION)-$(SCHEMATHESIS_PINS)
SCHEMATHESIS := $(SCHEMATHESIS_VENV)/bin/schemathesis
SCHEMATHESIS_READY := $(SCHEMATHESIS_VENV)/.complete
SCHEMATHESIS_LINK := $(TOOLS)/schemathesis-$(SCHEMATHESIS_VERSION)

export TICKERTAPE_LOCALDB_BIN ?= $(SECANTUS)
export TICKERTAPE_SCHEMATHESIS ?= $(SCHEMATHESIS)

# The API tests of these modules are the slow tiers `test-fast` leaves out.
SLOW_API_TIERS := browser browser_sharing crash explorer schemathesis reference_model

.PHONY: setup rust-components test-deps run test test-fast test-long lint fmt clean-data bench bench-quick bench-big screenshots

setup: $(SECANTUS) rust-components $(GEOIP)

# Installed under a temporary root and moved into place, so that a build
# that stops half-way (or a second make at the same time) leaves no
# half-installed server behind. A clone that installed this version into
# .tools itself (before the cache) gives its copy instead of a new build.
SECANTUS_PARTIAL := $(CACHE)/secantusd-rs-$(SECANTUS_VERSION).partial
$(SECANTUS_CACHED):
	rm -rf $(SECANTUS_PARTIAL)
	@if [ -f $(SECANTUS) ] && [ ! -L $(SECANTUS) ] && \
	    [ "$$($(SECANTUS) --version 2>/dev/null | head -n 1)" = "secantusd-rs $(SECANTUS_VERSION)" ]; then \
	  echo "keeping .tools/bin/secantusd-rs $(SECANTUS_VERSION) in $(CACHE)"; \
	  mkdir -p $(SECANTUS_PARTIAL)/bin && cp $(SECANTUS) $(SECANTUS_PARTIAL)/bin/; \
	else \
	  scripts/need cmake cmake && \
	  echo "building secantusd-rs $(SECANTUS_VERSION) into $(CACHE) (6 to 10 minutes, once per machine)" && \
	  cargo install secantus-mdb --version $(SECANTUS_VERSION) --locked --ignore-rust-version \
	    --root $(SECANTUS_PARTIAL); \
	fi
	rm -rf $(CACHE)/secantusd-rs-$(SECANTUS_VERSION)
	mv $(SECANTUS_PARTIAL) $(CACHE)/secantusd-rs-$(SECANTUS_VERSION)
	@$@ --version

$(SECANTUS): $(SECANTUS_CACHED)
	mkdir -p $(@D)
	ln -sfn $(SECANTUS_CACHED) $@

rust-components:
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy

test-deps: setup $(AXE) $(SCHEMATHESIS_LINK) $(PEER_TRACKERS)
	@scripts/need $(CHROMIUM) chromium
	@scripts/need $(CHROMEDRIVER) chromium-driver
	@scripts/need promtool prometheus
	@scripts/need /usr/bin/time time
	@scripts/need /usr/lib/python3/dist-packages/aiosmtpd python3-aiosmtpd
	@scripts/need openssl openssl

# Debian's python3 has `venv` only with python3-venv (its ensurepip).
# The venv is complete once its stamp is written (last).
$(SCHEMATHESIS_READY):
	@scripts/need python3 python3
	@python3 -c 'import ensurepip' 2>/dev/null || scripts/need /usr/share/doc/python3-venv python3-venv
	rm -rf $(SCHEMATHESIS_VENV)
	python3 -m venv $(SCHEMATHESIS_VENV)
	$(SCHEMATHESIS_VENV)/bin/pip install --quiet --disable-pip-version-check \
	  -c tests/api/schemathesis-constraints.txt schemathesis==$(SCHEMATHESIS_VERSION) \
	  || { rm -rf $(SCHEMATHESIS_VENV); exit 1; }
	@$(SCHEMATHESIS) --version
	touch $@

# Where the tests look when TICKERTAPE_SCHEMATHESIS is not set (a plain
# `cargo test`). Phony-free: relinked when the pins change.
$(SCHEMATHESIS_LINK): $(SCHEMATHESIS_READY)
	mkdir -p $(TOOLS)
	rm -rf $@
	ln -sfn $(SCHEMATHESIS_VENV) $@

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

# The cached file's path names the version, so bumping GEOIP_VERSION fetches
# anew and the newer file is copied over the clone's.
$(GEOIP_CACHED):
	@scripts/need npm npm
	npm install --no-audit --no-fund --prefix $(@D)/npm @ip-location-db/geo-whois-asn-country-mmdb@$(GEOIP_VERSION)
	cp $(@D)/npm/node_modules/@ip-location-db/geo-whois-asn-country-mmdb/geo-whois-asn-country.mmdb $@.partial
	mv $@.partial $@

$(GEOIP): $(GEOIP_CACHED)
	mkdir -p $(@D)
	cp $(GEOIP_CACHED) $@

# First start: a demo site with 30 days of synthetic traffic, and (printed
# by serve) the first admin's one-time credentials.
run: setup
	cargo build --release
	./target/release/tickertape serve --demo-if-empty

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

# The crash tests and the explorer spawn the release binary
# (TICKERTAPE_BIN), as deployed.
test: test-deps lint
	cargo build --release --bin tickertape
	TICKERTAPE_BIN=$(CURDIR)/target/release/tickertape cargo test --lib --bins --tests

# Lints, unit tests, the layer rules and the API tests without the slow
# tiers (no release build, no browser).
test-fast: test-deps lint
	cargo test --lib --bins --test layers
	cargo test --test api -- $(foreach tier,$(SLOW_API_TIERS),--skip $(tier)::)

# The README's screenshots of the demo in docs/images/ (dashboard, filtered, funnel),
# taken by the browser test that renders a populated site.
screenshots: test-deps
	TICKERTAPE_UPDATE_SCREENSHOTS=1 cargo test --test api browser::an_owner_logs_in_and_reads_the_reports_in_a_real_browser -- --exact

# Longer checks than `make test`, one command each; each draws its own
# seed and prints it (the line it prints says how to replay it): the
# reference model with more traffic and ranges (REFERENCE_SEED=<n>
# replays one), schemathesis, and the fault-schedule explorer on the
# release binary (EXPLORER_SEED=<n> replays one).
test-long: test-deps
	cargo test --test api reference_model -- --ignored --nocapture
	cargo test --test api schemathesis_with_a_random_seed -- --ignored --nocapture
	cargo build --release --bin tickertape
	TICKERTAPE_BIN=$(CURDIR)/target/release/tickertape cargo test --test api explorer::random_seeds -- --ignored --nocapture

# Ingestion scenarios, storage table and report latency; results as
# markdown on stdout (see docs/benchmarks.md). BENCH_QUICK=1 for a short run.
bench: setup
	@scripts/need wrk wrk
	cargo build --release --bin tickertape
	cargo bench --bench load
	cargo bench --bench classify

bench-quick:
	BENCH_QUICK=1 $(MAKE) bench

# Only the big-site reports: BENCH_BIG=PAGESxDAYS,... to choose.
bench-big:
	BENCH_BIG_ONLY=1 $(MAKE) bench

fmt:
	cargo fmt --all

# Removes the embedded database's files (all local data).
clean-data:
	rm -rf data
