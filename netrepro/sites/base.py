"""The site interface: one small class per testbed, everything else shared.

A *site* turns an experiment's topology into reachable nodes. Each site is one module in
``netrepro/sites/`` with one :class:`Site` subclass registered in ``SITES``
(``netrepro/sites/__init__.py``). The controller calls, in order::

    site.reserve()            # ask for resources (slice, namespaces, VMs ...)
    site.wait_ready(timeout)  # block until every node accepts SSH
    site.logins()             # node name -> NodeLogin: how Ansible reaches it
    ...                       # provisioning and trials (shared, site-independent)
    site.release()            # give everything back; idempotent

plus ``renew(hours)`` and ``status()``, and ``plan()`` which prints what ``reserve`` would
request without credentials and without contacting anything.

The run state of a reservation (slice name, aggregate, expiry, node logins, what was
created) lives in ``state_dir/state.json`` so that a later ``down``, ``status`` or
``provision`` in a new process finds it again. See docs/adding-a-site.md.
"""

from __future__ import annotations

import importlib
import ipaddress
import json
import math
import os
import re
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, TypeVar

from netrepro.experiment.spec import Spec
from netrepro.sites.statefolder import STATE_MARKER, make_state_dir


class SiteError(RuntimeError):
    """A site cannot do what was asked; the message says what is missing and where to set it."""


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


# --- site options -------------------------------------------------------------------------
#: A value check: ``check(value, spec)`` returns None when ``value`` is acceptable, else what
#: was expected (``"expected ..."``). ``spec`` is the experiment (some checks depend on it).
Check = Callable[[Any, Spec], "str | None"]


@dataclass(frozen=True)
class Option:
    """One option a site understands: ``help`` (a short description, listed when an unknown
    option is given) and ``check`` (see :data:`Check`; None accepts any non-empty text)."""

    help: str
    check: Check | None = None


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


def one_of(*choices: str) -> Check:
    """A check accepting exactly one of ``choices``."""
    return lambda v, spec: None if str(v) in choices else f"expected one of: {', '.join(choices)}"


def matches(pattern: str, expected: str) -> Check:
    """A check accepting text that fully matches the regular expression ``pattern``."""
    rx = re.compile(pattern)
    return lambda v, spec: None if isinstance(v, (str, int)) and rx.fullmatch(str(v)) else f"expected {expected}"


def positive_int(value: Any, spec: Spec | None = None) -> str | None:
    """Check: a whole number > 0 (``4`` or ``"4"``)."""
    if isinstance(value, bool):
        return "expected a positive integer"
    try:
        ok = int(str(value).strip()) > 0
    except ValueError:
        ok = False
    return None if ok else "expected a positive integer"


def positive_number(value: Any, spec: Spec | None = None) -> str | None:
    """Check: a finite number > 0 (``2.5`` or ``"2.5"``)."""
    try:
        x = float(value)
    except (TypeError, ValueError):
        x = math.nan
    return None if math.isfinite(x) and x > 0 else "expected a positive number"


def number_in(low: float, high: float, what: str, source: str, whole: bool = False) -> Check:
    """A check accepting a finite number above ``low`` and at most ``high`` (``whole``: a whole
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


def lease_kept_line(site: str, what: str, current: Any, hours: float) -> str:
    """The one line ``renew`` prints when the lease of ``what`` (``slice nr-x``) already ends at
    ``current`` (an aware datetime), not before ``hours`` from now: renew never shortens a
    lease, and changes nothing then."""
    import datetime as dt

    end = current.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return (f"{site}: the lease of {what} already ends at {end} UTC, not before the {hours:g} h from now asked; "
            "nothing changed (renew never shortens a lease)")


def as_bool(value: Any) -> bool | None:
    """True or False from a bool or from true/false, yes/no, on/off, 1/0 (any case, as typed
    on a command line); None for anything else."""
    if isinstance(value, bool):
        return value
    word = str(value).strip().lower()
    return True if word in ("1", "true", "yes", "on") else False if word in ("0", "false", "no", "off") else None


def boolean(value: Any, spec: Spec | None = None) -> str | None:
    """Check: true/false, yes/no, on/off or 1/0."""
    return None if as_bool(value) is not None else "expected true or false"


def mgmt_subnet(first_host: int = 11) -> Check:
    """A check for a management network: an IPv4 network in CIDR notation (no host bits set)
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


