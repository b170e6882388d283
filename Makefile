# Two commands set everything up on a fresh machine:
#   make run    build and serve on an embedded local database
#   make test   formatting, lints and every test
# Both install what they need (cmake, the local database server, and for
# tests Debian's chromium) into the system or the ignored .tools directory.

SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools
SECANTUS_VERSION := 0.5.3-beta.196
SECANTUS := $(TOOLS)/bin/secantusd-rs
CHROMIUM ?= /usr/bin/chromium
CHROMEDRIVER ?= /usr/bin/chromedriver

export TICKERTAPE_LOCALDB_BIN ?= $(SECANTUS)

.PHONY: setup rust-components test-deps run test lint fmt clean-data bench bench-quick

setup: $(SECANTUS) rust-components

$(SECANTUS):
	@scripts/need cmake cmake
	@echo "installing secantusd-rs $(SECANTUS_VERSION) into .tools (about 6 minutes, once)"
	cargo install secantus-mdb --version $(SECANTUS_VERSION) --locked --ignore-rust-version --root $(TOOLS)
	@$(SECANTUS) --version

rust-components:
	@cargo fmt --version >/dev/null 2>&1 || rustup component add rustfmt
	@cargo clippy --version >/dev/null 2>&1 || rustup component add clippy

test-deps: setup
	@scripts/need $(CHROMIUM) chromium
	@scripts/need $(CHROMEDRIVER) chromium-driver

# First start: a demo site with 30 days of synthetic traffic, and (printed
# by serve) the first admin's one-time credentials.
run: setup
	cargo build --release
	./target/release/tickertape demo --if-empty
	./target/release/tickertape serve

lint:
	cargo fmt --all -- --check
	cargo clippy --all-targets -- -D warnings

# The crash tests spawn the release binary (TICKERTAPE_BIN), as deployed.
test: test-deps lint
	cargo build --release --bin tickertape
	TICKERTAPE_BIN=$(CURDIR)/target/release/tickertape cargo test --lib --bins --tests

# Ingestion scenarios, storage table and report latency; results as
# markdown on stdout (see docs/benchmarks.md). BENCH_QUICK=1 for a short run.
bench: setup
	@scripts/need wrk wrk
	cargo build --release --bin tickertape
	cargo bench --bench load

bench-quick:
	BENCH_QUICK=1 $(MAKE) bench

fmt:
	cargo fmt --all

# Removes the embedded database's files (all local data).
clean-data:
	rm -rf data
