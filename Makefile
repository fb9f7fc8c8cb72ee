# offset-ledger: `make demo` runs the reference scenario, `make test` the whole suite.
# Both set everything up first (Python venv, Maven jars); nothing is installed by hand.

# The first interpreter that actually runs (pyenv shims exist for versions that are not active).
PYTHON ?= $(shell for p in python3.11 python3.12 python3; do $$p -c 'import sys' >/dev/null 2>&1 && command -v $$p && break; done)
VENV   := .venv
BIN    := $(VENV)/bin
MVN    := mvn -q -B -s jvm/settings.xml
# Compiled modules go under .state/pycache, not beside the sources. Where the shell sets
# PYTHONDONTWRITEBYTECODE, each of the hundreds of processes the tests start (the CLI verbs, the
# xdist workers' collection) would compile the project's modules again.
unexport PYTHONDONTWRITEBYTECODE
export PYTHONPYCACHEPREFIX := $(CURDIR)/.state/pycache

.PHONY: setup setup-steps demo test check lint bench torture clean clusters-up clusters-down \
	system-packages jvm-archives

# The steps run side by side (-j): the Python packages, the Maven jars and Debian's packages are
# downloads from three places, and only the class-data archives need the first two. A fresh
# machine waits for the longest of them, not their sum.
setup:
	@$(MAKE) --no-print-directory -j3 setup-steps

setup-steps: $(VENV)/.installed jars/.fetched jvm-archives system-packages

# pip compiles the packages' modules beside them (as any install leaves them), not under the
# project's pycache prefix.
$(VENV)/.installed: pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	env -u PYTHONPYCACHEPREFIX $(BIN)/pip install -q --upgrade pip
	env -u PYTHONPYCACHEPREFIX $(BIN)/pip install -q -e '.[local,audit,validate,dev]'
	touch $@

jars/.fetched: jvm/spark/pom.xml jvm/spark-kafka/pom.xml jvm/kafka/pom.xml jvm/mm2/pom.xml \
		jvm/settings.xml
	$(MVN) -f jvm/spark/pom.xml dependency:copy-dependencies
	$(MVN) -f jvm/spark-kafka/pom.xml dependency:copy-dependencies
	$(MVN) -f jvm/kafka/pom.xml dependency:copy-dependencies
	$(MVN) -f jvm/mm2/pom.xml dependency:copy-dependencies
	touch $@

# Class-data archives of the Spark driver's and the brokers' JVMs (jars/cds): every JVM the
# project launches starts a third faster. Made once per JDK and jars (a few minutes), then a
# no-op; an archive that no longer matches is never used (pipelines/jvm_archive.py).
jvm-archives: $(VENV)/.installed jars/.fetched
	$(BIN)/python -m pipelines.devtools.jvm_archives

# Debian's packages the tests use, in one apt run (apt holds one lock; root or sudo):
# * chromium: headless Chromium renders the audit report;
# * prometheus, promtool and the Pushgateway for the metrics tests. Tests start their own servers
#   on loopback ports: the Debian services are stopped and disabled so that nothing is left
#   listening on 9090/9091.
# When a command is missing, all three are asked for: apt leaves the installed ones as they are.
SYSTEM_PACKAGES := chromium prometheus prometheus-pushgateway
SYSTEM_COMMANDS := chromium prometheus promtool prometheus-pushgateway

system-packages:
	@missing=; for c in $(SYSTEM_COMMANDS); do command -v $$c >/dev/null 2>&1 || missing=1; done; \
	[ -z "$$missing" ] || { S=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  echo "installing Debian packages: $(SYSTEM_PACKAGES)"; \
	  $$S apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$S apt-get install -y -qq \
	  --no-install-recommends $(SYSTEM_PACKAGES) >/dev/null || exit 1; \
	  for s in prometheus prometheus-pushgateway; do \
	    $$S systemctl disable --now $$s >/dev/null 2>&1 || $$S service $$s stop >/dev/null 2>&1 || true; \
	  done; }

demo: setup
	$(BIN)/offset-ledger demo

# Three test processes by file: most tests wait on brokers and JVMs. Two are Spark lanes, each
# with its own SparkSession; the third takes only the files that never use it (tests/lanes.py:
# no third session driver to warm up). Each process has its own clusters and state folder. The
# longest files go first (committed durations: tests/durations.json, tests/timing.py), in that
# order (--no-loadscope-reorder). Each run leaves its per-test durations in $(JUNIT):
# `$(BIN)/python -m tests.timing $(JUNIT)` refreshes the committed table from it.
TEST_WORKERS ?= 3
JUNIT ?= .state/test-results.xml

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		--junitxml=$(JUNIT)

# The fast inner loop: unit tests and the ones needing only Spark or the one shared broker pair
# (no end-to-end scenarios, dbt, GX, wheels, Prometheus, secured clusters or soaks). Every test
# carries its tier's marker (tests/conftest.py refuses one that does not).
CHECK_TIERS ?= not (e2e or dbt or gx or deploy or prometheus or secured or slow)

check: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder \
		-m "$(CHECK_TIERS)" -q

lint: setup
	$(BIN)/ruff check .

bench: setup
	$(BIN)/python -m bench.replication

# The disaster-recovery torture soak (docs/reliability.md): histories under faults, checked.
torture: setup
	$(BIN)/python -m bench.torture --minutes 30

clusters-up: setup
	$(BIN)/offset-ledger clusters up

clusters-down:
	-$(BIN)/offset-ledger clusters down

clean: clusters-down
	rm -rf .state jars jvm/*/target dbt/target dbt/logs spark-warehouse metastore_db derby.log
