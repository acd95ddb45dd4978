# Cairn: set-up, demo, tests and benchmarks on Debian/Ubuntu with Swift 6.3 installed.
#
#   make demo    install the libraries if missing, build release, run `cairn demo`
#   make test    install the libraries if missing, run the test suite
#   make bench   also install the peer tools, build release, run the benchmark harness
#   make deps    only install the libraries (apt-get update runs only when one is missing)
#
# Variables: SCRATCH (SwiftPM scratch path, default .build), DEMO_ARGS (e.g. --size-mib 64),
# BENCH_ARGS (arguments for cairn-bench).

SHELL := /bin/bash
SWIFT ?= swift
SCRATCH ?= .build
DEMO_ARGS ?=
BENCH_ARGS ?=

# Build dependencies: the C libraries Cairn links and pkg-config to find them.
DEB_PACKAGES := zlib1g-dev liblz4-dev libzstd-dev libssl-dev pkg-config
# The tools the benchmark compares Cairn with.
PEER_PACKAGES := lz4 zstd casync borgbackup restic libarchive-tools hyperfine

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# $(call apt_install,packages): installs those of `packages` that are not installed yet.
define apt_install
	@missing=""; \
	for p in $(1); do \
	  dpkg-query -W -f='$${Status}' "$$p" 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update -q && \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing; \
	fi
endef

.PHONY: demo test bench deps bench-deps

deps:
	$(call apt_install,$(DEB_PACKAGES))

bench-deps: deps
	$(call apt_install,$(PEER_PACKAGES))

demo: deps
	$(SWIFT) build -c release --scratch-path $(SCRATCH) --product cairn
	$(SCRATCH)/release/cairn demo $(DEMO_ARGS)

test: deps
	$(SWIFT) test --scratch-path $(SCRATCH) --disable-xctest

bench: bench-deps
	$(SWIFT) build -c release --scratch-path $(SCRATCH) --product cairn-bench
	$(SCRATCH)/release/cairn-bench $(BENCH_ARGS)
