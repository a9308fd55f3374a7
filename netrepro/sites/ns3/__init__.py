"""The ns3 site: the same experiment file simulated in ns-3.

- :mod:`.site`: the site (``Ns3Site``): the simulator built once, one simulation per trial.
- :mod:`.stacks`: an experiment's qdisc stacks as ns-3 queue discs, with Linux's defaults.
- ``netrepro-sim.cc``: the simulator's source, built against the ``ns3`` wheel.
"""
