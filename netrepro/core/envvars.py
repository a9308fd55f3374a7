"""Every environment variable netrepro, its analysis and its tools read, with what it does.

:data:`ENV_VARS` maps a variable's name to one line saying what it sets, which commands read
it and its default. docs/reference.md lists them (``make reference``,
:mod:`netrepro.cli.reference`); tests/test_reference.py fails when the code reads a variable
(``os.environ``, ``os.getenv``, or the environment dict a site's credentials are read from)
that is declared nowhere, and when a name here is read nowhere.

Not here, because they are declared where they are read and listed from there: the
variables that set a site option (:data:`netrepro.sites.OPTION_ENV`: ``LOCAL_MODE``,
``AGGREGATE``, ...), those of a site's account (each site class's ``ENV``:
``NETREPRO_GENI_*``, ``NETREPRO_AGGREGATES``, ``FABRIC_*``), and the standard variables
handed on to ansible-playbook unchanged (:data:`netrepro.runner.ansible.PASSTHROUGH_ENV`: ``HOME``,
``SSH_AUTH_SOCK``, ...).

This module imports nothing of netrepro: any layer may read it.
"""

from __future__ import annotations

#: Variable -> one line: what it sets, who reads it, its default. Grouped as on the page.
ENV_VARS: dict[str, str] = {
    # --- the commands' options (make exports these; an option given on the command line wins)
    "SITE": "the default of every command's --site (local, instageni, fabric, static, ns3); default local",
    "TIME_SCALE": "the default of --time-scale of run and reproduce: every duration of the schedule multiplied "
                  "by it, 0.001 to 100; default 1",
    "RATE_SCALE": "run, reproduce, provision and their dry runs: the rate scale k in [0.001, 1] (every rate and byte "
                  "size times k), checked against the experiment's rate_scale.allowed and rate_scale.min; "
                  "--rate-scale wins; run refuses one other than the scale the site was provisioned at; default: "
                  "chosen from the site's rate ceiling or measured capacity",
    "REPEAT": "the default of --repeat of run and reproduce: repetitions of every trial, 1 to 100; default 1",
    "SWEEP": "run and reproduce: 1 runs the experiment's sweep (as --sweep), 0 or empty does not",
    "PARALLEL": "the default of --parallel of up, provision, run and reproduce: reservations of the site held at once, 1 to 16; default 1",
    "HOURS": "the lease of a site that has one (instageni, fabric), hours. up, reproduce: the initial lease (the "
             "site's option hours, which --option hours= overrides; a site without a lease ignores HOURS); renew: the "
             "default of --hours, the lease ends HOURS from now unless it already ends later; default: the site's "
             "own (6 on instageni, 24 on fabric), 6 for renew",
    "RUN": "the default of analyze's --run: the run folder to analyze; default results/<experiment>/latest",
    # --- where netrepro keeps things
    "NETREPRO_STATE": "the folder of the sites' state folders (reservations, logins, logs); default .state/ in "
                      "the repository",
    "NETREPRO_INVENTORY": "the folder of the generated Ansible inventories (up writes one per reservation, "
                          "provision and run use it, down and clean remove it); default inventory/ in the repository",
    "NETREPRO_RESULTS": "the folder run folders are written into; default results/ in the repository",
    "NETREPRO_CACHE": "the download cache (the micro-VM kernel; tools/fresh-root-check's root tarball); "
                      "default ~/.cache/netrepro",
    "NETREPRO_CRATE_VALIDATOR": "the RO-Crate validator's python (a python, or a virtual environment's folder: "
                                "its bin/python) with roc-validator 0.13.0, which checks an exported crate "
                                "offline (netrepro/runfolder/cratecheck.py, its tests); default .venv-crate/bin/python "
                                "in the repository (make venv-crate)",
    # --- how a run behaves
    "NETREPRO_LEAD_S": "run and reproduce: the least time, in seconds (0.2 to 3600), between releasing a "
                       "trial's barrier and its common start; default 2",
    "NETREPRO_VERBOSE": "1 (anything but empty or 0): Ansible's task lines on the console, as -v; default: "
                        "only in each playbook's log",
    "ANSIBLE_TIMEOUT": "provision, run and reproduce: Ansible's connection timeout, whole seconds from 1 to "
                       "3600; default 60",
    "NETREPRO_TOOLKIT_VERSION": "the toolkit version the analysis records and names its output folders by "
                                "(letters, digits, . _ + -, at most 64); default from git",
    # --- tools/fresh-root-check (make fresh-root-check)
    "FRESH_ROOT_JOB": "tools/fresh-root-check: updown (default: make setup, then the local site up and down) "
                      "or reproduce (make setup, then the main job, time-scaled)",
    "FRESH_ROOT_TIME_SCALE": "tools/fresh-root-check with FRESH_ROOT_JOB=reproduce: the main job's TIME_SCALE; "
                             "default 0.05",
    "FRESH_ROOT_OUT": "tools/fresh-root-check: a folder to copy the main job's console log and run folder into "
                      "before the root is removed",
    "TMPDIR": "tools/fresh-root-check: where the fresh root is unpacked (about 2 GB); default /var/tmp",
    # --- the system's
    "PATH": "where setup looks for executables (with /usr/sbin and /sbin added); ansible-playbook gets it with "
            "this interpreter's folder first",
}
