# netrepro: reproduce network experiments on testbeds with one command.
#
#   make reproduce-pie-vs-red [SITE=local] [TIME_SCALE=1]   the main job
#   make test                                                 unit + integration tests
#
# Every target calls the `netrepro` command line (python -m netrepro), so everything is also
# usable without make. Site options are passed through the environment: LOCAL_MODE,
# AGGREGATE, IMAGE, VM_TYPE, SLICE_NAME, MANIFEST, GENI_USER, SSH_KEY, FABRIC_SITE, CORES,
# RAM_GB, DISK_GB, SWITCH_NIC, STATIC_FILE, INSTALL_PACKAGES.

SHELL := /bin/bash
.DEFAULT_GOAL := help

SITE ?= local
EXPERIMENT ?= pie-vs-red
TIME_SCALE ?= 1
HOURS ?= 6
RUN ?=
RESUME ?=
REPEAT ?= 1
SEED ?=
NO_SHUFFLE ?=
SWEEP ?=
DRY_RUN ?=
JOBS ?=
V ?=
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NETREPRO := $(PY) -m netrepro
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev

export SITE TIME_SCALE RATE_SCALE HOURS RUN REPEAT

# The repetition, concurrency and console options of run and reproduce (netrepro run --help).
SCHEDULE_ARGS = $(if $(filter-out 1,$(REPEAT)),--repeat $(REPEAT)) $(if $(SEED),--seed $(SEED)) \
                $(if $(filter 1,$(NO_SHUFFLE)),--no-shuffle) $(if $(filter 1,$(DRY_RUN)),--dry-run) $(if $(filter 1,$(V)),-v) \
                $(if $(filter 1,$(SWEEP)),--sweep) $(if $(JOBS),--jobs $(JOBS))

.PHONY: help setup venv reproduce-pie-vs-red reproduce up provision run analyze down status \
        renew plan rspec validate compare quick test test-unit test-integration faults fresh-root-check lint bench clean

help: ## Show the targets
	@echo "netrepro: reproduce network experiments on testbeds"
	@echo
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  %-22s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: SITE=$(SITE) EXPERIMENT=$(EXPERIMENT) TIME_SCALE=$(TIME_SCALE) RUN=<results folder>"

# The run-time packages only: the main job on the local site needs no compiler and no fablib.
$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q -r requirements.txt
	$(VENV)/bin/pip install -q --no-deps -e .
	touch $@

# The tests' and linters' packages (pytest, ansible-lint, import-linter, fablib for the fabric site's tests).
$(DEV_STAMP): $(STAMP) requirements-dev.txt requirements-fabric.txt
	$(NETREPRO) setup --dev
	$(VENV)/bin/pip install -q -r requirements-dev.txt
	touch $@

venv: $(STAMP) ## Create the virtual environment with the pinned Python packages

setup: $(STAMP) ## Install everything SITE needs (Debian packages, micro-VM kernel); idempotent
	$(NETREPRO) setup --site $(SITE)

reproduce-pie-vs-red: ## The main job: reproduce PIE vs RED (Fig. 8) on SITE, then tear down
	$(MAKE) reproduce EXPERIMENT=pie-vs-red

quick: $(STAMP) ## The fastest real verdicts of EXPERIMENT: on the ns3 site, then on the local site at the experiment's quick time scale; both verdicts side by side
	$(NETREPRO) setup --site ns3
	$(NETREPRO) setup --site local
	$(NETREPRO) quick $(EXPERIMENT)

reproduce: setup ## up + provision + run + analyze + down for EXPERIMENT (REPEAT=N, SWEEP=1, DRY_RUN=1, RESUME=<run folder>, JOBS=N: trials simulated at once, ns3 only, default one per core)
	$(NETREPRO) reproduce $(EXPERIMENT) --site $(SITE) $(if $(RESUME),--resume $(RESUME),--time-scale $(TIME_SCALE)) $(SCHEDULE_ARGS)

up: setup ## Reserve/build the site and wait until every node answers
	$(NETREPRO) up $(EXPERIMENT) --site $(SITE)

