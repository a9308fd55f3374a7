"""How netrepro logs into a node: :class:`NodeLogin`, the one check of every field that
reaches ssh, a ProxyCommand or the inventory (:func:`login_problem`, :func:`checked_logins`
for a state.json's logins), the checks of login names, hosts, ports and paths, and of the
small files a login or an account uses (:func:`read_small_text`, SSH keys)."""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from netrepro.experiment.spec import Spec
from netrepro.sites.errors import SiteError
from netrepro.sites.options import Validator


#: A login name: POSIX portable user name characters, not starting with '-' (useradd(8)).
LOGIN_USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
#: A DNS host name (RFC 1123 labels: letters, digits, '-' inside, '.' between).
HOSTNAME_RE = re.compile(r"(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")


def login_user_problem(value: Any, spec: Spec | None = None) -> str | None:
    """Validator for a login user passed to ssh: letters, digits, '.', '_', '-', not starting with '-'
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
    """Validator for an SSH host: a DNS name (RFC 1123), an IPv4 or a bare IPv6 address (Python's
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
    """Validator for a TCP port: a whole number from 1 to 65535 (RFC 793; true/false are not numbers)."""
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
    """Validator for a file path given to ssh or written into its options: not empty, not starting
    with '-', no whitespace or control characters."""
    if not isinstance(value, str) or not value or value.startswith("-") or re.search(r"[\s\x00-\x1f\x7f]", value):
        return "expected a file path without spaces or control characters, not starting with '-'"
    return None


def existing_file(value: Any, spec: Spec | None = None) -> str | None:
    """Validator: :func:`safe_path_problem`, and the file (``~`` expanded) exists."""
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


def _optional(check: Validator) -> Validator:
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
LOGIN_CHECKS: dict[str, Validator] = {
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
