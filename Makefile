# Each target bootstraps its own .venv; running it twice does nothing new the second time.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Test workers (pytest-xdist): the end-to-end tests wait on processes and sockets far more than
# they compute (a run keeps 2 cores less than half busy at 4), so 6 share 2 cores well; JOBS=0 runs
# them in this process, one after another.
JOBS   ?= 6
# The Node.js client's dependencies (tests/e2e/test_node_client.py); `npm ci` installs the lock file.
NODE_STAMP := clients/node/node_modules/.installed
# roost web's browser libraries (xterm.js): `npm ci` in web/, the dist files copied into the
# package (roost/web/static/vendor, not in git); the page never loads anything from a CDN.
WEB_VENDOR := roost/web/static/vendor
WEB_STAMP  := $(WEB_VENDOR)/.installed

# `make install`: `roost` on PATH as a symlink to .venv/bin/roost in $(PREFIX)/bin (so an update of
# the checkout is what runs); `make uninstall` removes the link.
PREFIX ?= $(HOME)/.local
CHECK_NPM = command -v npm >/dev/null 2>&1 || { \
	echo "make: npm (Node.js) is needed for the Node.js client's tests (tests/e2e/test_node_client.py)" >&2; \
	echo "      and for roost web's xterm.js (web/package.json)." >&2; \
	echo "      Install Node.js 18 or newer with npm (Debian/Ubuntu: sudo apt install nodejs npm;" >&2; \
	echo "      or https://nodejs.org), then run make test again." >&2; exit 1; }

.PHONY: demo test lint typecheck unit e2e test-real bench soak clean install uninstall check-npm web

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m compileall -q roost  # an editable install writes no bytecode of its own
	touch $(STAMP)

$(NODE_STAMP): clients/node/package.json clients/node/package-lock.json
	@$(CHECK_NPM)
	npm ci --prefix clients/node --no-audit --no-fund
	touch $(NODE_STAMP)

$(WEB_STAMP): web/package.json web/package-lock.json
	@$(CHECK_NPM)
	npm ci --prefix web --no-audit --no-fund
	mkdir -p $(WEB_VENDOR)
	cp web/node_modules/@xterm/xterm/lib/xterm.js web/node_modules/@xterm/xterm/css/xterm.css \
	   web/node_modules/@xterm/addon-fit/lib/addon-fit.js $(WEB_VENDOR)/
	touch $(WEB_STAMP)

# roost web's vendored browser files (also part of `make test`, `make e2e` and `make install`)
web: $(WEB_STAMP)

demo: $(STAMP)
	$(BIN)/python -m roost.demo

check-npm:
	@$(CHECK_NPM)

install: $(STAMP) $(WEB_STAMP)
	mkdir -p $(PREFIX)/bin
	ln -sfn $(abspath $(BIN))/roost $(PREFIX)/bin/roost
	@echo "installed: $(PREFIX)/bin/roost -> $(abspath $(BIN))/roost"
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) ;; *) \
	echo "note: $(PREFIX)/bin is not on your PATH; add it, e.g. in ~/.profile:"; \
	echo '      export PATH="$(PREFIX)/bin:$$PATH"' ;; esac

uninstall:
	@if [ -L $(PREFIX)/bin/roost ]; then rm $(PREFIX)/bin/roost && echo "removed $(PREFIX)/bin/roost"; fi

lint: $(STAMP)
	$(BIN)/ruff check roost tests bench
	$(BIN)/ruff format --check roost tests bench
	$(BIN)/lint-imports --no-cache
	$(BIN)/vulture  # dead code; pyproject's [tool.vulture], vulture_whitelist.py

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck $(NODE_STAMP) $(WEB_STAMP)
	$(BIN)/pytest -q -n $(JOBS) --dist worksteal

unit: $(STAMP)
	$(BIN)/pytest -q tests/unit

e2e: $(STAMP) $(NODE_STAMP) $(WEB_STAMP)
	$(BIN)/pytest -q -n $(JOBS) tests/e2e

# The real claude/codex/kimi CLIs (pinned, installed into .tools/) against the loopback model
# stand-in; not part of `make test`. install.sh exits 3 when npm itself fails.
test-real: $(STAMP)
	bash tests/real/install.sh
	$(BIN)/pytest -q tests/real

# The performance figures against baselines measured in the same run (bench/README.md); prints one
# table, writes bench/last.json and keeps the table in bench/README.md. Within 16 minutes on two
# cores; never fails on a figure.
bench: $(STAMP)
	$(BIN)/python bench/run.py --full

# roost's exactly-once promise for MINUTES minutes of clients and faults against a node of its own
# (bench/README.md, "Soak"): one verdict line; exits 1 on any violation.
MINUTES ?= 5
soak: $(STAMP)
	$(BIN)/python bench/soak.py --minutes $(MINUTES)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache clients/node/node_modules web/node_modules $(WEB_VENDOR)
