# Atrium — `make run` builds and runs the app; `make test` runs every test.
# Both install what they need on a fresh Debian machine (apt packages when run
# as root, npm packages with `npm ci`, Go modules) and otherwise print the
# exact command to run.

SHELL        := /bin/bash
.SHELLFLAGS  := -eu -o pipefail -c
GO           ?= go
BIN          := bin/atrium
DESKTOP_TAGS := desktop,production,webkit2_41
VERSION      := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS      := -X main.version=$(VERSION)
CHROMIUM     ?= /usr/bin/chromium

# Debian packages, in three sets so that each target installs only what it needs
# (issue 24: `make run` installed the packaging tools):
# APT_RUN      building and running the app: cgo toolchain + SQLite headers
#              (sqlite-vec), the Wails window (GTK, WebKitGTK 4.1), CJK and emoji
#              fonts so notes render, bubblewrap for the agents' exec sandbox (SPEC §6);
# APT_TEST     the tests, benchmarks and screenshots: headless Chromium, Xvfb, xdotool
#              and ImageMagick for window screenshots, iproute2 and util-linux
#              (network namespaces), zbar-tools (QR codes), ffmpeg (node captures,
#              Talk's audio), espeak-ng (Talk's English and Chinese speech);
# APT_PACKAGE  the packages: mingw-w64 (Windows .exe and `go vet` for Windows),
#              NSIS and 7-Zip (the installer and its check), ImageMagick (icons).
# `make test` installs all three (it runs vet-cross and the package checks' tests).
APT_RUN     := build-essential pkg-config libsqlite3-dev libgtk-3-dev libwebkit2gtk-4.1-dev \
               fonts-wqy-microhei fonts-noto-color-emoji bubblewrap
APT_TEST    := chromium xvfb xauth x11-utils xdotool imagemagick iproute2 util-linux zbar-tools ffmpeg espeak-ng
APT_PACKAGE := gcc-mingw-w64-x86-64 nsis p7zip-full imagemagick

