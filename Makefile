# Two entry points for a fresh machine with Python 3.13 (pyenv reads .python-version):
#   make train   - create .venv, install, train with the auto-selected profile
#   make test    - create .venv, install, run every test (the slow, faults and ray marks included)
PYTHON ?= python3.13
VENV := .venv
# Three pytest workers, a test file to each at a time: most tests start a training run that spends
# much of its time waiting (process start-up, imports, polling), so two workers left the two
# cores ~20% idle and a third fills them (tests/conftest.py; docs/notebook.md, "Three test workers").
TEST_WORKERS ?= 3
STAMP := $(VENV)/.installed

.PHONY: train test install clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

train: $(STAMP)
	$(VENV)/bin/python mario_rl_optimized.py $(ARGS)

test: $(STAMP)
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
