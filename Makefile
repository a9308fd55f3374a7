# netrepro: reproduce network experiments on testbeds with one command.
#
#   make reproduce-pie-vs-red [SITE=local] [TIME_SCALE=1]   the main job
#   make test                                                 unit + integration tests
#
# The targets that make, use or release a site, or analyze a run (setup, reproduce, up,
# provision, run, analyze, down, status, renew, plan, rspec, validate, compare, clean) do
# their work through the `netrepro` command line (python -m netrepro), so all of that is also
# usable without make (clean also removes the .pytest_cache and __pycache__ folders). The
# others call their tools directly: venv (python -m venv, pip), bench (python -m
# netrepro.cli.bench), reference (python -m netrepro.cli.reference), lint (ansible-lint,
# lint-imports), the test targets (pytest, lint-imports; after netrepro setup) and
# fresh-root-check (tools/fresh-root-check). docs/reference.md (`make reference`) lists what
# each target runs.
#
# Site options: OPTIONS="key=value key=value" (each becomes --option key=value), or the
# variables of netrepro.sites.OPTION_ENV (LOCAL_MODE, AGGREGATE, IMAGE, VM_TYPE, SLICE_NAME,
# MANIFEST, GENI_USER, SSH_KEY, FABRIC_SITE, CORES, RAM_GB, DISK_GB, SWITCH_NIC, STATIC_FILE,
# INSTALL_PACKAGES, KERNEL_UPGRADE), read from the environment by netrepro itself, and HOURS
# (netrepro.sites.DECLARED_OPTION_ENV), read as its option only by a site that declares it.
# tests/test_makefile_options.py checks these lists against the code.
#
# Every variable a user may set is declared below with `?=`, after its description in `#:`
# lines: docs/reference.md is generated from them (netrepro/cli/reference.py).

SHELL := /bin/bash
.DEFAULT_GOAL := help

