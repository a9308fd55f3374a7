"""A user's account files for the instageni site, pointing at a test aggregate.

What an evaluator has after following docs/sites/cloudlab.md: the portal's PEM (certificate
and encrypted key), an SSH key pair, a geni-lib context naming them, and an aggregates file
(``NETREPRO_AGGREGATES``) naming the aggregate's URLs and CA. :func:`write_account` writes
them into a folder and returns the environment that makes netrepro use them.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

#: The passphrase of the test user's key (given to netrepro as NETREPRO_GENI_KEY_PASSPHRASE).
PASSPHRASE = "portal secret"


def write_account(base: Path, agg, user: str = "alice", cert: Path | None = None,
                  aggregates: str | None = None, project: str = "netrepro-ae") -> tuple[dict[str, str], Path]:
    """Write the account of ``user`` at ``agg`` (a TestAggregate) into ``base``.

    ``cert``: the PEM to use (default: a current one the aggregate's CA signs, key encrypted
    with :data:`PASSPHRASE`); ``aggregates``: the aggregates file's text (default: the
    aggregate's own). Returns (the environment: this process's without NETREPRO_*, GENI_* and
    AGGREGATE variables, plus the account's, and state, inventories and results under ``base``, so
    that tests run side by side share none of them; the PEM's path).
    """
    base = Path(base)
    base.mkdir(parents=True, exist_ok=True)
    urn = f"urn:publicid:IDN+emulab.net+user+{user}"
    cert = cert or agg.pki.portal_user(urn, passphrase=PASSPHRASE.encode())
    key = base / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "evaluator", "-f", str(key)], check=True)
    ctx = {"framework": "emulab-ch2", "cert-path": str(cert), "key-path": str(cert), "user-name": user,
           "user-urn": urn, "user-pubkeypath": str(key) + ".pub", "project": project}
    (base / "context.json").write_text(json.dumps(ctx, indent=1) + "\n")
    (base / "aggregates.yml").write_text(aggregates or agg.aggregates_yaml())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETREPRO_", "GENI_", "AGGREGATE"))}
    env.update({"NETREPRO_AGGREGATES": str(base / "aggregates.yml"), "NETREPRO_GENI_CONTEXT": str(base / "context.json"),
                "NETREPRO_GENI_KEY_PASSPHRASE": PASSPHRASE,
                "NETREPRO_STATE": str(base / "state"), "NETREPRO_INVENTORY": str(base / "inventory"),
                "NETREPRO_RESULTS": str(base / "results")})
    return env, cert
