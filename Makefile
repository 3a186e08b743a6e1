# The two commands of the README: `make demo` and `make test`. Both set the environment up first.
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE ?= data/checkpoint-tolerable-failure-threshold/storage-permission-denied

.PHONY: setup demo test test-fast lint regen site bench clean

setup:
	@./scripts/setup.sh

demo: setup
	$(BIN)/flink-runbooks diagnose $(EXAMPLE) ; test $$? -le 1

# Two workers (one SparkSession each); a module whose fixtures are built once keeps its tests on one worker.
PARALLEL := -n 2 --dist loadgroup

# The live tier runs real Flink clusters of these releases (installed under build/flink on first use).
LIVE_FLINK := 1.20.3 2.3.0

test: setup
	./scripts/setup-flink.sh $(LIVE_FLINK)
	$(BIN)/python -m pytest -q $(PARALLEL)

test-fast: setup
	$(BIN)/python -m pytest -q $(PARALLEL) -m "not notebook and not cluster and not live and not slow and not sweep"

# Errors, not style (the rules are in pyproject.toml); CI runs it before the tests.
lint: setup
	$(BIN)/ruff check lib tests

# Every generated file from its source: the README's runbook table, the decision table, the golden pins and the
# accuracy table (tests fail when a committed one is stale).
regen: setup
	$(BIN)/python -m flink_runbooks.catalogue --write
	$(BIN)/python -m flink_runbooks.render.decision_table --write
	PYTHONPATH=tests $(BIN)/python tests/incidents/test_golden.py --update
	PYTHONPATH=tests $(BIN)/python tests/incidents/test_accuracy.py

# Generated bundles of 100 MB, 1 GB and 10 GB in two shapes, healthy and crash-looping (cached in build/bench);
# figures to build/bench/results.md. SIZES=100MB,1GB and SHAPES=crashloop narrow it.
bench: setup
	$(BIN)/python -m flink_runbooks.apps.bench $(if $(SIZES),--sizes $(SIZES)) $(if $(SHAPES),--shapes $(SHAPES)) --with-tests --readme

site: setup
	$(BIN)/flink-runbooks site --out build/site

clean:
	rm -rf build/*
