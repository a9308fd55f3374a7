"""netrepro: reproduce network experiments on research testbeds with one command.

Packages: ``netrepro.experiment.spec`` (experiment files), ``netrepro.sites`` (where nodes come from),
``netrepro.sites.inventory``, ``netrepro.experiment.rolevars``/``netrepro.core.tc`` (what Ansible applies),
``netrepro.runner`` (the steps), ``netrepro.cli.commands`` (the command line); the analysis is
the top-level ``analysis`` package.
"""

__version__ = "0.2.0"