#: A login name: POSIX portable user name characters, not starting with '-' (useradd(8)).
LOGIN_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
#: A DNS host name (RFC 1123 labels: letters, digits, '-' inside, '.' between).
HOSTNAME_RE = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def login_user_problem(value: Any, spec: Spec | None = None) -> str | None:
    """Check for a login user passed to ssh: letters, digits, '.', '_', '-', not starting with '-'
    (ssh would read ``-oProxyCommand=...`` as an option)."""
    if isinstance(value, str) and LOGIN_USER_RE.fullmatch(value):
        return None
    return "expected a login name (letters, digits, '.', '_', '-'; not starting with '-')"


#: An IPv6 address's scope id (zone, RFC 4007 section 11) after its '%': a zone index or a
#: Linux network device name, at most 15 characters (IFNAMSIZ 16 with its NUL, netdevice(7)),
#: without '/', ':' or whitespace (the kernel's dev_valid_name()). Python's ipaddress accepts
#: any text there (``fe80::1%eth0 `whoami```), which a ProxyCommand's shell would read.
SCOPE_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")


def ssh_host_problem(value: Any, spec: Spec | None = None) -> str | None:
    """Check for an SSH host: a DNS name (RFC 1123), an IPv4 or a bare IPv6 address (Python's
    :mod:`ipaddress`), an IPv6 scope id only a device name or zone index (:data:`SCOPE_ID_RE`);
    never starting with '-', no whitespace or control characters. The one check of every host
    that reaches ssh's argv, a ProxyCommand or an inventory (:func:`login_problem`)."""
    expected = "expected a host name, IPv4 or IPv6 address (no brackets, no leading '-', no spaces)"
    if not isinstance(value, str):
        return expected
    if HOSTNAME_RE.fullmatch(value):
        return None
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        return expected
    scope = getattr(addr, "scope_id", None)
    if scope is not None and not SCOPE_ID_RE.fullmatch(scope):
        return (f"{expected[:-1]}; an IPv6 scope id after '%' is a network device name or zone index: "
                "letters, digits, '_', '.', '-', at most 15)")
    return None


