"""The local site's User-Mode Linux mode (netrepro/sites/local/uml.py), the host-route check it
runs before making its tap (local.host_routes_overlapping), and the substrate's forwarding
test (netrepro/sites/local/capacity.py) every local mode runs before building the site.

Unit tests: the UML command line and guest init (run through ``sh -n``), tap names,
available()'s reasons, the capacity script and its result's reading. Tests marked ``netns``
run host_routes_overlapping and the capacity script for real in throwaway namespaces named
after this test's pid. The one ``integration`` test boots the pie-vs-red local site in UML
(run it under ``flock /tmp/netrepro-vm.lock``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from netrepro.sites.base import SiteError
from netrepro.sites.local import capacity, microvm, uml

REPO = Path(__file__).resolve().parent.parent


def _sh_syntax(text: str, tmp_path: Path) -> None:
    script = tmp_path / "script.sh"
    script.write_text(text)
    r = subprocess.run(["sh", "-n", str(script)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


# --- uml.py ----------------------------------------------------------------------------------
def test_uml_command_boots_the_host_root_read_only_on_a_tap():
    argv = uml.uml_command(binary_path="/usr/bin/linux.uml", memory="1536M", guest_init=Path("/s/vm-main.sh"),
                           tap="nrt-0123abcd")
    assert argv == ["/usr/bin/linux.uml", "mem=1536M", "rootfstype=hostfs", "ro", "init=/s/vm-main.sh",
                    "con=null", "con0=null,fd:1", "vec0:transport=tap,ifname=nrt-0123abcd", "quiet"]


def _init(tmp_path: Path, **kw) -> str:
    return uml.guest_init_script(state_dir=tmp_path / "state dir", runtime_dir="/run/netrepro",
                                 build_script=tmp_path / "state dir" / "build.sh", mgmt_bridge="nr-mgmt",
                                 modules=Path("/usr/lib/uml/modules/6.1.176"), **kw)


def test_guest_init_mounts_overlays_and_keeps_the_root_read_only(tmp_path):
    text = _init(tmp_path)
    _sh_syntax(text, tmp_path)
    lines = text.splitlines()
    sd = "'" + str(tmp_path / "state dir") + "'"
    # Only the state folder is written through to the host (hostfs, read-write, same path).
    # at its own path, also when that lies under /tmp (as this test's), which the guest's tmpfs hides
    assert f"mkdir -p {sd}; mount -t hostfs -o {sd} state {sd}" in lines
    assert lines.index("mount -t tmpfs -o mode=0755 run /run; mount -t tmpfs -o mode=1777 tmp /tmp") < \
        lines.index(f"mkdir -p {sd}; mount -t hostfs -o {sd} state {sd}")
    assert not any("remount" in ln or "rw" in ln.split() for ln in lines), "the host's root must stay read-only"
    # /etc and /var: overlays whose upper layer is in the guest's tmpfs /run.
    assert "mount -t tmpfs -o mode=0755 run /run; mount -t tmpfs -o mode=1777 tmp /tmp" in lines
    assert ("  mount -t overlay -o lowerdir=/$d,upperdir=/run/nr-overlay/$d/upper,workdir=/run/nr-overlay/$d/work"
            " overlay /$d") in lines
    assert "for d in etc var; do" in lines
    # The guest says ready or failed in the state folder, and its init never exits.
    assert f"  echo ready > {sd}/vm-ready" in lines and f"  echo failed > {sd}/vm-ready" in lines
    assert lines[-1] == "while :; do sleep 3600; done"


def test_guest_init_modprobe_wrapper_uses_the_packages_module_tree(tmp_path):
    lines = _init(tmp_path).splitlines()
    assert "mount --bind /usr/lib/uml/modules/6.1.176 /run/nr-modules/lib/modules/6.1.176" in lines
    assert "printf '#!/bin/sh\\nexec /sbin/modprobe -d /run/nr-modules \"$@\"\\n' > /run/nr-modprobe" in lines
    assert "echo /run/nr-modprobe > /proc/sys/kernel/modprobe" in lines
    load = next(ln for ln in lines if ln.startswith("for m in "))
    for m in ("sch_pie", "sch_red", "sch_netem", "sch_htb", "veth", "bridge"):
        assert f" {m} " in load
    # The modules are loaded before /etc and /var are overlaid (overlay is one of them).
    assert lines.index(load) < lines.index("for d in etc var; do")


def test_guest_init_joins_the_tap_to_the_management_bridge_after_the_build(tmp_path):
    lines = _init(tmp_path).splitlines()
    build = next(i for i, ln in enumerate(lines) if ln.endswith("build.sh'; then"))
    assert lines[build + 1] == "  ip link set vec0 master nr-mgmt && ip link set vec0 up"


def test_guest_init_runs_the_capacity_test_before_the_build(tmp_path):
    cap = tmp_path / "state dir" / "capacity.sh"
    lines = _init(tmp_path, capacity_script=cap).splitlines()
    run = f"sh '{cap}' || echo 'guest: capacity test failed'"
    assert run in lines
    assert lines.index(run) < next(i for i, ln in enumerate(lines) if ln.endswith("build.sh'; then"))
    assert not any("capacity" in ln for ln in _init(tmp_path).splitlines())


def test_microvm_guest_runs_the_capacity_test_before_the_build(tmp_path):
    text = microvm.guest_main_script(state_dir=tmp_path, runtime_dir="/run/netrepro", build_script=tmp_path / "build.sh",
                                     teardown_script=tmp_path / "teardown.sh", jump_sshd_config=tmp_path / "j",
                                     capacity_script=tmp_path / "capacity.sh")
    _sh_syntax(text, tmp_path)
    lines = text.splitlines()
    run = f"sh {tmp_path}/capacity.sh || echo 'guest: capacity test failed'"
    assert lines.index(run) + 1 == lines.index(f"if sh {tmp_path}/build.sh; then")


def test_both_guests_give_ksoftirqd_the_realtime_class_before_the_build(tmp_path):
    vm = microvm.guest_main_script(state_dir=tmp_path, runtime_dir="/run/netrepro", build_script=tmp_path / "build.sh",
                                   teardown_script=tmp_path / "teardown.sh", jump_sshd_config=tmp_path / "j")
    for text in (vm, _init(tmp_path)):
        lines = text.splitlines()
        chrt = next(i for i, ln in enumerate(lines) if "chrt -f -p 50" in ln and "ksoftirqd" in ln)
        modprobe = next(i for i, ln in enumerate(lines) if ln.startswith("for m in "))
        build = next(i for i, ln in enumerate(lines) if ln.startswith("if sh ") and ln.endswith("build.sh; then")
                     or ln.endswith("build.sh'; then"))
        assert modprobe < chrt < build


@pytest.mark.parametrize("site_id", ["0123abcd", "0123456789abcdef0123"])
def test_tap_name_fits_ifnamsiz(site_id):
    name = uml.tap_name(site_id)
    assert name.startswith("nrt-") and len(name) <= 15
    assert name == ("nrt-" + site_id)[:15]


def test_available_names_the_package_or_device_missing(monkeypatch, tmp_path):
    ok, why = uml.available()
    # This machine has user-mode-linux installed (netrepro setup installs it in uml mode).
    assert ok, why
    assert why.startswith(uml.binary()) and uml.modules_dir().name in why
    monkeypatch.setattr(uml, "TUN_DEVICE", tmp_path / "no-tun")
    assert uml.available() == (False, f"{tmp_path}/no-tun is missing (the tap device of the management network)")
    monkeypatch.setattr(uml, "MODULES_ROOT", tmp_path / "no-modules")
    assert uml.available() == (False, f"no module tree under {tmp_path}/no-modules (Debian package user-mode-linux)")
    monkeypatch.setattr(uml, "UML_BINARY", "nr-no-such-linux.uml")
    assert uml.available() == (False, "nr-no-such-linux.uml not found (Debian package user-mode-linux)")


def test_modules_dir_is_the_newest_tree_with_a_modules_dep(monkeypatch, tmp_path):
    for rel, dep in (("6.1.170", True), ("6.1.176", True), ("6.2.0", False)):
        (tmp_path / rel).mkdir()
        if dep:
            (tmp_path / rel / "modules.dep").write_text("")
    monkeypatch.setattr(uml, "MODULES_ROOT", tmp_path)
    assert uml.modules_dir() == tmp_path / "6.1.176"
    monkeypatch.setattr(uml, "MODULES_ROOT", tmp_path / "none")
    assert uml.modules_dir() is None


# --- local.host_routes_overlapping -------------------------------------------------------------
@pytest.mark.netns
def test_host_routes_overlapping_reads_the_routes_of_a_real_namespace():
    """The function run inside a throwaway namespace with known routes (its `ip -4 -o route`)."""
    ns = f"nrtest-routes-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for argv in (["link", "add", "d0", "type", "veth", "peer", "name", "d1"], ["link", "set", "d1", "up"],
                     ["link", "set", "d0", "up"], ["link", "set", "lo", "up"],
                     ["addr", "add", "172.30.0.2/24", "dev", "d0"],     # a kernel route, as the tap's
                     ["route", "add", "10.9.0.0/16", "dev", "d0"],
                     ["route", "add", "default", "via", "172.30.0.1"]):
            subprocess.run(["ip", "-n", ns, *argv], check=True)
        code = ("import json, sys; from netrepro.sites.local.host import host_routes_overlapping as h; "
                "print(json.dumps([h(s) for s in sys.argv[1:]]))")
        r = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", code,
                            "172.30.0.0/25", "10.9.3.0/24", "10.0.0.0/8", "192.168.5.0/24", "0.0.0.0/0"],
                           capture_output=True, text=True, cwd=REPO, check=True)
        routes = subprocess.run(["ip", "-n", ns, "-4", "-o", "route"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns])
    assert "default via 172.30.0.1 dev d0" in routes
    assert json.loads(r.stdout) == [["route 172.30.0.0/24 dev d0"], ["route 10.9.0.0/16 dev d0"],
                                    ["route 10.9.0.0/16 dev d0"], [],
                                    # the default route is left out, every other route overlaps 0/0
                                    ["route 10.9.0.0/16 dev d0", "route 172.30.0.0/24 dev d0"]]


# --- capacity.py ---------------------------------------------------------------------------------
def test_capacity_script_names_its_namespaces_by_pid_and_is_posix_sh(tmp_path):
    text = capacity.script(tmp_path / "capacity.json")
    _sh_syntax(text, tmp_path)
    assert f"P=nrcap-{os.getpid()}; A=$P-a; R=$P-r; B=$P-b" in text.splitlines()
    assert capacity.prefix(42) == "nrcap-42"
    text = capacity.script(tmp_path / "c.json", name_prefix="nrcap-7", seconds=5)
    lines = text.splitlines()
    assert "P=nrcap-7; A=$P-a; R=$P-r; B=$P-b" in lines and "SECS=5" in lines
    assert "  step ip netns exec \"$1\" ethtool -K \"$2\" tso off gso off gro off" in lines
    assert "step ip netns exec \"$R\" sysctl -q -w net.ipv4.ip_forward=1" in lines
    # Only what it made is removed: a namespace enters MADE once `ip netns add` succeeded.
    assert 'for ns in $A $R $B; do step ip netns add "$ns"; MADE="$MADE $ns"; done' in lines
    assert "trap cleanup EXIT" in lines and "trap 'exit 1' INT TERM HUP" in lines
    assert not any("tc " in ln for ln in lines), "no shaping"


def test_capacity_read_result(tmp_path):
    out = tmp_path / "capacity.json"
    assert capacity.read_result(out, log_hint="vm-guest.log") == {"error": f"no result in {out}; see vm-guest.log"}
    out.write_text('{"forwarding_mbit": 897.3, "seconds": 3}')
    assert capacity.read_result(out) == {"forwarding_mbit": 897.3, "seconds": 3}
    out.write_text('{"error": "ip netns add nrcap-1-a: File exists", "seconds": 3}')
    assert capacity.read_result(out)["error"] == "ip netns add nrcap-1-a: File exists"
    out.write_text('{"forwarding_mbit": "fast"}')
    assert capacity.read_result(out) == {"error": f"{out}: no forwarding_mbit number", "forwarding_mbit": "fast"}
    out.write_text("[1]")
    assert capacity.read_result(out) == {"error": f"{out}: not a JSON object"}
    out.write_text('{"forwarding_mbit": NaN')
    assert capacity.read_result(out)["error"].startswith(f"{out}: not JSON")


def test_capacity_describe():
    assert capacity.describe({"forwarding_mbit": 897.3, "seconds": 3}) == \
        "forwarding capacity 897 Mbit/s (one iperf3 flow through a router namespace, offloads off)"
    assert capacity.describe({"error": "iperf3 -c 10.255.2.2 -t 3: refused"}) == \
        "forwarding capacity test failed: iperf3 -c 10.255.2.2 -t 3: refused"
    assert capacity.describe(None) == capacity.describe({"forwarding_mbit": "x"}) == "forwarding capacity not measured"


def _namespaces() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


@pytest.mark.netns
def test_capacity_script_measures_and_removes_what_it_made(tmp_path):
    """On the host, as the host mode runs it: a number, and no namespace, process or file left."""
    pfx = f"nrcap-t{os.getpid()}"
    script, out = tmp_path / "capacity.sh", tmp_path / "capacity.json"
    script.write_text(capacity.script(out, name_prefix=pfx, seconds=1))
    res = capacity.run_here(script, out, timeout_s=60)
    assert "error" not in res, res
    assert res["forwarding_mbit"] > 50 and res["sender_mbit"] >= res["forwarding_mbit"] * 0.9
    assert res["seconds"] == 1 and res["namespaces"] == pfx and res["tool"].startswith("iperf 3")
    assert res["kernel"] == os.uname().release
    assert not any(n.startswith(pfx) for n in _namespaces())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["capacity.json", "capacity.sh"]
    assert subprocess.run(["pgrep", "-f", f"iperf3 -s -1 -B {capacity.NET_RB}.2"], capture_output=True).returncode == 1


@pytest.mark.netns
def test_capacity_script_failure_is_recorded_and_leaves_others_namespaces(tmp_path):
    """A step that fails (its router namespace's name is taken): the error in the JSON, the
    namespaces it made removed, the one it did not make left alone."""
    pfx = f"nrcap-t{os.getpid()}"
    subprocess.run(["ip", "netns", "add", f"{pfx}-r"], check=True)
    try:
        script, out = tmp_path / "capacity.sh", tmp_path / "capacity.json"
        script.write_text(capacity.script(out, name_prefix=pfx, seconds=1))
        res = capacity.run_here(script, out, timeout_s=60)
        left = {n for n in _namespaces() if n.startswith(pfx)}
    finally:
        subprocess.run(["ip", "netns", "del", f"{pfx}-r"])
    assert res["error"].startswith(f"ip netns add {pfx}-r: ") and "exists" in res["error"], res
    assert "forwarding_mbit" not in res and res["seconds"] == 1
    assert left == {f"{pfx}-r"}
    assert capacity.describe(res).startswith("forwarding capacity test failed: ip netns add")


# --- the site in UML, for real ------------------------------------------------------------------
def _links(prefix: str) -> set[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    names = {ln.split(":")[1].strip().split("@")[0] for ln in out.splitlines() if ":" in ln}
    return {n for n in names if n.startswith(prefix)}


def _uml_processes() -> dict[int, str]:
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if uml.UML_BINARY in cmd.split(" ", 1)[0]:
                out[int(d.name)] = cmd
    return out


@pytest.mark.integration
def test_pie_vs_red_up_and_down_in_uml_mode(tmp_path):
    """LOCAL_MODE=uml: the pie-vs-red site comes up (every node answers SSH on its management
    address), its status holds the forwarding test's result, and `down` leaves no UML
    process, tap or state. Its own state folder and management subnet: a site of the
    repository's .state may be up (its inventory is not touched either)."""
    from netrepro.runner import ssh
    from netrepro.sites import get_site, site_options
    from netrepro.experiment.spec import load_spec

    spec = load_spec("pie-vs-red")
    state_dir = tmp_path / "state"
    opts = site_options(["mgmt_subnet=172.31.251.0/24"], {"LOCAL_MODE": "uml"})
    site = get_site("local", spec, state_dir, opts)
    taps_before, uml_before = _links("nrt-"), set(_uml_processes())
    log: list[str] = []
    sockets: list[str] = []
    refused = None
    try:
        try:
            site.reserve(log=log.append)
        except SiteError as exc:
            # a host whose CPU Debian's UML kernel cannot run on (uml.CPU_REFUSALS): the site
            # must say so in one line naming LOCAL_MODE=vm, and leave nothing behind (below)
            refused = str(exc)
            assert "\n" not in refused and "LOCAL_MODE=vm" in refused, refused
            assert uml.boot_refusal((state_dir / "vm-console.log").read_text(errors="replace")), refused
            return
        site.wait_ready(timeout_s=300, log=log.append)
        st = site.status()
        state = site.load_state()
        assert st["mode"] == "uml" and st["vm_running"] is True, st
        assert "[local] mode uml: chosen by option" in log
        cap = st["capacity"]
        assert "error" not in cap, cap
        assert cap["forwarding_mbit"] > 50 and cap["seconds"] == capacity.SECONDS, cap
        assert cap["kernel"] == uml.modules_dir().name  # measured inside the UML machine
        assert f"[local] substrate: {capacity.describe(cap)}" in log
        assert state["tap"] in _links("nrt-") and any(str(state_dir) in c for c in _uml_processes().values())
        for name, login in site.logins().items():
            r = subprocess.run(site.ssh_argv(login, "ip -4 -o addr show dev eth0"), capture_output=True, text=True,
                               timeout=120)
            assert r.returncode == 0 and f" {login.host}/24 " in r.stdout, (name, r.stdout, r.stderr)
        sockets = ssh.ssh_control_paths(site)
    finally:
        sockets = sockets or ssh.ssh_control_paths(site)
        site.release(log=log.append)
        ssh.close_ssh_masters(sockets)
        if refused:
            assert not any(str(state_dir) in c for c in _uml_processes().values())
            assert _links("nrt-") == taps_before and not (state_dir / "state.json").exists()
    assert "[local] torn down (uml mode)" in log
    assert not any(str(state_dir) in c for c in _uml_processes().values())
    assert set(_uml_processes()) <= uml_before
    assert _links("nrt-") == taps_before
    assert not (state_dir / "state.json").exists() and not (state_dir / capacity.RESULT_FILE).exists()
    assert not [s for s in sockets if os.path.exists(s)]
    assert not [s for s in sockets if os.path.exists(os.path.dirname(s))]  # nor the site's control folder


def test_a_cpu_that_uml_cannot_run_on_is_named_from_the_console():
    """The console of a UML machine that panicked on this CPU (Intel Xeon with AVX-512,
    2026-11-26) gives the reason a SiteError says; another console gives none."""
    console = ("mmapper_init - find_iomem failed\nuserspace - ptrace set fp regs failed, errno = 14\n"
               "Kernel panic - not syncing: Attempted to kill init! exitcode=0x0000000b\n")
    why = uml.boot_refusal(console)
    assert why is not None and "LOCAL_MODE=vm" in why and "floating-point" in why
    assert uml.boot_refusal("Kernel panic - not syncing: VFS: Unable to mount root fs\n") is None
