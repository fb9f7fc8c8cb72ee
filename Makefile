# offset-ledger: `make demo` runs the reference scenario, `make test` the whole suite.
# Both set everything up first (Python venv, Maven jars); nothing is installed by hand.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
MVN    := mvn -q -B -s jvm/settings.xml
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: setup demo test lint bench clean clusters-up clusters-down

setup: $(VENV)/.installed jars/.fetched

$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $@

jars/.fetched: jvm/spark/pom.xml jvm/kafka/pom.xml jvm/settings.xml
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies
	$(MVN) -f jvm/kafka/pom.xml dependency:copy-dependencies
	touch $@

demo: setup
	$(BIN)/offset-ledger demo

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python -m bench.replication

clusters-up: setup
	$(BIN)/offset-ledger clusters up

clusters-down:
	-$(BIN)/offset-ledger clusters down

clean: clusters-down
	rm -rf .state jars jvm/*/target dbt/target dbt/logs spark-warehouse metastore_db derby.log