provision: $(STAMP) ## Provision the nodes with Ansible
	$(NETREPRO) provision $(EXPERIMENT) --site $(SITE)

run: $(STAMP) ## Run the trials into a new results/<experiment>/<run-id>/ (REPEAT=N, SWEEP=1, SEED, NO_SHUFFLE=1, DRY_RUN=1, V=1, JOBS=N: trials simulated at once, ns3 only, default one per core); RESUME=<run folder> continues that run
	$(NETREPRO) run $(EXPERIMENT) --site $(SITE) $(if $(RESUME),--resume $(RESUME),--time-scale $(TIME_SCALE)) $(SCHEDULE_ARGS)

analyze: $(STAMP) ## Analyze RUN=<folder> (default: results/<experiment>/latest); PARTIAL=1 accepts damaged raw files
	$(NETREPRO) analyze $(EXPERIMENT) $(if $(RUN),--run $(RUN)) $(if $(filter 1,$(PARTIAL)),--partial)

down: $(STAMP) ## Release the site (idempotent)
	$(NETREPRO) down $(EXPERIMENT) --site $(SITE)

status: $(STAMP) ## Show the site's reservation
	$(NETREPRO) status $(EXPERIMENT) --site $(SITE)

renew: $(STAMP) ## Extend the reservation by HOURS
	$(NETREPRO) renew $(EXPERIMENT) --site $(SITE) --hours $(HOURS)

plan: $(STAMP) ## Print what SITE would be asked for (RSpec, fablib slice, nodes); no account needed
	$(NETREPRO) plan $(EXPERIMENT) --site $(SITE)

rspec: $(STAMP) ## Regenerate rspecs/<experiment>.xml from the experiment's topology
	$(NETREPRO) rspec $(EXPERIMENT)

validate: $(STAMP) ## Check experiments/<experiment>/experiment.yml against the schema
	$(NETREPRO) validate $(EXPERIMENT)

test: setup $(DEV_STAMP) ## All tests: the import layers (lint-imports), unit (in parallel), then namespace, fault (tests/test_faults.py) tests and the main job in a fresh Debian 12 root
	$(NETREPRO) setup --site ns3
	LOCAL_MODE=uml $(NETREPRO) setup --site local
	$(VENV)/bin/lint-imports --config .importlinter
	$(PY) -m pytest -q -n auto --durations=15 -m "not integration and not netns" tests
	$(PY) -m pytest -q --durations=0 --durations-min=5 -m "integration or netns" tests

fresh-root-check: ## In a fresh minimal Debian 12 root: make setup, then the local site up and down
	tools/fresh-root-check

test-unit: $(DEV_STAMP) ## Unit tests only (no micro-VM), one worker per core (pytest-xdist); installs the ns3 site and UML as make test
	$(NETREPRO) setup --site ns3
	LOCAL_MODE=uml $(NETREPRO) setup --site local
	$(PY) -m pytest -q -n auto -m "not integration and not netns" tests

test-integration: setup $(DEV_STAMP) ## The end-to-end test only
	$(PY) -m pytest -q -m integration tests

faults: setup $(DEV_STAMP) ## Inject each fault for real on the local site; check nothing is lost (root)
	$(PY) -m pytest -q tests/test_faults.py

lint: $(DEV_STAMP) ## ansible-lint (production profile) on roles and playbooks; lint-imports: the layers of .importlinter
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ansible-lint --profile production roles playbooks
	$(VENV)/bin/lint-imports --config .importlinter

compare: $(STAMP) ## One report and figure across RUNS="<run folder> <run folder> ..." (sites, repetitions), with the published results
	$(NETREPRO) compare $(RUNS)

bench: $(STAMP) ## Print the figures of the latest run (wall time, overhead, skew, samples); PARTIAL=1 as analyze
	$(PY) -m netrepro.bench $(EXPERIMENT) $(if $(RUN),--run $(RUN)) $(if $(filter 1,$(PARTIAL)),--partial)

clean: ## Tear down local sites, remove generated files; keeps results/ and live testbed reservations
	if [ -x $(PY) ]; then $(NETREPRO) clean; fi
	rm -rf .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
