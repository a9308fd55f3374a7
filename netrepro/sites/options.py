"""A site's options: what each site declares (:class:`Option` with its :data:`Validator`), the
validators a value passes (:func:`one_of`, :func:`matches`, :func:`number_in`, :func:`boolean`,
...), and :func:`check_options`, which holds the options given (``--option key=value``, the
environment) to a site's ``OPTIONS`` before anything is created or contacted."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from netrepro.experiment.spec import Spec
from netrepro.sites.errors import SiteError

if TYPE_CHECKING:
    from netrepro.sites.base import Site


def positive_int_option(options: dict[str, Any], key: str, error: type[Exception] | None = None) -> int | None:
    """``options[key]`` as a positive integer, None when unset or empty.

    Raises SiteError (one line, naming the option) for anything else, or
    ``error("site options", key, problem)`` when ``error`` is given (e.g. SpecError).
    """
    raw = options.get(key)
    if raw in (None, ""):
        return None
    try:
        val = int(raw)
    except (TypeError, ValueError):
        val = 0
    if val <= 0:
        if error is not None:
            raise error("site options", key, f"expected a positive integer, got {raw!r}")
        raise SiteError(f"site option {key}={raw!r}: expected a positive integer")
    return val


#: A validator of an option's value: ``validator(value, spec)`` returns None when ``value`` is acceptable, else what
#: was expected (``"expected ..."``). ``spec`` is the experiment (some checks depend on it).
Validator = Callable[[Any, Spec], "str | None"]


@dataclass(frozen=True)
class Option:
    """One option a site understands: ``help`` (a short description, listed when an unknown
    option is given) and ``validator`` (see :data:`Validator`; None accepts any non-empty text)."""

    help: str
    validator: Validator | None = None


class SiteOptions(dict):
    """Site options (key -> value) that remember where each came from, for error messages.

    ``origins`` maps a key to ``--option`` or to the environment variable that set it
    (``AGGREGATE``); options made in code have no origin.
    """

    def __init__(self, *args, origins: dict[str, str] | None = None, **kw):
        super().__init__(*args, **kw)
        self.origins: dict[str, str] = dict(origins or {})


def origin_of(options: Any, key: str) -> str:
    src = getattr(options, "origins", {}).get(key)
    return f" (from {src})" if src else ""


def one_of(*choices: str) -> Validator:
    """A validator accepting exactly one of ``choices``."""
    return lambda v, spec: None if str(v) in choices else f"expected one of: {', '.join(choices)}"


def matches(pattern: str, expected: str) -> Validator:
    """A validator accepting text that fully matches the regular expression ``pattern``."""
    rx = re.compile(pattern)
    return lambda v, spec: None if isinstance(v, (str, int)) and rx.fullmatch(str(v)) else f"expected {expected}"


def positive_int(value: Any, spec: Spec | None = None) -> str | None:
    """Validator: a whole number > 0 (``4`` or ``"4"``)."""
    if isinstance(value, bool):
        return "expected a positive integer"
    try:
        ok = int(str(value).strip()) > 0
    except ValueError:
        ok = False
    return None if ok else "expected a positive integer"


def positive_number(value: Any, spec: Spec | None = None) -> str | None:
    """Validator: a finite number > 0 (``2.5`` or ``"2.5"``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    return None if math.isfinite(x) and x > 0 else "expected a positive number"


def number_in(low: float, high: float, what: str, source: str, whole: bool = False) -> Validator:
    """A validator accepting a finite number above ``low`` and at most ``high`` (``whole``: a whole
    number from ``low``, at least 1, to ``high``), as given on a command line (``"2.5"``) or in code.

    ``what``: the unit, said in the refusal (``"a number of hours"``); ``source``: where
    ``high`` comes from (a service's documented limit, or why a conservative bound was
    chosen), said in the refusal after the range. Every numeric site option is bounded where
    it is parsed (check_options), so that ``plan`` and a dry run refuse what ``up`` could not
    use (a lease of 1e308 hours overflows datetime)."""

    lo, hi = (str(int(x)) if float(x).is_integer() else f"{x:g}" for x in (low, high))   # 4194304, not 4.19e+06

    def check(value: Any, spec: Spec | None = None) -> str | None:
        if whole:
            ok = positive_int(value) is None and low <= int(str(value).strip()) <= high
            expected = f"from {lo} to {hi}"
        else:
            try:
                x = float(value) if not isinstance(value, bool) else math.nan
            except (TypeError, ValueError):
                x = math.nan
            ok = math.isfinite(x) and low < x <= high
            expected = f"above {lo} and at most {hi}"
        return None if ok else f"expected {what} {expected} ({source})"

    return check


def as_bool(value: Any) -> bool | None:
    """True or False from a bool or from true/false, yes/no, on/off, 1/0 (any case, as typed
    on a command line); None for anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


def boolean(value: Any, spec: Spec | None = None) -> str | None:
    """Validator: true/false, yes/no, on/off or 1/0."""
    return None if as_bool(value) is not None else "expected true or false"


def mgmt_subnet(first_host: int = 11) -> Validator:
    """A validator of a management network: an IPv4 network in CIDR notation (no host bits set)
    with room for host ``first_host`` + one address per node of the spec, below broadcast."""

    def check(value: Any, spec: Spec) -> str | None:
        try:
            net = ipaddress.IPv4Network(str(value))
        except ValueError:
            return "expected an IPv4 network in CIDR notation such as 172.30.0.0/24"
        need = first_host + len(spec.nodes) + 1
        if net.num_addresses < need:
            return f"expected a network with at least {need} addresses (hosts .{first_host} and up for {len(spec.nodes)} nodes)"
        return None

    return check


def check_options(site_cls: type["Site"], options: dict[str, Any] | None, spec: Spec) -> dict[str, Any]:
    """Validate ``options`` against ``site_cls.OPTIONS``; return them as a plain dict.

    Every key must be a declared option (or one of ``site_cls.HOOKS``, given by code as a
    non-text object: a runner, a client, an environment dict); every value must pass its
    option's validator. Nothing is created or contacted here.

    Raises:
        SiteError: one line naming the option (and the variable or ``--option`` it came from)
            and what was expected; for an unknown key, listing the site's known options.
    """
    options = options if options is not None else {}
    out: dict[str, Any] = {}
    for key, value in options.items():
        if key in site_cls.HOOKS and not isinstance(value, str):
            out[key] = value
            continue
        opt = site_cls.OPTIONS.get(key)
        if opt is None:
            known = "; ".join(f"{k}: {o.help}" for k, o in site_cls.OPTIONS.items()) or "none"
            raise SiteError(f"site {site_cls.name}: unknown option {key!r}{origin_of(options, key)}; "
                            f"expected one of the site's options: {known}")
        if value is None or value == "":
            continue
        problem = opt.validator(value, spec) if opt.validator else (
            None if isinstance(value, (str, int, float)) and not re.search(r"[\x00-\x1f\x7f]", str(value))
            else "expected text without control characters")
        if problem:
            raise SiteError(f"site {site_cls.name}: option {key}={value!r}{origin_of(options, key)}: {problem}")
        out[key] = value
    return out
