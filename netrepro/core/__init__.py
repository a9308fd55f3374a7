"""Below the model: the strict YAML reader, the qdisc builders (tc command lines), the
one-line file errors, the meaning of a run folder's files, the registry of the environment
variables netrepro reads and the read-only mapping immutable records hold (frozen.py).
"""