#: the site (--site): local, instageni, fabric, static or ns3
SITE ?= local
#: the experiment: a folder name under experiments/ or the path of its experiment.yml
EXPERIMENT ?= pie-vs-red
#: run, reproduce: every duration of the schedule multiplied by it, 0.001 to 100 (--time-scale)
TIME_SCALE ?= 1
#: run, reproduce, provision: the rate scale k, 0.001 to 1, every rate and byte size times k (read
#: by netrepro from the environment; its --rate-scale does the same); empty: chosen by the site
RATE_SCALE ?=
#: the lease of a testbed site (instageni, fabric), hours. up, reproduce: the initial lease (read by
#: netrepro as the site option hours of a site that has one; empty: the site's default, 6 on instageni,
#: 24 on fabric); renew: the lease ends HOURS from now unless it already ends later (--hours; empty: 6)
HOURS ?=
#: benchmark: the fixed experiment it runs from nothing to teardown
BENCH_EXPERIMENT ?= pie-vs-red
#: benchmark: the time scale it runs BENCH_EXPERIMENT at (pie-vs-red's time_scale.min)
BENCH_TIME_SCALE ?= 0.25
#: analyze, bench: the run folder (--run; default results/<experiment>/latest)
RUN ?=
#: run, reproduce: continue the interrupted run in this folder (--resume)
RESUME ?=
#: run, reproduce: run every trial N times (--repeat)
REPEAT ?= 1
#: run, reproduce: the shuffle's seed (--seed)
SEED ?=
#: run, reproduce: 1 runs each block in the file's order (--no-shuffle)
NO_SHUFFLE ?=
#: run, reproduce: 1 runs the experiment's sweep (--sweep)
SWEEP ?=
#: run, reproduce: 1 prints the trials that would run and runs nothing (--dry-run); reproduce then
#: skips setup (nothing is installed; only the virtual environment is made if missing)
DRY_RUN ?=
#: run, reproduce: trial instances simulated at once, ns3 only (--jobs; default one per core)
JOBS ?=
#: reproduce, up, provision, run: hold N reservations of SITE at once and deal the trials out to
#: them (--parallel; N slices, N nodes files on static: STATIC_FILE=a.yml,b.yml); down releases them all
PARALLEL ?=
#: 1: Ansible's task lines on the console (-v)
V ?=
#: analyze, bench: 1 accepts a run whose raw files differ from run.json's record (--partial)
PARTIAL ?=
#: compare: the run folders to compare, separated by spaces
RUNS ?=
#: the site options, "key=value key=value" (each becomes --option key=value; a value holds no space);
#: on reproduce, up, provision, run, down, status, renew, plan, and setup (which reads only mode)
OPTIONS ?=
#: the Python that makes the virtual environment .venv
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
NETREPRO := $(PY) -m netrepro
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
# The RO-Crate validator's own virtual environment (requirements-crate-validator.txt says why it
# is not .venv), and its stamp.
CRATE_VENV := .venv-crate
CRATE_STAMP := $(CRATE_VENV)/.installed
# Every shell script of the repository (shellcheck reads .shellcheckrc).
SHELL_SCRIPTS := $(wildcard roles/*/files/*.sh) tools/fresh-root-check tools/slurm-cluster .ci/run
# Debian's Slurm (22.05), munge and MariaDB: the single-node cluster tools/slurm-cluster starts for the
# tests of the ns3 site's Slurm executor (tests/test_site_ns3_slurm.py).
SLURM_PACKAGES := slurmctld slurmd slurmdbd slurm-client munge mariadb-server

export SITE TIME_SCALE RATE_SCALE HOURS RUN REPEAT

# The site and its options, on every command that opens a site (netrepro up --help).
SITE_ARGS = --site $(SITE) $(foreach o,$(OPTIONS),--option '$(subst ','\'',$(o))')
# The repetition, concurrency and console options of run and reproduce (netrepro run --help).
SCHEDULE_ARGS = $(if $(filter-out 1,$(REPEAT)),--repeat $(REPEAT)) $(if $(SEED),--seed $(SEED)) \
                $(if $(filter 1,$(NO_SHUFFLE)),--no-shuffle) $(if $(filter 1,$(DRY_RUN)),--dry-run) $(if $(filter 1,$(V)),-v) \
                $(if $(filter 1,$(SWEEP)),--sweep) $(if $(JOBS),--jobs $(JOBS)) $(PARALLEL_ARGS)
# How many reservations at once, on reproduce, up, provision and run (netrepro up --help).
PARALLEL_ARGS = $(if $(PARALLEL),--parallel $(PARALLEL))

.PHONY: help setup venv slurm-packages reproduce-pie-vs-red reproduce up provision run analyze down status profile benchmark \
        renew plan rspec validate compare quick test test-unit test-integration faults fresh-root-check lint \
        bench reference clean venv-crate

help: ## Show the targets
	@echo "netrepro: reproduce network experiments on testbeds"
	@echo
	@grep -E '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | awk -F'\t' '{printf "  %-22s %s\n", $$1, $$2}'
	@echo
	@echo "Variables: SITE=$(SITE) EXPERIMENT=$(EXPERIMENT) TIME_SCALE=$(TIME_SCALE) RUN=<results folder> OPTIONS=\"key=value ...\""
	@echo "Every variable, command, option, site option and environment variable: docs/reference.md"

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

# The RO-Crate validator (roc-validator) that netrepro/runfolder/cratecheck.py runs as a
# subprocess, offline, on the crates of `netrepro export`: apart from .venv, whose rich it cannot
# share (requirements-crate-validator.txt).
$(CRATE_STAMP): requirements-crate-validator.txt
	$(PYTHON) -m venv $(CRATE_VENV)
	$(CRATE_VENV)/bin/pip install -q -r requirements-crate-validator.txt
	touch $@

venv-crate: $(CRATE_STAMP) ## Create the RO-Crate validator's virtual environment .venv-crate (roc-validator, requirements-crate-validator.txt), apart from .venv

setup: $(STAMP) ## Install everything SITE needs on this machine (local: Debian packages, micro-VM kernel; ns3: g++, ns-3, netrepro-sim; fabric: fablib and the compiler it builds with; instageni, static: nothing more); idempotent
	$(NETREPRO) setup $(SITE_ARGS)

reproduce-pie-vs-red: ## The main job: reproduce PIE vs RED (Fig. 8) on SITE, then tear down
	$(MAKE) reproduce EXPERIMENT=pie-vs-red

quick: $(STAMP) ## The fastest real verdicts of EXPERIMENT: on the local site at the experiment's quick time scale, then on the ns3 site at the same time and rate scale; both verdicts side by side
	$(NETREPRO) setup --site local
	$(NETREPRO) setup --site ns3
	$(NETREPRO) quick $(EXPERIMENT)

# A dry run installs nothing: setup (apt-get, the micro-VM kernel) only for a real run.
reproduce: $(if $(filter 1,$(DRY_RUN)),$(STAMP),setup) ## setup + up + provision + run + analyze + down for EXPERIMENT (REPEAT=N, SWEEP=1, RESUME=<run folder>, JOBS=N: trials simulated at once, ns3 only, default one per core; PARALLEL=N: on N reservations at once); DRY_RUN=1 prints the trials and skips setup: nothing is installed but the virtual environment
	$(NETREPRO) reproduce $(EXPERIMENT) $(SITE_ARGS) $(if $(RESUME),--resume $(RESUME),--time-scale $(TIME_SCALE)) $(SCHEDULE_ARGS)

up: setup ## Reserve/build the site and wait until every node answers
	$(NETREPRO) up $(EXPERIMENT) $(SITE_ARGS) $(PARALLEL_ARGS)

provision: $(STAMP) ## Provision the nodes with Ansible
	$(NETREPRO) provision $(EXPERIMENT) $(SITE_ARGS) $(PARALLEL_ARGS)

run: $(STAMP) ## Run the trials into a new results/<experiment>/<run-id>/ (REPEAT=N, SWEEP=1, SEED, NO_SHUFFLE=1, DRY_RUN=1, V=1, JOBS=N: trials simulated at once, ns3 only, default one per core; PARALLEL=N: on N reservations at once); RESUME=<run folder> continues that run
	$(NETREPRO) run $(EXPERIMENT) $(SITE_ARGS) $(if $(RESUME),--resume $(RESUME),--time-scale $(TIME_SCALE)) $(SCHEDULE_ARGS)

analyze: $(STAMP) ## Analyze RUN=<folder> (default: results/<experiment>/latest); PARTIAL=1 accepts damaged raw files
	$(NETREPRO) analyze $(EXPERIMENT) $(if $(RUN),--run $(RUN)) $(if $(filter 1,$(PARTIAL)),--partial)

down: $(STAMP) ## Release the site, and every parallel reservation of it (idempotent)
	$(NETREPRO) down $(EXPERIMENT) $(SITE_ARGS)

status: $(STAMP) ## Show the site's reservation
	$(NETREPRO) status $(EXPERIMENT) $(SITE_ARGS)

renew: $(STAMP) ## Set the reservation's lease to end HOURS from now (default 6), unless it already ends later
	$(NETREPRO) renew $(EXPERIMENT) $(SITE_ARGS) $(if $(HOURS),--hours $(HOURS))

plan: $(STAMP) ## Print what SITE would be asked for (RSpec, fablib slice, nodes); no account needed
	$(NETREPRO) plan $(EXPERIMENT) $(SITE_ARGS)

rspec: $(STAMP) ## Regenerate rspecs/<experiment>.xml from the experiment's topology
	$(NETREPRO) rspec $(EXPERIMENT)

profile: $(STAMP) ## Write a CloudLab profile of EXPERIMENT (profile.rspec) into the new folder cloudlab-profile-<experiment>
	$(NETREPRO) profile $(EXPERIMENT)

validate: $(STAMP) ## Check experiments/<experiment>/experiment.yml against the schema
	$(NETREPRO) validate $(EXPERIMENT)

slurm-packages: ## Install Debian's Slurm (slurmctld, slurmd, slurmdbd, client), munge and MariaDB: what tools/slurm-cluster runs a single-node cluster with, for the ns3 site's Slurm executor's tests (root)
	@dpkg-query -W $(SLURM_PACKAGES) > /dev/null 2>&1 || { apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(SLURM_PACKAGES); }

test: setup $(DEV_STAMP) $(CRATE_STAMP) slurm-packages ## All tests: the import layers (lint-imports), shellcheck, unit (in parallel), the wire tests (two at once), then namespace, fault (tests/test_faults.py) tests and the main job in a fresh Debian 12 root, alone
	$(NETREPRO) setup --site ns3
	LOCAL_MODE=uml $(NETREPRO) setup --site local
	$(VENV)/bin/lint-imports .importlinter
	$(VENV)/bin/shellcheck $(SHELL_SCRIPTS)
	$(PY) -m pytest -q -n auto --durations=25 -m "not integration and not netns and not wire" tests
	$(PY) -m pytest -q -n 2 --durations=0 --durations-min=5 -m "wire and not integration and not netns" tests
	$(PY) -m pytest -q --durations=0 --durations-min=5 -m "integration or netns" tests

fresh-root-check: ## In a fresh minimal Debian 12 root (root): make setup, then the local site up and down; FRESH_ROOT_JOB=reproduce: the main job instead (TIME_SCALE=FRESH_ROOT_TIME_SCALE, default 0.05)
	tools/fresh-root-check

test-unit: $(DEV_STAMP) $(CRATE_STAMP) slurm-packages ## Unit tests only (no micro-VM), one worker per core (pytest-xdist); installs the ns3 site, UML, Slurm and .venv-crate as make test
	$(NETREPRO) setup --site ns3
	LOCAL_MODE=uml $(NETREPRO) setup --site local
	$(PY) -m pytest -q -n auto -m "not integration and not netns and not wire" tests

test-integration: setup $(DEV_STAMP) ## Every test marked integration (pytest -m integration): the main job in a fresh Debian 12 root (tests/test_integration.py) and the live tests on the local site (the faults and the static site on the same nodes, UML mode)
	$(PY) -m pytest -q -m integration tests

faults: setup $(DEV_STAMP) ## Inject each fault for real on the local site; check nothing is lost (root)
	$(PY) -m pytest -q tests/test_faults.py

lint: $(DEV_STAMP) ## ansible-lint (production profile) on roles and playbooks; lint-imports: the layers of .importlinter; shellcheck on every shell script
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH ansible-lint --profile production roles playbooks
	$(VENV)/bin/lint-imports .importlinter
	$(VENV)/bin/shellcheck $(SHELL_SCRIPTS)

compare: $(STAMP) ## One report and figure across RUNS="<run folder> <run folder> ..." (sites, repetitions), with the published results
	$(NETREPRO) compare $(RUNS)

benchmark: setup ## Where the time goes, measured afresh: BENCH_EXPERIMENT (default pie-vs-red) at BENCH_TIME_SCALE (default 0.25, its time_scale.min) on SITE from nothing to teardown, then make bench's figures of that run (per stage, per trial step, with the load average); alone on the machine
	$(NETREPRO) reproduce $(BENCH_EXPERIMENT) $(SITE_ARGS) --time-scale $(BENCH_TIME_SCALE)
	$(PY) -m netrepro.cli.bench $(BENCH_EXPERIMENT)

bench: $(STAMP) ## Print the figures of the latest run (wall time, overhead, skew, samples); PARTIAL=1 as analyze
	$(PY) -m netrepro.cli.bench $(EXPERIMENT) $(if $(RUN),--run $(RUN)) $(if $(filter 1,$(PARTIAL)),--partial)

reference: $(STAMP) ## Regenerate docs/reference.md (targets, variables, commands, site options, environment) from the code
	$(PY) -m netrepro.cli.reference --output docs/reference.md

clean: ## Tear down local sites, remove generated files; keeps results/ and live testbed reservations
	if [ -x $(PY) ]; then $(NETREPRO) clean; fi
	rm -rf .pytest_cache
	find . -name __pycache__ -prune -exec rm -rf {} +