def port_problem(value: Any, spec: Spec | None = None) -> str | None:
    """Check for a TCP port: a whole number from 1 to 65535 (RFC 793; true/false are not numbers)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 < value < 65536:
        return None
    return "expected a TCP port, a whole number from 1 to 65535"


def proxy_jump_problem(value: Any, spec: Spec | None = None) -> str | None:
    """None when ``value`` is ``user@host:port`` with a valid login name
    (:func:`login_user_problem`), SSH host (:func:`ssh_host_problem`) and TCP port (1-65535),
    else what was expected."""
    if not isinstance(value, str):
        return "expected user@host:port"
    user, at, rest = value.partition("@")
    host, colon, port = rest.rpartition(":")
    if not (at and colon and port.isdigit() and 0 < int(port) < 65536):
        return "expected user@host:port"
    for problem in (login_user_problem(user), ssh_host_problem(host)):
        if problem:
            return f"expected user@host:port, {problem[len('expected '):]}"
    return None


def safe_path_problem(value: Any, spec: Spec | None = None) -> str | None:
    """Check for a file path given to ssh or written into its options: not empty, not starting
    with '-', no whitespace or control characters."""
    if not isinstance(value, str) or not value or value.startswith("-") or re.search(r"[\s\x00-\x1f\x7f]", value):
        return "expected a file path without spaces or control characters, not starting with '-'"
    return None


def existing_file(value: Any, spec: Spec | None = None) -> str | None:
    """Check: :func:`safe_path_problem`, and the file (``~`` expanded) exists."""
    problem = safe_path_problem(value, spec)
    if problem:
        return problem
    p = Path(value).expanduser()
    return None if p.is_file() else f"no such file {str(p)!r}; expected an existing file"


def read_small_text(path: Path | str, what: str, limit: int = 1 << 20) -> str:
    """The text of a small credential or configuration file (``~`` expanded).

    Raises:
        SiteError: missing, unreadable, larger than ``limit`` bytes, not UTF-8, or holding NUL
            bytes (binary junk); one line naming the file and ``what`` was expected.
    """
    p = Path(path).expanduser()
    try:
        with p.open("rb") as f:
            raw = f.read(limit + 1)
    except FileNotFoundError:
        raise SiteError(f"{p}: (file): no such file; expected {what}") from None
    except OSError as exc:
        raise SiteError(f"{p}: (file): cannot read it ({exc.strerror or exc}); expected {what}") from None
    if len(raw) > limit:
        raise SiteError(f"{p}: (file): larger than {limit} bytes; expected {what}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SiteError(f"{p}: (file): binary data at byte {exc.start}; expected {what}") from None
    if "\x00" in text:
        raise SiteError(f"{p}: (file): binary data (a NUL byte); expected {what}")
    return text


def read_json_object(path: Path | str, what: str) -> dict:
    """The JSON object in a small credential or configuration file (:func:`read_small_text`).

    Raises:
        SiteError: as read_small_text, or not JSON, or JSON but not an object; one line
            naming the file (and line) and ``what`` was expected.
    """
    p = Path(path).expanduser()
    text = read_small_text(p, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SiteError(f"{p}: line {exc.lineno}: not valid JSON; expected {what}") from None
    if not isinstance(data, dict):
        raise SiteError(f"{p}: (top level): a JSON {type(data).__name__}; expected {what}")
    return data


#: PEM/OpenSSH armour of a private key: RSA, EC, DSA, PKCS#8 (ENCRYPTED too) or OPENSSH
#: (RFC 7468 section 2; openssh PROTOCOL.key).
PRIVATE_KEY_RE = re.compile(r"-----BEGIN ((?:RSA |EC |DSA |ENCRYPTED |OPENSSH )?PRIVATE KEY)-----\r?\n"
                            r"(?:[A-Za-z0-9-]+: .*\r?\n)*\s*([A-Za-z0-9+/=\s]+?)-----END \1-----")


def private_key_problem(path: Path | str, what: str = "an SSH private key") -> str | None:
    """None when ``path`` holds a PEM or OpenSSH private key (armour and base64 body), else
    the one-line problem (naming the file). Does not decrypt it."""
    import base64
    import binascii

    try:
        text = read_small_text(path, what)
    except SiteError as exc:
        return str(exc)
    m = PRIVATE_KEY_RE.search(text)
    if m:
        try:
            base64.b64decode("".join(m.group(2).split()), validate=True)
            return None
        except (binascii.Error, ValueError):
            pass
    return f"{Path(path).expanduser()}: (content): expected {what} (-----BEGIN ... PRIVATE KEY----- with a base64 body)"


def public_key_problem(path: Path | str, what: str = "an SSH public key") -> str | None:
    """None when ``path`` holds one OpenSSH public key line ``<type> <base64> [comment]`` whose
    blob names the same type (sshd(8) AUTHORIZED_KEYS FILE FORMAT; RFC 4253 section 6.6),
    else the one-line problem naming the file."""
    import base64
    import binascii
    import struct

    try:
        text = read_small_text(path, what, limit=64 << 10)
    except SiteError as exc:
        return str(exc)
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    p = Path(path).expanduser()
    if len(lines) != 1:
        return f"{p}: (content): {len(lines)} key lines; expected {what} (one line: type, base64 key, comment)"
    parts = lines[0].split()
    try:
        blob = base64.b64decode(parts[1], validate=True) if len(parts) >= 2 else b""
        (n,) = struct.unpack(">I", blob[:4])
        ok = blob[4:4 + n].decode("ascii") == parts[0]
    except (binascii.Error, ValueError, struct.error, UnicodeDecodeError):
        ok = False
    return None if ok else f"{p}: (content): expected {what} (one line such as ssh-ed25519 AAAA... me@host)"


def check_options(site_cls: type["Site"], options: dict[str, Any] | None, spec: Spec) -> dict[str, Any]:
    """Validate ``options`` against ``site_cls.OPTIONS``; return them as a plain dict.

    Every key must be a declared option (or one of ``site_cls.HOOKS``, given by code as a
    non-text object: a runner, a client, an environment dict); every value must pass its
    option's check. Nothing is created or contacted here.

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
        problem = opt.check(value, spec) if opt.check else (
            None if isinstance(value, (str, int, float)) and not re.search(r"[\x00-\x1f\x7f]", str(value))
            else "expected text without control characters")
        if problem:
            raise SiteError(f"site {site_cls.name}: option {key}={value!r}{origin_of(options, key)}: {problem}")
        out[key] = value
    return out


