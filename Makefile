# The two commands of the README: `make demo` and `make test`. Both set the environment up first.
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE ?= data/checkpoint-tolerable-failure-threshold/storage-permission-denied

.PHONY: setup demo test test-fast site clean

setup:
	@./scripts/setup.sh

demo: setup
	$(BIN)/flink-runbooks diagnose $(EXAMPLE) ; test $$? -le 1

test: setup
	$(BIN)/python -m pytest -q

test-fast: setup
	$(BIN)/python -m pytest -q -m "not notebook"

site: setup
	$(BIN)/flink-runbooks site --out build/site

clean:
	rm -rf build/*
