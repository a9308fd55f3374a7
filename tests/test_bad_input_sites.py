"""Bad-input table: sites, site options, credentials and configuration (issue 6, section 2).

Each row is something a user types or has lying around: a mistyped ``--option``, a variable
the chosen site does not know, a static nodes file whose login fields would be read by ssh
as options, a geni-lib context holding ``[]``, a broken ``NETREPRO_AGGREGATES``, a complete
``FABRIC_RC`` whose files are junk, a junk certificate, a wrong passphrase, a missing CA
bundle. Every row runs the real command line (``python -m netrepro ...``) and must get one
line on stderr naming the file, field or option and what was expected, exit 2, and no file
changed (tests/badinput.py). No row reaches the network or builds anything: every input is
refused before (static nodes are TEST-NET-1 addresses, RFC 5737, never contacted).

Keys and certificates are made per row (ssh-keygen; ``cryptography``) in the row's folder;
``HOME`` points there too, so nothing of the user running the tests is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from badinput import Row, run_row
from netrepro.experiment.spec import load_spec
from netrepro.sites.statefolder import make_state_dir
from test_sites_common import make_cert, pem, portal_pem, ssh_keypair

TESTS = Path(__file__).resolve().parent
MANIFEST = TESTS / "data" / "rspec" / "manifest" / "cloudlab-utah-2node-CS244-oncache.xml"  # see ../SOURCE.md
JUNK = bytes(range(256)) * 4   # binary junk: every byte value, NULs included
WRONG_PASSPHRASE = "not-the-portal-passphrase-4711"
SPEC = load_spec("pie-vs-red")


# --- static nodes files ------------------------------------------------------------------------
def static_file(change=None, raw: bytes | None = None):
    """A setup writing {tmp}/s.yml: every node of pie-vs-red on a TEST-NET-1 address with a
    real key in {tmp}/home/.ssh, then ``change(nodes)``; or the bytes ``raw``."""

    def setup(tmp: Path):
        home = tmp / "home"
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        key = ssh_keypair(home / ".ssh", "id_ed25519")
        if raw is not None:
            (tmp / "s.yml").write_bytes(raw)
        else:
            nodes = {n: {"host": f"192.0.2.{10 + i}", "user": "ubuntu", "key": str(key),
                         "addresses": {x.network: x.ip for x in nd.interfaces.values()}}
                     for i, (n, nd) in enumerate(SPEC.nodes.items())}
            if change:
                change(nodes, tmp)
            (tmp / "s.yml").write_text(yaml.safe_dump({"nodes": nodes}))
        return {"HOME": str(home)}

    return setup


STATIC_UP = ["up", "pie-vs-red", "--site", "static", "-o", "static_file={tmp}/s.yml"]


def two_static_files(change=None):
    """A setup writing {tmp}/s.yml (:func:`static_file`) and {tmp}/t.yml, the same nodes on
    other TEST-NET-2 addresses (RFC 5737), then ``change(nodes of t.yml, nodes of s.yml)``."""

    def setup(tmp: Path):
        env = static_file()(tmp)
        first = yaml.safe_load((tmp / "s.yml").read_text())["nodes"]
        second = {n: {**e, "host": f"198.51.100.{10 + i}"} for i, (n, e) in enumerate(first.items())}
        if change:
            change(second, first)
        (tmp / "t.yml").write_text(yaml.safe_dump({"nodes": second}))
        return env

    return setup


def forged_copy(logins, site: str = "static"):
    """A setup making ``{tmp}/state/pie-vs-red-<site>.2/`` as netrepro makes a parallel copy's
    state folder (its marker), whose state.json holds ``logins`` (``{tmp}`` replaced), and
    ``{tmp}/victim``, a file a forged ControlPath would name."""

    def setup(tmp: Path):
        folder = make_state_dir(tmp / "state" / f"pie-vs-red-{site}.2", "pie-vs-red", site, 2)
        text = json.dumps({"logins": logins, "static_file": "s.yml"}).replace("{tmp}", str(tmp))
        (folder / "state.json").write_text(text)
        (tmp / "victim").write_text("a file of the user's\n")

    return setup


#: A login as the static site saves it.
LOGIN = {"name": "router", "host": "192.0.2.10", "port": 22, "user": "root", "key_file": None, "proxy_jump": None,
         "extra": {}}
STATIC_DOWN = ["down", "pie-vs-red", "--site", "static"]


# --- GENI credentials --------------------------------------------------------------------------
def geni(context=None, cert: bytes | None = None, pubkey: bytes | None = None, aggregates: str | bytes | None = None,
         passphrase: str | None = None, ca_bundle: bytes | None = None):
    """A setup making a complete GENI account in {tmp} (geni-lib context, portal PEM with an
    encrypted key, SSH key pair), then replacing one piece with junk. Returns the
    NETREPRO_GENI_* / NETREPRO_AGGREGATES variables pointing at it (HOME = {tmp}/home)."""

    def setup(tmp: Path):
        home = tmp / "home"
        (home / ".ssh").mkdir(parents=True, exist_ok=True)
        ssh_keypair(home / ".ssh", "id_ed25519")
        portal_pem(tmp / "cloudlab.pem", b"the portal passphrase")
        if cert is not None:
            (tmp / "cloudlab.pem").write_bytes(cert)
        if pubkey is not None:
            (home / ".ssh" / "id_ed25519.pub").write_bytes(pubkey)
        ctx = {"framework": "emulab-ch2", "cert-path": str(tmp / "cloudlab.pem"), "user-name": "alice",
               "user-urn": "urn:publicid:IDN+emulab.net+user+alice", "project": "netrepro",
               "user-pubkeypath": str(home / ".ssh" / "id_ed25519.pub")}
        (tmp / "context.json").write_bytes(context if isinstance(context, bytes) else json.dumps(ctx).encode())
        env = {"HOME": str(home), "NETREPRO_GENI_CONTEXT": str(tmp / "context.json")}
        if passphrase is not None:
            env["NETREPRO_GENI_KEY_PASSPHRASE"] = passphrase
        if ca_bundle is not None:
            (tmp / "ca.pem").write_bytes(ca_bundle)
        if aggregates is not None:
            (tmp / "aggs.yml").write_bytes(aggregates if isinstance(aggregates, bytes) else aggregates.encode())
            env["NETREPRO_AGGREGATES"] = str(tmp / "aggs.yml")
        return env

    return setup


GENI_UP = ["up", "pie-vs-red", "--site", "instageni"]
#: An aggregates file trusting {tmp}/ca.pem (written by the row), so rows get past TLS set-up.
TRUST_TMP_CA = "ca_bundle: ca.pem\n"


def a_ca() -> bytes:
    return pem(make_cert("Some CA", ca=True)[0])


# --- FABRIC ------------------------------------------------------------------------------------
def fabric(target: str, content: bytes):
    """A setup writing a complete fabric_rc in {tmp} whose files hold what fablib expects,
    then ``target`` (one of them, or fabric_rc itself) replaced by ``content``."""

    def setup(tmp: Path):
        (tmp / "token.json").write_text(json.dumps({"id_token": "eyJ.fake", "refresh_token": "NB2.fake"}))
        ssh_keypair(tmp, "bastion_key")
        ssh_keypair(tmp, "slice_key")
        settings = {"FABRIC_PROJECT_ID": "p-123", "FABRIC_TOKEN_LOCATION": tmp / "token.json",
                    "FABRIC_BASTION_USERNAME": "alice_0001", "FABRIC_BASTION_KEY_LOCATION": tmp / "bastion_key",
                    "FABRIC_SLICE_PRIVATE_KEY_FILE": tmp / "slice_key", "FABRIC_SLICE_PUBLIC_KEY_FILE": tmp / "slice_key.pub"}
        (tmp / "fabric_rc").write_text("".join(f"export {k}={v}\n" for k, v in settings.items()))
        (tmp / target).write_bytes(content)
        return {"HOME": str(tmp), "FABRIC_RC": str(tmp / "fabric_rc")}

    return setup


FABRIC_UP = ["up", "pie-vs-red", "--site", "fabric", "-o", "fabric_site=UTAH"]


def rspec_copy(tmp: Path):
    """{tmp}/x/experiment.yml: pie-vs-red's file as is (name: pie-vs-red) in a folder named x."""
    (tmp / "x").mkdir()
    (tmp / "x" / "experiment.yml").write_bytes(SPEC.path.read_bytes())


def bad_manifest(tmp: Path):
    """The recorded CloudLab manifest with its login user replaced by an ssh option."""
    (tmp / "m.xml").write_bytes(MANIFEST.read_bytes().replace(b'username="ingino"', b'username="-oProxyCommand=touch"'))


def junk_state(tmp: Path, folder: str) -> None:
    """{tmp}/state/<folder>/state.json (NETREPRO_STATE is {tmp}/state) holding binary junk."""
    (tmp / "state" / folder).mkdir(parents=True)
    (tmp / "state" / folder / "state.json").write_bytes(JUNK)


ROWS = [
    # --- `netrepro rspec X` whose name: differs from its folder ----------------------------
    Row("rspec-name-differs-from-folder", ["rspec", "{tmp}/x"], ["{tmp}/x/experiment.yml", "name", "'pie-vs-red'", "'x'"],
        setup=rspec_copy),
    # --- site options -------------------------------------------------------------------
    Row("option-typo-agregate", ["plan", "pie-vs-red", "--site", "instageni", "-o", "agregate=apt"],
        ["unknown option 'agregate'", "--option", "aggregate:", "image:", "slice_name:"]),
    Row("option-from-env-unknown-to-site", ["plan", "pie-vs-red", "--site", "static"],
        ["unknown option 'fabric_site'", "FABRIC_SITE", "static_file:"], env={"FABRIC_SITE": "UTAH"}),
    Row("local-state-folder-with-a-space", ["up", "pie-vs-red", "--site", "local"],
        ["site local: the state folder (NETREPRO_STATE)", "my state", "holds a character other than",
         "cannot quote a space"], env={"NETREPRO_STATE": "{tmp}/my state"}),
    Row("option-local-mgmt-subnet-not-cidr", ["plan", "pie-vs-red", "--site", "local", "-o", "mgmt_subnet=notacidr"],
        ["mgmt_subnet='notacidr'", "IPv4 network in CIDR"]),
    Row("option-local-mode-from-env", ["status", "pie-vs-red", "--site", "local"],
        ["mode='fast'", "LOCAL_MODE", "auto, host, uml, vm"], env={"LOCAL_MODE": "fast"}),
    Row("setup-local-mode-from-env", ["setup", "--check"],
        ["mode='fast'", "LOCAL_MODE", "auto, host, uml, vm"], env={"LOCAL_MODE": "fast"}),
    Row("option-fabric-cores-not-integer", ["plan", "pie-vs-red", "--site", "fabric", "-o", "cores=many"],
        ["cores='many'", "whole number of vCPUs"]),
    Row("option-instageni-image-not-urn", ["plan", "pie-vs-red", "--site", "instageni"],
        ["image='ubuntu'", "IMAGE", "image URN"], env={"IMAGE": "ubuntu"}),
    Row("option-instageni-unknown-aggregate", GENI_UP + ["-o", "aggregate=nowhere"],
        ["aggregate='nowhere'", "emulab"]),
    # --- static nodes file ----------------------------------------------------------------
    Row("static-file-missing", ["up", "pie-vs-red", "--site", "static", "-o", "static_file={tmp}/none.yml"],
        ["{tmp}/none.yml", "no such file", "STATIC_FILE"]),
    Row("static-key-file-missing", STATIC_UP, ["{tmp}/s.yml", "nodes.client2.key", "{tmp}/nope", "no such file"],
        setup=static_file(lambda n, tmp: n["client2"].update(key=str(tmp / "nope")))),
    Row("static-key-file-not-a-key", STATIC_UP, ["{tmp}/s.yml", "nodes.router.key", "id_ed25519.pub", "private key"],
        setup=static_file(lambda n, tmp: n["router"].update(key=n["router"]["key"] + ".pub"))),
    Row("static-proxy-jump-is-an-ssh-option", STATIC_UP, ["{tmp}/s.yml", "nodes.router.proxy_jump", "login name"],
        setup=static_file(lambda n, tmp: n["router"].update(proxy_jump=f"-oProxyCommand=touch${{IFS}}{tmp}/pwned@x:22"))),
    Row("static-proxy-jump-host-is-an-option", STATIC_UP, ["{tmp}/s.yml", "nodes.server1.proxy_jump", "host name"],
        setup=static_file(lambda n, tmp: n["server1"].update(proxy_jump="me@-oProxyCommand=x:22"))),
    Row("static-user-is-an-ssh-option", STATIC_UP, ["{tmp}/s.yml", "nodes.client1.user", "-oProxyCommand", "login name"],
        setup=static_file(lambda n, tmp: n["client1"].update(user="-oProxyCommand=touch /tmp/pwned"))),
    Row("static-work-dir-climbs-out", STATIC_UP, ["{tmp}/s.yml", "nodes.router.work_dir", "absolute path",
                                                  "no part starting with '.'", "/var/lib/../../etc"],
        setup=static_file(lambda n, tmp: n["router"].update(work_dir="/var/lib/../../etc"))),
    Row("static-work-dir-relative", STATIC_UP, ["{tmp}/s.yml", "nodes.client1.work_dir", "absolute path"],
        setup=static_file(lambda n, tmp: n["client1"].update(work_dir="netrepro; rm -rf /"))),
    Row("static-host-with-space", STATIC_UP, ["{tmp}/s.yml", "nodes.server3.host", "host name"],
        setup=static_file(lambda n, tmp: n["server3"].update(host="192.0.2.16 -oProxyCommand=x"))),
    Row("static-host-with-newline", STATIC_UP, ["{tmp}/s.yml", "nodes.server2.host", "\\n"],
        setup=static_file(lambda n, tmp: n["server2"].update(host="192.0.2.15\nProxyCommand x"))),
    Row("static-node-defined-twice", STATIC_UP, ["{tmp}/s.yml", "duplicate key 'router'"],
        setup=static_file(raw=b"nodes:\n  router: {host: 192.0.2.10}\n  router: {host: 192.0.2.11}\n")),
    Row("static-file-binary-junk", STATIC_UP, ["{tmp}/s.yml", "binary"], setup=static_file(raw=JUNK)),
    Row("static-known-hosts-is-an-ssh-option", ["status", "pie-vs-red", "--site", "static", "-o", "known_hosts=-oX"],
        ["known_hosts='-oX'", "file path"]),
    Row("static-host-ipv6-scope-id-runs-a-command", STATIC_UP, ["{tmp}/s.yml", "nodes.router.host", "`whoami`",
                                                                "scope id"],
        setup=static_file(lambda n, tmp: n["router"].update(host="fe80::1%eth0 `whoami`"))),
    Row("static-proxy-jump-ipv6-scope-id-runs-a-command", STATIC_UP,
        ["{tmp}/s.yml", "nodes.client2.proxy_jump", "scope id"],
        setup=static_file(lambda n, tmp: n["client2"].update(proxy_jump="me@fe80::1%eth0`id`:22"))),
    # --- static: --parallel, a reservation's machines held by one copy only (issue 54) -------------
    Row("static-parallel-one-file-twice", STATIC_UP[:-1] + ["static_file={tmp}/s.yml,{tmp}/s.yml", "--parallel", "2"],
        ["STATIC_FILE={tmp}/s.yml,{tmp}/s.yml", "{tmp}/s.yml is the nodes file of reservations #1 and #2",
         "one nodes file per reservation"], setup=static_file()),
    Row("static-parallel-one-file-twice-from-env", ["up", "pie-vs-red", "--site", "static"],
        ["{tmp}/s.yml is the nodes file of reservations #1 and #2"], setup=static_file(),
        env={"STATIC_FILE": "{tmp}/s.yml,{tmp}/./s.yml", "PARALLEL": "2"}),
    Row("static-parallel-two-files-one-machine", STATIC_UP[:-1] + ["static_file={tmp}/s.yml,{tmp}/t.yml", "--parallel", "2"],
        ["{tmp}/t.yml: nodes.server2.host: '192.0.2.11' port 22 is also nodes.client1 of {tmp}/s.yml (reservation #1)",
         "machines of its own for each reservation"],
        setup=two_static_files(lambda t, s: t["server2"].update(host="192.0.2.11"))),
    # --- what `down` trusts of a copy's state.json (issue 54) -----------------------------------------
    Row("down-copy-login-proxy-jump-names-a-control-path", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.proxy_jump", "user@host:port"],
        setup=forged_copy({"router": {**LOGIN, "proxy_jump": "me@jump.example.org:22 -oControlPath={tmp}/victim"}})),
    Row("down-copy-login-host-ipv6-scope-id", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.host", "scope id"],
        setup=forged_copy({"router": {**LOGIN, "host": "fe80::1%eth0 `whoami`"}})),
    Row("down-copy-login-user-is-an-option", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.user", "login name"],
        setup=forged_copy({"router": {**LOGIN, "user": "-oProxyCommand=touch"}})),
    Row("down-copy-login-port-not-a-port", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.port", "TCP port"],
        setup=forged_copy({"router": {**LOGIN, "port": "22 -oProxyCommand=x"}})),
    Row("down-copy-login-jump-key-with-a-space", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.extra.proxy_key_file", "file path"],
        setup=forged_copy({"router": {**LOGIN, "proxy_jump": "me@jump.example.org:22",
                                      "extra": {"proxy_key_file": "k -oControlPath={tmp}/victim"}}})),
    Row("down-copy-login-unknown-field", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router.password", "unknown field"],
        setup=forged_copy({"router": {**LOGIN, "password": "x"}})),
    Row("down-copy-login-not-an-object", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins.router", "expected an object"],
        setup=forged_copy({"router": "root@192.0.2.10"})),
    Row("down-copy-logins-not-an-object", STATIC_DOWN,
        ["{tmp}/state/pie-vs-red-static.2/state.json", "logins", "node name -> login"],
        setup=forged_copy(["router"])),
    # --- GENI credentials and configuration --------------------------------------------------
    Row("geni-context-holds-a-list", GENI_UP, ["{tmp}/context.json", "a JSON list", "geni-lib context"],
        setup=geni(context=b"[]")),
    Row("geni-context-binary-junk", GENI_UP, ["{tmp}/context.json", "binary data"], setup=geni(context=JUNK)),
    Row("geni-context-field-not-text", GENI_UP, ["{tmp}/context.json", "cert-path", "expected text"],
        setup=geni(context=b'{"cert-path": ["a", "b"]}')),
    Row("aggregates-yaml-syntax-error", GENI_UP, ["{tmp}/aggs.yml", "line 2", "not valid YAML"],
        setup=geni(aggregates="aggregates: {mine: [\n")),
    Row("aggregates-binary-junk", GENI_UP, ["{tmp}/aggs.yml", "binary"], setup=geni(aggregates=JUNK)),
    Row("aggregates-verify-tls-typo", GENI_UP, ["{tmp}/aggs.yml", "aggregates.emulab.verify_tsl", "unknown field"],
        setup=geni(aggregates="aggregates:\n  emulab: {urn: 'urn:publicid:IDN+emulab.net+authority+cm', "
                              "url: 'https://www.emulab.net:12369/protogeni/xmlrpc/am/3.0', verify_tsl: false}\n")),
    Row("geni-ca-bundle-not-provided", GENI_UP, ["{tmp}/home/.bssw/geni/emulab-ca.pem", "no such file", "ca_bundle"],
        setup=geni(passphrase="the portal passphrase")),
    Row("geni-ca-bundle-junk", GENI_UP, ["{tmp}/ca.pem", "no certificate", "ca_bundle"],
        setup=geni(aggregates=TRUST_TMP_CA, ca_bundle=b"[]", passphrase="the portal passphrase")),
    Row("geni-certificate-junk", GENI_UP, ["{tmp}/cloudlab.pem", "no certificate", "Download Credentials"],
        setup=geni(cert=b"[]", aggregates="ca_bundle: null\n", passphrase="x")),
    Row("geni-certificate-binary-junk", GENI_UP, ["{tmp}/cloudlab.pem", "binary data"],
        setup=geni(cert=JUNK, aggregates="ca_bundle: null\n")),
    Row("geni-wrong-passphrase", GENI_UP, ["{tmp}/cloudlab.pem", "passphrase does not decrypt"],
        setup=geni(aggregates=TRUST_TMP_CA, ca_bundle=a_ca(), passphrase=WRONG_PASSPHRASE)),
    Row("geni-encrypted-key-without-passphrase", GENI_UP, ["{tmp}/cloudlab.pem", "NETREPRO_GENI_KEY_PASSPHRASE"],
        setup=geni(aggregates=TRUST_TMP_CA, ca_bundle=a_ca())),
    Row("geni-ssh-public-key-junk", GENI_UP, ["{tmp}/home/.ssh/id_ed25519.pub", "SSH public key"],
        setup=geni(pubkey=b"ssh-ed25519 not-base64 me@here\n")),
    Row("geni-manifest-login-is-an-ssh-option",
        ["inventory", "pie-vs-red", "--site", "instageni", "--manifest", "{tmp}/m.xml", "--user", "ingino"],
        ["{tmp}/m.xml", "@username", "-oProxyCommand", "login name"], setup=bad_manifest),
    # --- the run state of a reservation, damaged ------------------------------------------------
    Row("state-file-junk", ["status", "pie-vs-red", "--site", "static"], ["{tmp}/state/pie-vs-red-static/state.json", "JSON"],
        setup=lambda tmp: junk_state(tmp, "pie-vs-red-static")),
    # --- FABRIC: a complete FABRIC_RC whose files are junk -------------------------------------
    Row("fabric-token-binary-junk", FABRIC_UP, ["{tmp}/token.json", "binary"], setup=fabric("token.json", JUNK)),
    Row("fabric-token-not-a-token", FABRIC_UP, ["{tmp}/token.json", "id_token"], setup=fabric("token.json", b"[]")),
    Row("fabric-bastion-key-junk", FABRIC_UP, ["{tmp}/bastion_key", "FABRIC_BASTION_KEY_LOCATION"],
        setup=fabric("bastion_key", b"-----BEGIN OPENSSH PRIVATE KEY-----\n???\n-----END OPENSSH PRIVATE KEY-----\n")),
    Row("fabric-slice-public-key-junk", FABRIC_UP, ["{tmp}/slice_key.pub", "SSH public key"],
        setup=fabric("slice_key.pub", b"[]")),
    Row("fabric-rc-binary-junk", FABRIC_UP, ["{tmp}/fabric_rc", "binary"], setup=fabric("fabric_rc", JUNK)),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    proc = run_row(row, tmp_path)
    # Secrets never reach the console: not the passphrase given, not a key's body
    # ("b3BlbnNzaC1rZXktdjE" is base64 of OpenSSH's "openssh-key-v1" magic).
    out = proc.stdout + proc.stderr
    assert WRONG_PASSPHRASE not in out and "the portal passphrase" not in out
    assert "b3BlbnNzaC1rZXktdjE" not in out and "PRIVATE KEY-----\n" not in out


def test_rows_are_distinct_and_many():
    assert len({r.id for r in ROWS}) == len(ROWS) >= 15
