"""Serve the test aggregate until Ctrl-C, with real nodes behind it, to walk the testbed path by hand.

    cd tests && python -m testbed.serve ../experiments/pie-vs-red/experiment.yml --mode vm --dir /tmp/agg

writes an account in ``--dir`` (portal PEM, SSH key, geni-lib context, aggregates file; see
:mod:`testbed.account`), prints the variables to export, and serves until interrupted (or
SIGTERM), then tears down any nodes still built. With those variables set, the commands of
docs/sites/cloudlab.md run against it, e.g.
``make reproduce-pie-vs-red SITE=instageni INSTALL_PACKAGES=false``. Each call is printed as
it is answered; the counts by method are printed at the end. Root (the nodes are the local
site's).
"""

from __future__ import annotations

import argparse
import shlex
import signal
import sys
import threading
from pathlib import Path

from testbed.account import write_account
from testbed.aggregate import AM_PATH, MA_PATH, SA_PATH, TestAggregate, counts
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
    args = ap.parse_args(argv)
    base = Path(args.dir).resolve()
    agg = TestAggregate(TestPKI(base / "pki"), builder=LocalNodes(Path(args.experiment), base / "aggregate",
                                                                   mode=args.mode))
    env, _ = write_account(base / "account", agg, user=args.user)
    for k in ("NETREPRO_AGGREGATES", "NETREPRO_GENI_CONTEXT", "NETREPRO_GENI_KEY_PASSPHRASE"):
        print(f"export {k}={shlex.quote(env[k])}")
    print(f"# test aggregate at {agg.url()}; Ctrl-C stops it", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())   # also when started with SIGINT ignored (a background job)
    seen = 0
    try:
        while not done.wait(0.5):
            for path, method, code in agg.calls[seen:]:
                print(f"# {SERVICE[path]} {method}: geni_code {code}", file=sys.stderr, flush=True)
            seen = len(agg.calls)
    finally:
        print(f"# calls: {counts(agg.calls)}", file=sys.stderr)
        agg.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
