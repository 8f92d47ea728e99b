# rc1 — every target creates .venv on first use, so `make run` / `make test` work on a fresh machine.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RC1    := $(BIN)/rc1
CONFIG ?= configs/local.yaml
# pytest workers: one per core, at most 4 (each holds a torch of its own; tests use one torch thread each)
TEST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print(min(4, os.cpu_count() or 1))')

.PHONY: setup run test preflight train resume stop status failpack console sync bench-data bench-grpo clean-venv

setup: $(VENV)/.rc1-installed

$(VENV)/.rc1-installed: pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "rc1 needs Python >= 3.11"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel setuptools
	# torch first and pinned: the CPU build of this release; an unpinned torch pulls a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet "torch==2.13.0"
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

run: setup
	$(RC1) pipeline --config $(CONFIG)

# pytest exit 5 means no test ran: that is a failure, not a pass.
test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist worksteal --durations=15; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests were collected" >&2; exit 1; fi; exit $$rc

preflight: setup
	$(RC1) advance --to round2 --config $(CONFIG)

train: setup
	$(RC1) train --config $(CONFIG)

resume: setup
	$(RC1) resume --config $(CONFIG)

stop: setup
	$(RC1) stop

status: setup
	$(RC1) status

failpack: setup
	$(RC1) failpack

console: setup
	$(RC1) console --config $(CONFIG)

sync: setup
	$(RC1) sync export

bench-data: setup
	$(RC1) bench data

bench-grpo: setup
	$(RC1) bench grpo

clean-venv:
	rm -rf $(VENV)