@dataclass
class NodeLogin:
    """How the controller reaches one node over SSH.

    Attributes:
        name: node name from the spec (``client1``).
        host: SSH host name or address (IPv4, IPv6 or DNS name).
        port: SSH port (InstaGENI shares one public host among VMs on high ports).
        user: login user; Ansible escalates with sudo when it is not root.
        key_file: private key path, or None to use the SSH agent / defaults.
        proxy_jump: ``user@host:port`` of a jump host (FABRIC bastion, the local micro-VM),
            or None.
        extra: site-specific facts (sliver URN, management address, ...), kept in state.
    """

    name: str
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    proxy_jump: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


#: A node's private folder (``extra["node_dir"]``, the inventory's ``netrepro_node_dir``): an
#: absolute path of letters, digits and ``_./+@~-`` without a ``..`` part (the local site's
#: folders under ``.state/``, a static file's ``work_dir``): no space, quote, ``$``, ``{`` or ``%`` that a shell or Ansible's
#: templating would read.
NODE_DIR_RE = re.compile(r"(/[A-Za-z0-9_.+@~-]+)+")
#: A network device name a login names for a switch's port (``extra["ports"]`` values): 1-15
#: characters (IFNAMSIZ, netdevice(7)), not starting with '-' (the static file's schema).
DEVICE_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@:-]{0,14}")


def _optional(check: Check) -> Check:
    return lambda v, spec=None: None if v is None else check(v, spec)


def _node_dir_problem(value: Any, spec: Spec | None = None) -> str | None:
    ok = isinstance(value, str) and NODE_DIR_RE.fullmatch(value) and ".." not in value.split("/")
    return None if ok else "expected an absolute path of letters, digits and '_./+@~-'"


def _devices_problem(value: Any, spec: Spec | None = None) -> str | None:
    ok = isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) and DEVICE_RE.fullmatch(v)
                                         for k, v in value.items())
    return None if ok else "expected port -> network device name (1-15 characters, not starting with '-')"


#: What :func:`login_problem` checks of a login: field -> its check. The fields that reach
#: ssh's argv, a ProxyCommand (run by a shell), a known_hosts line or the inventory.
LOGIN_CHECKS: dict[str, Check] = {
    "host": ssh_host_problem,
    "port": port_problem,
    "user": login_user_problem,
    "key_file": _optional(safe_path_problem),
    "proxy_jump": _optional(proxy_jump_problem),
    "extra.proxy_key_file": _optional(safe_path_problem),
    "extra.node_dir": _optional(_node_dir_problem),
    "extra.ports": _optional(_devices_problem),
}


def login_problem(login: NodeLogin) -> tuple[str, Any, str] | None:
    """``(field, value, problem)`` of the first field of ``login`` that may not reach ssh
    (:data:`LOGIN_CHECKS`: ``host``, ``port``, ``user``, ``key_file``, ``proxy_jump``,
    ``extra.proxy_key_file``, ``extra.node_dir``, ``extra.ports``), else None. The one check of
    a login, when a site makes it (a static file, a manifest, a testbed's answer:
    :meth:`Site.save_logins`) and when it is read back from state.json
    (:func:`checked_logins`)."""
    extra = login.extra if isinstance(login.extra, dict) else None
    if extra is None:
        return "extra", login.extra, "expected a JSON object"
    for name, check in LOGIN_CHECKS.items():
        value = extra.get(name[6:]) if name.startswith("extra.") else getattr(login, name)
        problem = check(value, None)
        if problem:
            return name, value, problem
    return None


def checked_logins(raw: Any, where: str) -> dict[str, NodeLogin]:
    """Node name -> :class:`NodeLogin` from ``raw``, the ``logins`` object of a state.json
    (``where``: that file), each checked as when it was made (:func:`login_problem`).

    Raises:
        SiteError: one line ``<where>: logins.<node>.<field>: <value>: expected ...``: not an
            object of node name -> login, a field unknown or missing, or a value that may not
            reach ssh.
    """
    known = [f.name for f in fields(NodeLogin)]
    if not isinstance(raw, dict):
        raise SiteError(f"{where}: logins: expected an object of node name -> login, as netrepro writes it")
    out = {}
    for node, d in raw.items():
        if not isinstance(d, dict):
            raise SiteError(f"{where}: logins.{node}: expected an object with {', '.join(known)}")
        unknown = sorted(map(str, set(d) - set(known)))
        if unknown or "host" not in d:
            field_name, what = (unknown[0], "unknown field") if unknown else ("host", "missing")
            raise SiteError(f"{where}: logins.{node}.{field_name}: {what}; expected a login of {', '.join(known)}")
        login = NodeLogin(**{"name": node, **d})
        bad = ("name", login.name, f"expected the node's name {node!r}") if login.name != node else login_problem(login)
        if bad:
            name, value, problem = bad
            raise SiteError(f"{where}: logins.{node}.{name}: {value!r}: {problem}")
        out[node] = login
    return out


