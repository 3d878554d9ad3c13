# The two commands a fresh clone needs:
#   make serve   - install groupcoord into .venv and start it on localhost:9092 with ./groupcoord-data
#   make test    - install everything the tests need (Python packages, stock Kafka clients) and run them all
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: serve test install bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP)

serve: $(STAMP)
	$(VENV)/bin/groupcoord serve $(ARGS)

test: $(STAMP)
	bash tests/clients/setup_clients.sh
	$(PY) -m pytest $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
