"""Build exact ``tc`` command lines, testable without any host.

Each qdisc's command is built by a small frozen dataclass (:mod:`.qdiscs` says how: the
command without the leading ``tc``, the device as an argument because only the node knows
its name).

Syntax follows the man pages of iproute2 6.1 (Debian 12): tc-netem(8), tc-htb(8),
tc-pie(8), tc-red(8), tc-codel(8), tc-fq_codel(8), tc-fq(8), tc-cake(8), tc-pfifo(8),
tc-bfifo(8), tc-tbf(8). Values (10 Mbit/s, 100 ms, PIE's 20 ms / 30 ms / alpha / beta)
come from the experiment file, which cites the paper (Pan et al., HPSR 2013) for each;
nothing here is specific to one experiment.

Checked against tc 6.1's parser (a keyword it does not know fails with ``What is "x"?``
before anything reaches the kernel): every command built here parses.

The package's modules, each importing only those before it: :mod:`.layer` (one layer of a
stack as the typed, immutable record :class:`Qdisc` the model's stacks are made of),
:mod:`.params` (every keyword of each qdisc kind with its unit, and the strict check of a
layer's parameters), :mod:`.qdiscs` (one qdisc's command line, by its builder:
:class:`QdiscBuilder` and its kinds) and :mod:`.stack` (a stack of :class:`Qdisc` layers on one
interface: its command lines, and what its layers mean to the rest of netrepro). Their
public names are all here.
"""

from __future__ import annotations

from netrepro.core.tc.layer import LAYER_KEYS, Qdisc
from netrepro.core.tc.params import (FLAG_NEGATIONS, GENERIC_KEYWORDS, KIND_KEYWORDS, PARAM_KEY_RE, PARAM_MAX,
                                     PARAM_WORD_RE, REQUIRED_ONE_OF, UNIT_PHRASE, UNIT_SUFFIXES, Keyword,
                                     TcParamError, check_layer, check_param, num, parse_param_key)
from netrepro.core.tc.qdiscs import (BUFFER_LIMITED_KINDS, DEV, FULL_FRAME_BYTES, Generic, HtbRoot, Netem, Pie,
                                     QdiscBuilder, Red)
from netrepro.core.tc.stack import (BUCKET_KEYS, DELAY_KIND, HANDLE_RE, HTB_KEYS, NETEM_KEYS, PACING_KIND, SHAPERS,
                                    STACK_CLASSFUL, STACK_KINDS, StackError, bucket_keys, delay_ms, pacing_rate_mbit,
                                    shaping_rate_mbit, stack_commands, stack_probe_argvs)

__all__ = [
    "BUCKET_KEYS", "BUFFER_LIMITED_KINDS", "DELAY_KIND", "DEV", "FLAG_NEGATIONS", "FULL_FRAME_BYTES",
    "GENERIC_KEYWORDS", "Generic", "HANDLE_RE", "HTB_KEYS", "HtbRoot", "KIND_KEYWORDS", "Keyword", "LAYER_KEYS",
    "NETEM_KEYS", "Netem", "PACING_KIND", "PARAM_KEY_RE", "PARAM_MAX", "PARAM_WORD_RE", "Pie", "Qdisc", "QdiscBuilder",
    "REQUIRED_ONE_OF", "Red",
    "SHAPERS", "STACK_CLASSFUL", "STACK_KINDS", "StackError", "TcParamError", "UNIT_PHRASE", "UNIT_SUFFIXES",
    "bucket_keys", "check_layer", "check_param", "delay_ms", "num", "pacing_rate_mbit", "parse_param_key",
    "shaping_rate_mbit", "stack_commands", "stack_probe_argvs",
]