class Site(ABC):
    """Base class of every site. Subclasses set ``name`` and implement the abstract methods.

    Args:
        spec: the validated experiment.
        state_dir: this reservation's folder (created if missing); ``state.json`` inside.
        options: site options from the command line / environment (``AGGREGATE``, ...),
            checked against ``OPTIONS`` at once (:func:`check_options`; SiteError).
        copy: which of a campaign's parallel reservations of the topology this is, 1 to N
            (``--parallel N``; netrepro.runner.parallel). Copy 1 is the reservation a run
            without ``--parallel`` uses; a site that can hold several copies at once
            (:attr:`PARALLEL`) names each one's resources apart (a slice name's ``-<k>``, the
            k-th nodes file, namespaces of their own). SiteError for a copy above 1 of a site
            that cannot.
    """

    name: str = ""
    #: The options a user may give (``--option key=value`` or the variables of
    #: ``netrepro.sites.OPTION_ENV``): key -> :class:`Option`. Others are refused.
    OPTIONS: ClassVar[dict[str, Option]] = {}
    #: Keys code may pass with a non-text object (tests' fakes, an environment dict).
    HOOKS: ClassVar[tuple[str, ...]] = ()
    #: The environment variables the site reads besides its options' (an account's files and
    #: settings): name -> one line. docs/reference.md lists them (netrepro.cli.reference).
    ENV: ClassVar[dict[str, str]] = {}
    #: A trial's wall time before any trial of the run has been timed (the progress ETA and
    #: ``--dry-run``'s estimate): ``TRIAL_WALL_PER_SCHEDULED_S`` s per second of its schedule and
    #: base-RTT pings, plus ``TRIAL_OVERHEAD_S`` s. A site that runs trials in real time takes 1 s
    #: per second; its overhead (arming, the barrier, fetching) was 40-60 s on the local site's
    #: micro-VM in the full runs of docs/runs, more on a testbed far away.
    TRIAL_WALL_PER_SCHEDULED_S: ClassVar[float] = 1.0
    TRIAL_OVERHEAD_S: ClassVar[float] = 60.0
    #: True for a site whose reservation is this machine's own and free to build again (the
    #: local site): ``netrepro clean`` tears a live one down and empties its state folder, where
    #: it keeps the folder of any other site's live reservation (only ``down`` may release it).
    TEARDOWN_ON_CLEAN: ClassVar[bool] = False
    #: What netrepro writes into this site's state folder: names (or fnmatch patterns) of its
    #: top-level entries. ``netrepro clean`` removes these and keeps, naming it, anything else
    #: found there (netrepro.runner.clean). Every site's: the marker (and its name while it is
    #: written), state.json (and save_state's temporary file), and what the runner writes for a
    #: site's nodes: ssh/ (known_hosts), ansible/ (playbook logs) and facts/ (Ansible's fact
    #: cache). A site adds its own: ``STATE_ENTRIES = Site.STATE_ENTRIES + ("manifest.xml",)``.
    STATE_ENTRIES: ClassVar[tuple[str, ...]] = (STATE_MARKER, STATE_MARKER + ".tmp", "state.json", "state.tmp",
                                                "ssh", "ansible", "facts")
    #: Whether the site can hold several copies of a topology at once, one per reservation of a
    #: campaign run in parallel (``--parallel N``, netrepro.runner.parallel): a testbed's
    #: slices, the static site's nodes files, the local site's namespaces in host mode. False
    #: (the default): a copy above 1 is refused when the site is made.
    PARALLEL: ClassVar[bool] = False

    def __init__(self, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None, copy: int = 1):
        self.spec = spec
        self.state_dir = Path(state_dir)
        if not isinstance(copy, int) or isinstance(copy, bool) or copy < 1:
            raise SiteError(f"site {self.name}: copy {copy!r}: expected a whole number from 1")
        if copy > 1 and not self.PARALLEL:
            raise SiteError(self.parallel_refusal())
        self.copy = copy
        self.options = type(self).checked_options(spec, options)
        # the subprocesses of run_subprocess still running, and whether stop_subprocesses was called
        self._children: set[subprocess.Popen] = set()
        self._children_lock = threading.Lock()
        self._children_stopped = False

    @classmethod
    def parallel_refusal(cls) -> str:
        """The one line refusing ``--parallel`` above 1 on a site that is not :attr:`PARALLEL`."""
        return (f"site {cls.name}: --parallel: this site holds one reservation of an experiment at a time; expected "
                "--parallel 1" + ("; a simulating site runs trials at once with --jobs N"
                                  if getattr(cls, "SIMULATED", False) else ""))

    @classmethod
    def setup(cls, options: dict[str, str], check_only: bool = False, log=print) -> int:
        """The site's setup hook (``make setup SITE=<name>``, ``netrepro setup``): install what the
        site needs on the controller machine, idempotent, or with ``check_only`` say what it
        lacks and change nothing. ``options``: the site options given (``--option``), already
        checked against :attr:`OPTIONS`. Returns an exit status: 0 ready, 1 something missing
        (check only, or not root to install it). The base site needs nothing beyond the
        Python packages; a site that needs programs overrides it (netrepro.core.packages finds,
        names and installs Debian packages)."""
        log(f"[setup] site {cls.name}: nothing to install on this machine beyond the Python packages")
        return 0

    @classmethod
    def checked_options(cls, spec: Spec, options: dict[str, Any] | None) -> dict[str, Any]:
        """``options`` checked (:func:`check_options`), then the experiment checked against
        them (:meth:`check_experiment`); what the site is made with, and what ``plan`` and a
        dry run check before anything is built. Raises SiteError (one line)."""
        checked = check_options(cls, options, spec)
        cls.check_experiment(spec, checked, options)
        return checked

    @classmethod
    def check_experiment(cls, spec: Spec, options: dict[str, Any], given: dict[str, Any] | None = None) -> None:
        """Refuse (SiteError, one line) an experiment this site cannot build with ``options``
        (already checked; ``given``: as the user gave them, for where each came from). The
        base site refuses nothing; a site that makes names or addresses of its own overrides it."""

    # --- state ---------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def load_state(self) -> dict[str, Any]:
        """The saved state, or {} when nothing is reserved (:func:`read_state_file`)."""
        return read_state_file(self.state_file)

    def ensure_state_dir(self) -> Path:
        """Create this reservation's folder if missing, with its ownership marker
        (:func:`netrepro.sites.statefolder.make_state_dir`); every code path that creates the folder goes through here.
        Returns ``state_dir``."""
        return make_state_dir(self.state_dir, self.spec.name, self.name, self.copy)

    def save_state(self, state: dict[str, Any]) -> None:
        """Write state atomically (write to a temp file, then rename)."""
        self.ensure_state_dir()
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def saved_logins(self) -> dict[str, NodeLogin]:
        """Logins saved by a previous ``reserve``/``wait_ready`` (``state['logins']``), each
        checked again as when it was made (:func:`checked_logins`): a state.json is a file on
        disk, and what it names reaches ssh, a ProxyCommand and ``down``. Raises SiteError
        (one line naming the state file and the field)."""
        return checked_logins(self.load_state().get("logins", {}), str(self.state_file))

    def check_state(self) -> None:
        """Check offline that the saved state names only what netrepro made for this
        reservation, before ``down`` closes, deletes or stops anything it names: every login
        (:meth:`saved_logins`). A site whose :meth:`release` stops processes or deletes
        devices named in its state checks those too. Raises SiteError (one line naming the
        state file and the field)."""
        self.saved_logins()

    def save_logins(self, logins: dict[str, NodeLogin], **more: Any) -> None:
        """Save ``logins`` in the state, each first checked (:func:`login_problem`, the check
        :meth:`saved_logins` makes again). Raises SiteError (one line naming the node and the
        field) for a login that may not reach ssh (a testbed's or a file's answer)."""
        for n, lg in logins.items():
            bad = login_problem(lg)
            if bad:
                raise SiteError(f"site {self.name}: node {n}: {bad[0]}: {bad[1]!r}: {bad[2]}")
        state = self.load_state()
        state["logins"] = {n: asdict(lg) for n, lg in logins.items()}
        state.update(more)
        self.save_state(state)

    # --- the interface -----------------------------------------------------------------
    @abstractmethod
    def plan(self) -> str:
        """Human-readable description of exactly what ``reserve`` would request. No I/O."""

    @classmethod
    def refusal(cls, spec: Spec) -> tuple[str, str] | None:
        """``(field, problem)``: what this site, with its default options, would refuse of the
        experiment ``spec`` before reserving anything (``netrepro validate`` asks the default
        site), or None. Offline, for the class: no state, no options. Default: None."""
        return None

    @classmethod
    def describe_status(cls, status: dict) -> str:
        """One line on the substrate for ``make bench`` (netrepro.cli.bench), from ``status``: a
        run's run.json ``site_status`` as this site's :meth:`status` recorded it (an empty dict
        when it is not an object; its fields may be missing or junk in an old or hand-edited
        run). Offline, for the class. Default: that no forwarding capacity was measured."""
        return "forwarding capacity not measured"

    def preflight(self) -> None:
        """Check offline everything ``reserve`` will need (files, credentials, configuration),
        creating, writing and contacting nothing; ``reserve`` calls it first. A caller may
        call it earlier, before it writes anything itself. Default: nothing to check.

        Raises:
            SiteError / SpecError: one line naming the file, field or option.
        """

    @abstractmethod
    def reserve(self) -> None:
        """Request the resources. Raises SiteError with a clear message when it cannot."""

    @abstractmethod
    def wait_ready(self, timeout_s: float = 1800) -> None:
        """Block until every node accepts SSH, printing progress; SiteError on timeout."""

    def logins(self) -> dict[str, NodeLogin]:
        """Node name -> NodeLogin, for every node of the spec. Default: the saved logins."""
        logins = self.saved_logins()
        if not logins:
            raise SiteError(f"site {self.name}: nothing reserved for {self.spec.name} (state {self.state_file}); run `make up` first")
        return logins

    def renew(self, hours: float) -> None:
        """Set the reservation's lease to end ``hours`` from now, never earlier than it ends: a
        site reads the lease's current end first, and when that is not before the end asked it
        prints :func:`lease_kept_line` and changes nothing at the testbed. Default: nothing
        expires."""

    def lease_end(self) -> float | None:
        """When the reservation's lease ends (epoch seconds), or None when it does not end
        (the default). The runner renews a lease that would end before the next trial does."""
        return None

    def held(self) -> str | None:
        """One line naming what this site holds for the experiment that someone must release
        (a testbed's slice, its aggregate, its expiry, the command that releases it), or None
        (the default: nothing that outlives this machine)."""
        return None

    @abstractmethod
    def release(self) -> None:
        """Give every resource back. Idempotent: releasing twice is harmless."""

    @classmethod
    def default_jobs(cls, options: dict[str, Any]) -> int | None:
        """How many trial instances a run with the site's ``options`` runs at once when
        ``--jobs`` does not say; None (the default): the runner's
        (netrepro.runner.instances.checked_jobs)."""
        return None

    def documents(self) -> dict[str, Path]:
        """The files that describe this reservation as the site granted it, kept with every
        run that uses it (the run folder's ``site/``, netrepro.runfolder.writing.keep_site_documents):
        file name (netrepro.runfolder.layout.SITE_DOCUMENT_RE) -> its path. A testbed's request and manifest, a
        slice's description; none by default (a site whose status says all of it)."""
        return {}

    def status(self) -> dict[str, Any]:
        """A small dict describing the reservation (state, expiry, nodes)."""
        st = self.load_state()
        return {"site": self.name, "reserved": bool(st.get("logins")), **{k: v for k, v in st.items() if k != "logins"}}

    # --- subprocesses of this machine (a simulating site's trials) ---------------------
    def run_subprocess(self, argv: list[str]) -> subprocess.CompletedProcess:
        """Run ``argv`` to its end with its stdout and stderr captured as text, as
        ``subprocess.run(argv, capture_output=True, text=True)`` does, but so that another
        thread can stop it (:meth:`stop_subprocesses`: several trials simulated at once in
        threads, stopped by the main thread on Ctrl-C or SIGTERM). An exception in the calling
        thread while it waits (KeyboardInterrupt) kills it first, as ``subprocess.run`` does.

        Returns the ``subprocess.CompletedProcess``; a process stopped by
        :meth:`stop_subprocesses` has the negative returncode of its signal (-15, or -9).

        Raises:
            SiteError: :meth:`stop_subprocesses` was called on this site: nothing is started.
            OSError: ``argv[0]`` cannot be run.
        """
        with self._children_lock:
            if self._children_stopped:
                raise SiteError(f"site {self.name}: stopped; {Path(argv[0]).name} was not started")
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self._children.add(p)
        try:
            out, err = p.communicate()
        except BaseException:
            p.kill()
            p.wait()
            raise
        finally:
            with self._children_lock:
                self._children.discard(p)
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def stop_subprocesses(self, grace_s: float = 5.0) -> int:
        """Stop every subprocess :meth:`run_subprocess` is running, from any thread: SIGTERM,
        then SIGKILL for one still running after ``grace_s`` seconds; from then on
        :meth:`run_subprocess` starts nothing on this site object (SiteError). Returns how
        many were running."""
        with self._children_lock:
            self._children_stopped = True
            children = list(self._children)
        for p in children:
            try:
                p.send_signal(signal.SIGTERM)
            except OSError:  # it ended meanwhile
                pass
        deadline = time.monotonic() + grace_s
        for p in children:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        return len(children)

    # --- hooks used by the controller ------------------------------------------------
    def ansible_env(self) -> dict[str, str]:
        """Extra environment for ansible-playbook (e.g. ControlPath). Default: none."""
        return {}

    def inventory_vars(self) -> dict[str, Any]:
        """Extra ``all.vars`` for the inventory (e.g. ``netrepro_site_kind``)."""
        return {}


