"""A GENI portal account (CloudLab, Emulab, POWDER), read and checked offline.

From a geni-lib context file or environment variables (:data:`ENV_VARS`,
:func:`load_credentials`): the portal's certificate and key, the user, the project and the
SSH keys; missing pieces fail at once, naming them. The key's passphrase stays in memory.
"""

from __future__ import annotations

import datetime as dt
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from netrepro.sites.errors import SiteError
from netrepro.sites.login import (PRIVATE_KEY_RE, private_key_problem, public_key_problem, read_json_object,
                                  read_small_text)

#: geni-lib's default context file (written by its ``build-context`` / ``context-from-bundle``).
DEFAULT_CONTEXT = "~/.bssw/geni/context.json"

#: Environment variables read by :func:`load_credentials` (listed in docs/reference.md, with
#: NETREPRO_AGGREGATES: :attr:`InstaGENISite.ENV`).
ENV_VARS = {
    "NETREPRO_GENI_CONTEXT": f"geni-lib context JSON (default {DEFAULT_CONTEXT})",
    "NETREPRO_GENI_CERT": "PEM from the portal's 'Download Credentials' (certificate + key)",
    "NETREPRO_GENI_KEY": "private key PEM, if not inside the certificate file",
    "NETREPRO_GENI_KEY_PASSPHRASE": "passphrase of that key (asked on a terminal if unset)",
    "NETREPRO_GENI_PROJECT": "portal project the slice belongs to",
    "NETREPRO_GENI_USER": "portal user name (login user on the nodes)",
    "NETREPRO_GENI_PUBKEY": "SSH public key installed on the nodes (default ~/.ssh/id_ed25519.pub or id_rsa.pub)",
    "NETREPRO_GENI_SSH_KEY": "matching SSH private key used by Ansible (default: the .pub path without .pub)",
}


@dataclass
class GeniCredentials:
    """A portal account: certificate/key (PEM paths), user name and URN, project, SSH keys.
    ``passphrase`` (of the key) is kept in memory only and never shown (``repr`` omits it)."""

    cert: str
    key: str
    user: str
    user_urn: str
    project: str
    pubkey: str
    ssh_key: str | None
    passphrase: str | None = field(default=None, repr=False)


#: The context file's keys that hold text (geni-lib ``build-context`` output).
CONTEXT_TEXT_KEYS = ("cert-path", "key-path", "user-name", "user-urn", "user-pubkeypath", "project")


def read_context(path: Path) -> dict[str, Any]:
    """The geni-lib context JSON at ``path`` as a dict ({} when the file does not exist).

    Raises:
        SiteError: binary junk, not JSON, not a JSON object, or a known key that is not text
            (one line naming the file and the field).
    """
    if not path.is_file():
        return {}
    what = "a geni-lib context file (a JSON object with cert-path, user-name, project, ...)"
    ctx = read_json_object(path, what)
    for key in CONTEXT_TEXT_KEYS:
        if key in ctx and not (isinstance(ctx[key], str) and ctx[key].strip()):
            raise SiteError(f"{path}: {key}: expected text, got {ctx[key]!r}")
    return ctx


#: What the certificate file must be, for messages.
PORTAL_PEM = "the PEM from the portal's Download Credentials (NETREPRO_GENI_CERT / cert-path)"


def check_certificate_dates(path: str, text: str, now: dt.datetime | None = None) -> None:
    """Check offline that the first certificate of the PEM ``text`` (file ``path``) is valid
    at ``now`` (UTC; default the present), as a portal checks it on every call: the portal's
    Download Credentials certificate is valid for a limited time (CloudLab: about a year) and
    an expired one is refused by every service. Read with the ``cryptography`` library.

    Raises:
        SiteError: not a PEM certificate, expired, or not yet valid (one line naming the file,
            the date, and where to get a new one).
    """
    from cryptography import x509

    now = now or dt.datetime.now(dt.timezone.utc)
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise SiteError(f"{path}: (content): no certificate; expected {PORTAL_PEM}")
    try:
        cert = x509.load_pem_x509_certificate(text.encode())
    except ValueError:
        raise SiteError(f"{path}: (content): not a readable PEM certificate; expected {PORTAL_PEM}") from None
    if cert.not_valid_after_utc < now:
        raise SiteError(f"{path}: (certificate): expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; expected a "
                        "current one: download your credentials again from the portal (Download Credentials), "
                        "nothing was requested")
    if cert.not_valid_before_utc > now:
        raise SiteError(f"{path}: (certificate): not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC; "
                        "expected a current one (is this machine's clock right?), nothing was requested")