FRONTEND_SRC := $(shell find frontend/src frontend/index.html frontend/pair frontend/package.json frontend/vite.config.ts -type f 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help run serve desktop package package-test vet-cross screenshots test test-go test-frontend bench bench-retrieval fuzz soak screenshot deps deps-test deps-package deps-system deps-system-test deps-system-package deps-go deps-frontend deps-conformance frontend clean

help: ## Show this help
	@echo "Atrium make targets:"
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-12s %s\n", $$1, $$2}'

run: desktop ## Build and run the app (window if there is a display, else the UI at http://127.0.0.1:18789); ARGS="--bind lan" passes flags
	./$(BIN) $(ARGS)

serve: desktop ## Build and run the gateway + UI without a window; ARGS passes flags
	./$(BIN) serve $(ARGS)

desktop: deps frontend ## Build the desktop binary (Wails window + CLI) into bin/atrium
	$(GO) build -tags $(DESKTOP_TAGS) -ldflags "$(LDFLAGS)" -o $(BIN) .

test: deps-test frontend test-frontend test-go ## Run all tests (Go unit, integration, end-to-end in headless Chromium; frontend unit)

test-go:
	$(GO) vet ./...
	$(GO) vet -tags $(DESKTOP_TAGS) . ./app/...
	bash build/vet-cross.sh
	ATRIUM_CHROMIUM=$(CHROMIUM) $(GO) test -count=1 -timeout 30m ./...

test-frontend: deps-frontend
	cd frontend && npm run check && npm test

bench: deps-test frontend ## Run the Go benchmarks and the retrieval harness (results go in docs/BENCHMARKS.md)
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 60m ./backend/...
	$(MAKE) --no-print-directory bench-retrieval

# The retrieval quality harness (`atrium bench retrieval`) on every set found
# under $(CORPORA)/bench, then the judged questions people asked about the
# OpenClaw workspaces in $(CORPORA)/workspaces (issue 25): the table of each
# set on the terminal, its JSON in out/bench/<name>.json. Without the
# corpora it prints a skip line.
CORPORA   ?= $(or $(ATRIUM_CORPORA),../shared/corpora)
BENCH_BIN := bin/atrium-bench

bench-retrieval: deps-system deps-go ## Run the retrieval harness on every set under ../shared/corpora/bench (out/bench/*.json)
	@d="$(CORPORA)/bench"; \
	if [ ! -d "$$d" ]; then echo "bench retrieval: SKIPPED, no corpora at $$d (set CORPORA or ATRIUM_CORPORA)"; exit 0; fi; \
	$(GO) build -o $(BENCH_BIN) .; mkdir -p out/bench; \
	run() { name=$$1; dir=$$2; shift 2; \
	  if [ ! -d "$$dir" ]; then echo "== $$name: SKIPPED, $$dir not found"; echo; return 0; fi; \
	  echo "== $$name"; start=$$(date +%s); \
	  ./$(BENCH_BIN) bench retrieval --set "$$dir" --out "out/bench/$$name.json" "$$@"; \
	  echo "($$name: $$(( $$(date +%s) - start )) s, out/bench/$$name.json)"; echo; }; \
	run locomo-turn               "$$d/locomo"; \
	run locomo-session            "$$d/locomo" --qrels qrels_session.tsv; \
	run locomo-audited            "$$d/locomo" --qrels qrels_audited.tsv; \
	run locomo-workspaces         "$$d/locomo/workspaces"; \
	run locomo-workspaces-session "$$d/locomo/workspaces" --qrels qrels_session.tsv; \
	run locomo-workspaces-audited "$$d/locomo/workspaces" --qrels qrels_audited.tsv; \
	run longmemeval               "$$d/longmemeval"; \
	run cmrc2018                  "$$d/cmrc2018"; \
	run drcd                      "$$d/drcd"; \
	run openclaw-judged           backend/bench/retrieval/testdata/openclaw-judged --workspaces "$(CORPORA)/workspaces"

# Every Go fuzz target for FUZZTIME each (default 10m), one after another,
# with -parallel FUZZPARALLEL (default 1); FUZZ=regexp picks targets. Fails
# if a target finds a failing input (go test writes it to the package's
# testdata/fuzz/FuzzX/; keep it there as a regression seed once fixed).
# docs/FUZZING.md lists the targets and the last run's figures.
FUZZTIME     ?= 10m
FUZZPARALLEL ?= 1
FUZZ         ?= .

fuzz: deps-system deps-go ## Run every Go fuzz target for FUZZTIME each (default 10m; FUZZ=regexp picks some); fails on a crasher
	FUZZTIME=$(FUZZTIME) FUZZPARALLEL=$(FUZZPARALLEL) FUZZ='$(FUZZ)' GO=$(GO) bash build/fuzz.sh

# The soak (issue 26): a real `atrium serve` with phones, nodes, chat,
# writes, MCP clients and disk edits for SOAK_DURATION; figures in
# docs/BENCHMARKS.md ("Soak"). Its 90-second run is TestBenchSoak in make test.
SOAK_DURATION ?= 30m

soak: deps-system deps-go frontend ## Run the 30-minute soak (SOAK_DURATION=…): RSS, goroutines, descriptors flat; no write lost (out/soak/)
	$(GO) build -o $(BENCH_BIN) .
	rm -rf out/soak/work && mkdir -p out/soak
	./$(BENCH_BIN) bench soak --duration $(SOAK_DURATION) --dir out/soak/work --json > out/soak/report.json
	@echo "report: out/soak/report.json"

vet-cross: deps-system-package deps-go ## go vet for Windows (cgo with mingw) and macOS (the packages without cgo)
	bash build/vet-cross.sh

package: deps-package frontend ## Build the packages into out/package: .deb, portable .tar.gz, Windows .exe (with mingw)
	bash build/package.sh $(VERSION)

package-test: package ## Build the packages and check them (install the .deb in a scratch root, run it; the .exe statically)
	bash build/package-test.sh $(VERSION)

screenshot: deps-system-test desktop ## Screenshot the desktop window under Xvfb with a Chinese note found by search (out/window.png)
	bash build/screenshot.sh $(BIN) out/window.png

screenshots: deps-system-test desktop ## Screenshot the window under Xvfb (first start, Settings) and every screen of the UI (Talk, Collaborations, Canvas, a drop, the edit conflict, a paired phone's /pair page …) in headless Chromium at 1440x900 and 390x844, en and zh (screenshots/*.png, index.html)
	bash build/screenshots.sh $(BIN) screenshots
	ATRIUM_SCREENSHOTS=$(CURDIR)/screenshots $(GO) test -count=1 -timeout 30m -run '^TestScreenshots$$' ./backend/e2e/

deps: deps-system deps-go deps-frontend
deps-test: deps-system-test deps-go deps-frontend deps-conformance
deps-package: deps-system-package deps-go deps-frontend

deps-go:
	@command -v $(GO) >/dev/null || { echo "Go is missing: install Go 1.26 (https://go.dev/dl/) and put it on PATH"; exit 1; }
	@v=$$($(GO) env GOVERSION | sed 's/^go//'); major=$${v%%.*}; rest=$${v#*.}; minor=$${rest%%.*}; \
	  if [ "$$major" -lt 1 ] || { [ "$$major" = 1 ] && [ "$$minor" -lt 26 ]; }; then \
	    echo "Go $$v is too old: Atrium needs Go 1.26 or newer (https://go.dev/dl/)"; exit 1; fi
	$(GO) mod download

# apt_install installs the Debian packages $(1) that are missing (as root, or
# through sudo without a password), else prints the command and fails.
define apt_install
@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then sudo=""; \
	  elif command -v apt-get >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo"; \
	  else sudo="none"; fi; \
	  if [ "$$sudo" != none ]; then \
	    echo "Installing Debian packages:$$missing"; \
	    $$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	  else \
	    echo "Missing system packages:$$missing"; \
	    echo "Install them with:  sudo apt-get install -y --no-install-recommends$$missing"; \
	    exit 1; \
	  fi; \
	fi
endef

deps-system:
	$(call apt_install,$(APT_RUN))

deps-system-test:
	$(call apt_install,$(sort $(APT_RUN) $(APT_TEST) $(APT_PACKAGE)))

deps-system-package:
	$(call apt_install,$(sort $(APT_RUN) $(APT_PACKAGE)))

deps-frontend: frontend/node_modules/.package-lock.json

frontend/node_modules/.package-lock.json: frontend/package.json frontend/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 or newer with npm (https://nodejs.org/)"; exit 1; }
	@v=$$(node -p 'process.versions.node.split(".")[0]'); [ "$$v" -ge 20 ] || { echo "Node.js $$v is too old: the UI build needs Node.js 20 or newer"; exit 1; }
	cd frontend && npm ci --no-audit --no-fund
	touch $@

# The MCP conformance suite and the Node 22 it needs, pinned in their own
# package (the UI stays on Node 20): backend/cli TestMCPConformance.
deps-conformance: tests/mcp-conformance/node_modules/.package-lock.json

tests/mcp-conformance/node_modules/.package-lock.json: tests/mcp-conformance/package.json tests/mcp-conformance/package-lock.json
	@command -v npm >/dev/null || { echo "npm is missing: install Node.js 20 or newer with npm (https://nodejs.org/)"; exit 1; }
	cd tests/mcp-conformance && npm ci --no-audit --no-fund
	touch $@

frontend: frontend/dist/index.html ## Build the UI (frontend/dist)

frontend/dist/index.html: frontend/node_modules/.package-lock.json $(FRONTEND_SRC)
	cd frontend && npm run build

clean: ## Remove build output
	rm -rf bin out frontend/dist/assets frontend/dist/index.html frontend/dist/pair
