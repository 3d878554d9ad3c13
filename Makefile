# The two commands a fresh clone needs:
#   make serve   - install groupcoord (its own dependencies only) into .venv and start it on
#                  localhost:9092 with ./groupcoord-data
#   make test    - install everything the tests need (Python packages with the test extras,
#                  stock Kafka clients) and run them all
#
# Two installs, two stamps. Serving needs only pyproject's `dependencies`; the test extras
# (pyspark, pyarrow, pandas, the stock clients...) are most of a ~1 GB .venv and most of the
# install time, so `make serve` does not wait for them. Each stamp is named after pyproject.toml's
# checksum, so editing it reinstalls. The full install includes the serving one: once it is done,
# `make serve` installs nothing (it never runs a narrower pip install over it), while a `make test`
# after `make serve` still installs the extras.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
PYPROJECT_SUM := $(shell cksum < pyproject.toml | cut -d' ' -f1)
# The full install keeps the stamp name it always had, so an existing .venv counts as complete.
TEST_STAMP := $(VENV)/.installed-$(PYPROJECT_SUM)
SERVE_STAMP := $(VENV)/.installed-serve-$(PYPROJECT_SUM)

.PHONY: serve test install install-serve install-test bench clean

$(SERVE_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	test -f $(TEST_STAMP) || $(PIP) -e .
	rm -f $(VENV)/.installed-serve-* && touch $@

$(TEST_STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

install-serve: $(SERVE_STAMP)

install-test: $(TEST_STAMP)

# Everything, as `install` always meant.
install: install-test

serve: $(SERVE_STAMP)
	$(VENV)/bin/groupcoord serve $(ARGS)

# pytest-xdist runs whole test files (`--dist loadfile`: a module's shared server, ZooKeeper or Spark
# session starts once) in PYTEST_WORKERS processes; the suite mostly waits on clients, JVMs and
# timers, so more workers than cores pay off. `make test PYTEST_WORKERS=0` runs it serially.
PYTEST_WORKERS ?= 3

test: $(TEST_STAMP)
	bash tests/clients/setup_clients.sh
	bash tests/coordinator/cluster/setup_zookeeper.sh
	bash tests/browser/setup_browser.sh
	bash tests/coordinator/ops/setup_prometheus.sh
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