def load_client_cert(ctx: ssl.SSLContext, creds: GeniCredentials,
                     ask: Callable[[str], str] | None = None) -> None:
    """Load the portal certificate and its key into ``ctx``, checking them offline.

    The key's passphrase is ``creds.passphrase``, else asked with ``ask(prompt)`` (getpass on
    a terminal) and kept in ``creds`` for the next context; OpenSSL is never left to prompt
    by itself. The passphrase is never written or printed.

    Raises:
        SiteError: the certificate or key file is junk, the key is encrypted and no passphrase
            is available, the passphrase is wrong, or key and certificate do not match (one
            line naming the file).
    """
    what = PORTAL_PEM
    cert_text = read_small_text(creds.cert, what)
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise SiteError(f"{creds.cert}: (content): no certificate; expected {what}")
    check_certificate_dates(creds.cert, cert_text)
    key_what = "the private key of that certificate (in the same PEM, or NETREPRO_GENI_KEY / key-path)"
    key_text = cert_text if creds.key == creds.cert else read_small_text(creds.key, key_what)
    m = PRIVATE_KEY_RE.search(key_text)
    if not m:
        raise SiteError(f"{creds.key}: (content): no private key; expected {key_what}")
    encrypted = "ENCRYPTED" in m.group(0)
    if encrypted and creds.passphrase is None and ask is not None:
        creds.passphrase = ask(f"Passphrase for {creds.key}: ")
    if encrypted and not creds.passphrase:
        raise SiteError(f"{creds.key}: (key): protected by a passphrase; expected it in NETREPRO_GENI_KEY_PASSPHRASE "
                        "(or run on a terminal to type it)")
    pw = creds.passphrase or ""
    try:
        ctx.load_cert_chain(creds.cert, creds.key, password=lambda: pw)
    except ssl.SSLError as exc:
        if encrypted and exc.reason != "KEY_VALUES_MISMATCH":
            raise SiteError(f"{creds.key}: (key): the passphrase does not decrypt it; expected the passphrase you "
                            "chose on the portal (NETREPRO_GENI_KEY_PASSPHRASE or typed)") from None
        raise SiteError(f"{creds.cert}: (content): certificate and key do not load together ({exc.reason or 'damaged'}); "
                        f"expected {what}") from None


def load_credentials(env: dict[str, str] | None = None) -> GeniCredentials:
    """Read the account from the geni-lib context file and/or ``NETREPRO_GENI_*`` variables.

    Order: the context JSON (``$NETREPRO_GENI_CONTEXT`` or ~/.bssw/geni/context.json; keys
    ``cert-path``, ``key-path``, ``user-name``, ``user-urn``, ``user-pubkeypath``,
    ``project``), each then overridden by its environment variable. No network.

    Raises:
        SiteError: one line naming every missing piece and where to set it; or naming a
            context or public key file whose content is junk. (The certificate and key are
            checked by :func:`load_client_cert`.)
    """
    env = dict(os.environ if env is None else env)
    ctx_path = Path(env.get("NETREPRO_GENI_CONTEXT") or DEFAULT_CONTEXT).expanduser()
    ctx = read_context(ctx_path)
    cert = env.get("NETREPRO_GENI_CERT") or ctx.get("cert-path")
    key = env.get("NETREPRO_GENI_KEY") or ctx.get("key-path") or cert
    user = env.get("NETREPRO_GENI_USER") or ctx.get("user-name")
    project = env.get("NETREPRO_GENI_PROJECT") or ctx.get("project")
    pubkey = env.get("NETREPRO_GENI_PUBKEY") or ctx.get("user-pubkeypath")
    if not pubkey:
        for cand in ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub"):
            if Path(cand).expanduser().is_file():
                pubkey = cand
                break
    missing = []
    if not cert or not Path(cert).expanduser().is_file():
        missing.append(f"certificate (NETREPRO_GENI_CERT, or cert-path in {ctx_path}){': ' + cert + ' not found' if cert else ''}")
    if not user:
        missing.append(f"user name (NETREPRO_GENI_USER, or user-name in {ctx_path})")
    if not project:
        missing.append(f"project (NETREPRO_GENI_PROJECT, or project in {ctx_path})")
    if not pubkey or not Path(pubkey).expanduser().is_file():
        missing.append(f"SSH public key (NETREPRO_GENI_PUBKEY, or user-pubkeypath in {ctx_path})")
    if missing:
        raise SiteError("site instageni: no GENI credentials: missing " + "; ".join(missing)
                        + ". Download them from your CloudLab/Emulab portal (Download Credentials) and see docs/sites/instageni.md")
    problem = public_key_problem(pubkey, "the SSH public key to install on the nodes (NETREPRO_GENI_PUBKEY)")
    if problem:
        raise SiteError(problem)
    ssh_key = env.get("NETREPRO_GENI_SSH_KEY")
    if ssh_key:
        problem = private_key_problem(ssh_key, "the SSH private key for the nodes (NETREPRO_GENI_SSH_KEY)")
        if problem:
            raise SiteError(problem)
    if not ssh_key and str(pubkey).endswith(".pub"):
        ssh_key = str(pubkey)[:-4]
    return GeniCredentials(
        cert=str(Path(cert).expanduser()), key=str(Path(key).expanduser()), user=user,
        user_urn=ctx.get("user-urn") or f"urn:publicid:IDN+emulab.net+user+{user}",
        project=project, pubkey=str(Path(pubkey).expanduser()),
        ssh_key=str(Path(ssh_key).expanduser()) if ssh_key else None,
        passphrase=env.get("NETREPRO_GENI_KEY_PASSPHRASE"))