_T = TypeVar("_T")


def at_once(fn: Callable[[_T], Any], items: Iterable[_T], max_workers: int | None = None) -> list[Any]:
    """``fn`` of each of ``items``, called in threads (at most ``max_workers`` at once; default
    one per item), the results in the order given. For questions to the nodes that wait on
    the network and on the node (an SSH handshake through a jump host takes seconds): asked
    one after another, N nodes wait N times as long. The first exception, in the order
    given, is raised once every call has returned."""
    items = list(items)
    if len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(max_workers or len(items), len(items))) as pool:
        return list(pool.map(fn, items))


def interfaces_text(spec: Spec, node: str) -> str:
    """One line of ``node``'s experiment interfaces for a site's plan:
    ``key=A.B.C.D/N`` for each addressed one, ``key (port)`` for a switch's port
    (:meth:`netrepro.model.Model.data_plane`)."""
    return ", ".join(f"{k}={i['address']}/{i['prefixlen']}" if i["address"] else f"{k} (port)"
                     for k, i in spec.model.data_plane(node).items())


def process_group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a process (``killpg(pgid, 0)``, kill(2)); False when
    it has none or this user may not signal it. The local site's micro-VM and the runner's
    ansible-playbook runs are each a group of their own."""
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


#: Site name -> ``module:Class``; :func:`site_class` imports a site's module only when it is
#: used, so a site's optional dependencies (fablib, ...) are needed only by users of that site.
SITES: dict[str, str] = {
    "local": "netrepro.sites.local.site:LocalSite",
    "instageni": "netrepro.sites.instageni.site:InstaGENISite",
    "fabric": "netrepro.sites.fabric.site:FabricSite",
    "static": "netrepro.sites.static.site:StaticSite",
    "ns3": "netrepro.sites.ns3.site:Ns3Site",
}
#: The site a command uses when none is named (no account needed: README, Makefile's SITE).
DEFAULT_SITE = "local"


def read_state_file(path: Path) -> dict[str, Any]:
    """A site's saved run state, ``path`` (``<state folder>/state.json``) as :meth:`Site.save_state`
    wrote it, or {} when there is no such file. Raises SiteError (one line naming the file and
    what was expected) when it cannot be read, is not JSON, or is not a JSON object."""
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_bytes())
    except (ValueError, OSError) as exc:
        raise SiteError(f"{path}: (file): unreadable run state ({exc}); expected the JSON netrepro "
                        "wrote; release the site by hand if it holds resources, then delete the file") from None
    if not isinstance(state, dict):
        raise SiteError(f"{path}: (top level): expected a JSON object (the run state netrepro wrote)")
    return state


def site_class(name: str) -> type[Site]:
    """The Site subclass registered as ``name``. Raises SiteError for an unknown name."""
    if name not in SITES:
        raise SiteError(f"SITE={name}: unknown site; expected one of: {', '.join(SITES)}")
    module, _, cls = SITES[name].partition(":")
    return getattr(importlib.import_module(module), cls)
