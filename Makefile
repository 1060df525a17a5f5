# Two entry points for a fresh machine with Python 3.13 (pyenv reads .python-version):
#   make train   - create .venv, install what training needs, train with the auto-selected profile
#   make test    - create .venv, install that and the test extras (pytest, Ray, W&B, the Hub), run every
#                  test (the slow, faults and ray marks included)
PYTHON ?= python3.13
VENV := .venv
# Three pytest workers, a test file to each at a time: most tests start a training run that spends
# much of its time waiting (process start-up, imports, polling), so two workers left the two
# cores ~20% idle and a third fills them (tests/conftest.py; docs/notebook.md, "Three test workers").
TEST_WORKERS ?= 3
# What each target installed, redone when pyproject.toml changes: training's packages alone, or
# those and the test extras (which training never imports: Ray, W&B, huggingface_hub, pytest)
TRAIN_STAMP := $(VENV)/.installed-train
TEST_STAMP := $(VENV)/.installed-test

.PHONY: train test install clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip

$(TRAIN_STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e .
	touch $(TRAIN_STAMP)

$(TEST_STAMP): pyproject.toml | $(VENV)/bin/python
	$(VENV)/bin/python -m pip install --quiet -e ".[test]"
	touch $(TRAIN_STAMP) $(TEST_STAMP)

install: $(TRAIN_STAMP)

train: $(TRAIN_STAMP)
	$(VENV)/bin/python mario_rl_optimized.py $(ARGS)

test: $(TEST_STAMP)
	$(VENV)/bin/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache
