"""Serve the test aggregate (or the FABRIC stand-in) until Ctrl-C, with real nodes behind it, to walk the testbed path by hand.

    cd tests && python -m testbed.serve ../experiments/pie-vs-red/experiment.yml --mode vm --dir /tmp/agg
    cd tests && python -m testbed.serve data/experiments/gateway-fifo.yml --site fabric --dir /tmp/fab

writes an account in ``--dir`` (portal PEM, SSH key, geni-lib context, aggregates file; see
:mod:`testbed.account`), prints the variables to export, and serves until interrupted (or
SIGTERM), then tears down any nodes still built. With those variables set, the commands of
docs/sites/cloudlab.md run against it, e.g.
``make reproduce-pie-vs-red SITE=instageni INSTALL_PACKAGES=false``. ``--profile spec`` serves
AM API v3 as its specification writes it instead of ProtoGENI's choices (see
:mod:`testbed.aggregate`). Each call is printed as
it is answered; the counts by method are printed at the end. Root (the nodes are the local
site's).

``--site fabric`` serves the FABRIC stand-in (:mod:`testbed.fabric`) instead: the account is a
fabric_rc, token and keys, the nodes are built in host mode (their login user, ``ubuntu``,
needs the host's /etc), so the experiment's qdiscs must be in this kernel; then
``netrepro reproduce <experiment> --site fabric --option fabric_site=UTAH --option
install_packages=false`` runs against it.
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path

from testbed.account import write_account
from testbed.aggregate import AM_PATH, MA_PATH, PROFILES, SA_PATH, TestAggregate, counts
from testbed.fabric import TestFabric
from testbed.nodes import LocalNodes
from testbed.pki import TestPKI

#: The services' short names, for the call lines.
SERVICE = {MA_PATH: "member authority", SA_PATH: "slice authority", AM_PATH: "aggregate"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("experiment", help="the experiment file whose nodes the aggregate builds")
    ap.add_argument("--mode", choices=("host", "vm"), default="vm", help="the local site's mode for the nodes")
    ap.add_argument("--dir", required=True, help="a new folder for the account, the CA and the nodes' state")
    ap.add_argument("--user", default="root", help="the portal user (the nodes log in as root)")
    ap.add_argument("--site", choices=("instageni", "fabric"), default="instageni", help="the services to stand in for")
    ap.add_argument("--profile", choices=PROFILES, default="protogeni",
                    help="the test aggregate's profile: protogeni (CloudLab's choices) or spec (AM API v3 as written)")
    args = ap.parse_args(argv)
    base = Path(args.dir).resolve()
    if args.site == "fabric":
        return serve_fabric(Path(args.experiment), base)
    agg = TestAggregate(TestPKI(base / "pki"), builder=LocalNodes(Path(args.experiment), base / "aggregate",
                                                                   mode=args.mode), profile=args.profile)
    env, _ = write_account(base / "account", agg, user=args.user)
    exports = {k: env[k] for k in ("NETREPRO_AGGREGATES", "NETREPRO_GENI_CONTEXT", "NETREPRO_GENI_KEY_PASSPHRASE")}
    return _serve(exports, f"test aggregate ({args.profile} profile) at {agg.url()}", agg.calls,
                  lambda call: f"{SERVICE[call[0]]} {call[1]}: geni_code {call[2]}",
                  lambda: f"calls: {counts(agg.calls)}", agg.close)


def serve_fabric(experiment: Path, base: Path) -> int:
    """Serve the FABRIC stand-in with host-mode nodes of ``experiment`` until SIGINT/SIGTERM."""
    fab = TestFabric(base / "fabric", builder=LocalNodes(experiment, base / "nodes"), experiment=experiment)
    env = fab.write_account(base / "account")
    return _serve({k: env[k] for k in ("FABRIC_RC", "REQUESTS_CA_BUNDLE")},
                  f"FABRIC stand-in at https://{fab.address} (bastion {fab.address}:22)", fab.calls,
                  lambda call: f"{call[0]} {call[1]}: HTTP {call[2]}",
                  lambda: f"{len(fab.calls)} requests; still reserved: {fab.reserved() or 'nothing'}", fab.close)


def _serve(exports: dict[str, str], what: str, calls: list, line, summary, close) -> int:
    """Print the ``exports`` and what is served, then each call of ``calls`` (a list the server
    appends to) as ``line(call)`` until SIGINT or SIGTERM; then ``summary()`` and ``close()``."""
    for k, v in exports.items():
        print(f"export {k}={shlex.quote(v)}")
    print(f"# {what}; Ctrl-C stops it", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())   # also when started with SIGINT ignored (a background job)
    seen = 0
    try:
        while not done.wait(0.5):
            for call in calls[seen:]:
                print(f"# {line(call)}", file=sys.stderr, flush=True)
            seen = len(calls)
    finally:
        print(f"# {summary()}", file=sys.stderr)
        close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
