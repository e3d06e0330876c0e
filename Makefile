# Two commands from a fresh clone (README, "Quick start"):
#
#   make run     the main job, `occ-companion run` (options through ARGS, e.g. make run ARGS="--d 3 --no-plot")
#   make test    the README's test command
#
# Each first sets up what is missing: the virtual environment .venv with the pinned dependencies of
# requirements.lock and this checkout installed into it (`pip install --no-deps -e .`).  The set-up is
# redone when requirements.lock or pyproject.toml is newer than the last one; `make setup` does it alone.
#
# The environment is created with --system-site-packages: the pins the interpreter already has (a CI
# image, a machine that ran the suite before) are reused, and pip installs into .venv only the pins that
# are missing or at another version, which takes seconds instead of the minutes of downloading and
# unpacking every wheel.  The cost is isolation: packages of the interpreter outside the lock are
# visible too.  `make setup VENV_FLAGS=` (before the first set-up, or after `make clean`) builds an
# isolated environment instead.

PYTHON ?= python3
VENV ?= .venv
VENV_FLAGS ?= --system-site-packages
PIP_FLAGS ?= --quiet --disable-pip-version-check
ARGS ?=

STAMP := $(VENV)/.occ-setup
# Recipes find python3, pip and occ-companion in the environment first: the commands below are the
# README's, run in .venv.
export VIRTUAL_ENV := $(abspath $(VENV))
export PATH := $(VIRTUAL_ENV)/bin:$(PATH)

.PHONY: run test setup clean

run: $(STAMP)
	occ-companion run $(ARGS)

test: $(STAMP)
	python3 -m pytest -q -n auto -m 'slow or not slow' checks tests

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	test -x $(VENV)/bin/python3 || $(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(VENV)/bin/python3 -m pip install $(PIP_FLAGS) -r requirements.lock
	$(VENV)/bin/python3 -m pip install $(PIP_FLAGS) --no-deps -e .
	touch $(STAMP)

clean:
	rm -rf $(VENV)
