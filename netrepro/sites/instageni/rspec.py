"""Generate a GENI v3 request RSpec from an experiment's topology (lxml).

One ``<node>`` per node of the experiment's model (a VM of type ``vm_type`` booting
``image``; a switch too), one ``<interface>`` per experiment interface carrying its address
and netmask when it has one, and one ``<link>`` per L2 segment joining the interfaces on it
(a LAN of ``topology.networks``, or a cable ``link-N``). Names are stable: interface
``<node>:<key>`` (the LAN's name, else the interface's), link ``<network>`` or ``link-N``,
so a manifest can be matched back to the model by ``client_id`` as well as by address.

The element names and order follow the GENI v3 request schema (derived from ProtoGENI v2;
tests validate the output against ``protogeni-rspec-2/request.xsd`` after swapping the
namespace, see tests/data/rspec/SOURCE.md). Emulab extensions used:
``emulab:routable_control_ip`` (a public control address per VM, so SSH is on port 22 of the
VM itself) and ``emulab:xen`` (cores / RAM of a Xen VM), both from
``http://www.protogeni.net/resources/rspec/ext/emulab/1``.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netrepro.sites.options import as_bool, positive_int_option
from netrepro.experiment.spec import Spec, SpecError

GENI_V3_NS = "http://www.geni.net/resources/rspec/3"
PG_V2_NS = "http://www.protogeni.net/resources/rspec/2"
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
SCHEMA_LOCATION = f"{GENI_V3_NS} {GENI_V3_NS}/request.xsd"

#: Current Ubuntu LTS image served by every Emulab-software aggregate (CloudLab, Emulab,
#: InstaGENI racks fetch it from emulab.net). ``emulab-ops//`` = the image's latest version.
DEFAULT_IMAGE = "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD"
#: Shared Xen VM, the sliver type InstaGENI racks and Emulab offer for VMs.
DEFAULT_VM_TYPE = "emulab-xen"


@dataclass(frozen=True)
class RSpecOptions:
    """What the request asks for beyond the topology.

    Attributes:
        image: disk image URN (``urn:publicid:IDN+<authority>+image+<project>//<NAME>``).
        vm_type: sliver type name (``emulab-xen``, ``default-vm``, ``raw-pc``).
        routable_control_ip: ask for a public control IP per VM (SSH on port 22) instead of
            a shared host's high port.
        component_manager_id: aggregate URN to bind every node to, or None (unbound; the
            aggregate that receives the request takes it).
        vm_cores: Xen VM vCPUs, or None for the aggregate's default.
        vm_ram_mb: Xen VM memory in MiB, or None for the aggregate's default.
    """

    image: str = DEFAULT_IMAGE
    vm_type: str = DEFAULT_VM_TYPE
    routable_control_ip: bool = True
    component_manager_id: str | None = None
    vm_cores: int | None = None
    vm_ram_mb: int | None = None

    @classmethod
    def from_options(cls, options: dict[str, Any] | None) -> "RSpecOptions":
        """Build from site options (``image``, ``vm_type``, ``routable_control_ip``,
        ``vm_cores``, ``vm_ram_mb``; strings as given on a command line are accepted).

        Raises:
            SpecError: a value has the wrong form (message names the option).
        """
        o = dict(options or {})
        kw: dict[str, Any] = {}
        if o.get("image"):
            image = str(o["image"])
            if not image.startswith("urn:publicid:IDN+") or "+image+" not in image:
                raise SpecError("site options", "image", f"expected an image URN like {DEFAULT_IMAGE}, got {image!r}")
            kw["image"] = image
        if o.get("vm_type"):
            kw["vm_type"] = str(o["vm_type"])
        if o.get("routable_control_ip") not in (None, ""):
            kw["routable_control_ip"] = _as_bool(o["routable_control_ip"], "routable_control_ip")
        if o.get("component_manager_id"):
            kw["component_manager_id"] = str(o["component_manager_id"])
        for key in ("vm_cores", "vm_ram_mb"):
            val = positive_int_option(o, key, error=SpecError)
            if val is not None:
                kw[key] = val
        return cls(**kw)


def _as_bool(value: Any, name: str) -> bool:
    flag = as_bool(value)
    if flag is None:
        raise SpecError("site options", name, f"expected true or false, got {value!r}")
    return flag


def interface_id(node: str, key: str) -> str:
    """The request's ``client_id`` of ``node``'s interface ``key``
    (:meth:`netrepro.model.Model.data_plane`: the LAN's name, else the interface's name)."""
    return f"{node}:{key}"


def build_request(spec: Spec, opts: RSpecOptions | None = None):
    """The request RSpec of ``spec``'s topology as an lxml ``_Element`` (root ``<rspec>``).

    Read from the experiment's model: one VM per node (hosts, routers and switches alike: a
    switch is a VM whose ports the provisioning bridges, roles/switch_bridge), one
    ``<interface>`` per experiment interface (with ``<ip>`` when the model gives it an address;
    a switch's port has none), one ``<link>`` per L2 segment
    (:meth:`netrepro.model.Model.segments`: each LAN, each cable ``link-N``).
    """
    from lxml import etree

    opts = opts or RSpecOptions()
    m = spec.model
    g = "{%s}" % GENI_V3_NS
    e = "{%s}" % EMULAB_NS
    root = etree.Element(g + "rspec", nsmap={None: GENI_V3_NS, "emulab": EMULAB_NS, "xsi": XSI_NS})
    root.set("type", "request")
    root.set("{%s}schemaLocation" % XSI_NS, SCHEMA_LOCATION)
    root.append(etree.Comment(f" Generated by netrepro from {spec.name} (experiment.yml); regenerate with `make rspec`. "))
    for name in m.nodes:
        node = etree.SubElement(root, g + "node", client_id=name, exclusive="false")
        if opts.component_manager_id:
            node.set("component_manager_id", opts.component_manager_id)
        st = etree.SubElement(node, g + "sliver_type", name=opts.vm_type)
        etree.SubElement(st, g + "disk_image", name=opts.image)
        if opts.vm_cores or opts.vm_ram_mb:
            xen = etree.SubElement(st, e + "xen")
            if opts.vm_cores:
                xen.set("cores", str(opts.vm_cores))
            if opts.vm_ram_mb:
                xen.set("ram", str(opts.vm_ram_mb))
        for key, itf in m.data_plane(name).items():
            ie = etree.SubElement(node, g + "interface", client_id=interface_id(name, key))
            if itf["address"]:
                net = ipaddress.ip_network(f"{itf['address']}/{itf['prefixlen']}", strict=False)
                etree.SubElement(ie, g + "ip", address=itf["address"], type="ipv4", netmask=str(net.netmask))
        if opts.routable_control_ip:
            etree.SubElement(node, e + "routable_control_ip")
    for seg in m.segments():
        link = etree.SubElement(root, g + "link", client_id=seg["name"])
        if seg["name"] not in m.networks:
            link.append(etree.Comment(" a cable: " + " to ".join(f"{n}:{m.data_plane(n)[k]['interface']}"
                                                                   for n, k in seg["members"]) + " "))
        if opts.component_manager_id:
            etree.SubElement(link, g + "component_manager", name=opts.component_manager_id)
        for n, k in seg["members"]:
            etree.SubElement(link, g + "interface_ref", client_id=interface_id(n, k))
    return root


def request_xml(spec: Spec, opts: RSpecOptions | None = None) -> str:
    """The request RSpec as pretty-printed UTF-8 XML text (with an XML declaration)."""
    from lxml import etree

    return etree.tostring(build_request(spec, opts), pretty_print=True, xml_declaration=True,
                          encoding="UTF-8").decode("utf-8")


#: The portal's profile extension (CloudLab, Emulab): an RSpec profile's description and
#: instructions, shown when it is instantiated. The namespace is the one CloudLab's own
#: manifests declare (../shared/fixtures/rspec/manifest, ``xmlns:tour``).
TOUR_NS = "http://www.protogeni.net/resources/rspec/ext/apt-tour/1"


def profile_instructions(spec: Spec) -> str:
    """The steps from an instantiated profile to a verdict (Markdown), for the profile's
    ``<instructions>``: the same commands as docs/sites/cloudlab.md's portal route."""
    return "\n".join([
        f"This experiment was generated by netrepro from `{spec.name}` (its experiment.yml).",
        "",
        "1. Wait until every node is ready (the experiment's page says so).",
        "2. Open the *Manifest* tab and save it as `manifest.xml` on the machine you run netrepro on",
        "   (a clone of netrepro, with the SSH key you gave the portal).",
        "3. There, run",
        "",
        f"       make up provision run analyze EXPERIMENT={spec.name} SITE=instageni MANIFEST=manifest.xml "
        "GENI_USER=<your user name> SSH_KEY=~/.ssh/id_ed25519",
        "",
        f"   The verdict is the last lines; the run is in `results/{spec.name}/latest/`.",
        f"4. `make down EXPERIMENT={spec.name} SITE=instageni` forgets the nodes; then *Terminate* the "
        "experiment here.",
    ])


def build_profile(spec: Spec, opts: RSpecOptions | None = None):
    """A CloudLab/Emulab RSpec profile of ``spec``: its request (:func:`build_request`, bound
    to no aggregate: the portal chooses the cluster) with an ``<rspec_tour>`` element
    (:data:`TOUR_NS`) holding the experiment's title as the description and
    :func:`profile_instructions`. The experiment's texts are XML text, escaped by lxml;
    nothing in them is read as markup."""
    from lxml import etree

    opts = opts or RSpecOptions()
    if opts.component_manager_id:
        opts = RSpecOptions(opts.image, opts.vm_type, opts.routable_control_ip, None, opts.vm_cores, opts.vm_ram_mb)
    root = build_request(spec, opts)
    tour = etree.Element("{%s}rspec_tour" % TOUR_NS, nsmap={None: TOUR_NS})
    etree.SubElement(tour, "{%s}description" % TOUR_NS, type="markdown").text = str(spec.model.title or spec.name)
    etree.SubElement(tour, "{%s}instructions" % TOUR_NS, type="markdown").text = profile_instructions(spec)
    root[0].text = f" Generated by netrepro from {spec.name} (experiment.yml) as a CloudLab profile; regenerate with `make profile`. "
    root.insert(1, tour)   # after the generator's comment, before the nodes
    return root


def write_profile(spec: Spec, folder: Path | str, opts: RSpecOptions | None = None) -> Path:
    """Write a CloudLab repository-based profile of ``spec`` into the new folder ``folder``:
    ``profile.rspec`` (:func:`build_profile`), which the portal reads from the top of a git
    repository, and ``README.md`` saying how to publish it. Returns the folder.

    Written once and whole: the files are written in a temporary folder beside ``folder`` and
    that folder renamed to ``folder``, so nothing is left when anything fails. ``folder`` must
    not exist, not even as a symbolic link (a dangling one would be followed), and its parent
    must be an existing folder one can write.

    Raises:
        SpecError: ``folder`` exists already or is a link; its parent is not a folder or
            cannot be written (one line naming ``folder``; nothing written).
    """
    import shutil
    import tempfile

    from lxml import etree

    folder = Path(folder)
    if folder.is_symlink():
        raise SpecError(folder, "(folder)", "a symbolic link; expected a new folder for the profile (links are not "
                                            "followed; nothing was written)")
    if folder.exists():
        raise SpecError(folder, "(folder)", "exists already; expected a new folder for the profile (nothing was written)")
    parent = folder.parent
    if not parent.is_dir():
        raise SpecError(folder, "(folder)", f"{parent} is not a folder; expected a new folder in an existing one "
                                            "(nothing was written)")
    try:
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=parent))
    except OSError as exc:
        raise SpecError(folder, "(folder)", f"{parent} cannot be written ({exc.strerror}); expected a new folder in "
                                            "a folder you can write (nothing was written)") from None
    try:
        (staging / "profile.rspec").write_text(etree.tostring(build_profile(spec, opts), pretty_print=True,
                                                              xml_declaration=True, encoding="UTF-8").decode("utf-8"))
        (staging / "README.md").write_text("\n".join([
            f"# CloudLab profile: {spec.name}",
            "",
            f"Generated by netrepro from `{spec.name}`. To use it, push this folder as the top of a git",
            "repository, then in the CloudLab portal choose *Experiments > Create Experiment Profile*,",
            "*Git Repo*, and give the repository's URL; CloudLab reads `profile.rspec` from it.",
            "Instantiate the profile, then follow its instructions (also in netrepro's",
            "docs/sites/cloudlab.md, \"Through the portal\").",
            "",
        ]))
        staging.chmod(0o755)   # mkdtemp made it 0700; a profile folder is as any other
        if folder.exists() or folder.is_symlink():   # made meanwhile: never replaced
            raise FileExistsError(17, "File exists", str(folder))
        staging.rename(folder)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise SpecError(folder, "(folder)", f"cannot be written ({exc.strerror or exc}); expected a new folder in a "
                                            "folder you can write (nothing was written)") from None
    return folder


def write_request(spec: Spec, path: Path | str, opts: RSpecOptions | None = None) -> Path:
    """Write the request RSpec to ``path`` (parents created) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(request_xml(spec, opts))
    return path


def to_protogeni_v2(xml: str | bytes):
    """Parse ``xml`` and return a copy with every GENI v3 element moved to the ProtoGENI v2
    namespace, for validation against ``protogeni-rspec-2/request.xsd`` (see the fixtures'
    README). Extension elements (emulab, jacks, ...) keep their namespace."""
    from lxml import etree

    data = xml.encode("utf-8") if isinstance(xml, str) else xml
    root = etree.fromstring(data, etree.XMLParser(remove_blank_text=True))
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{%s}" % GENI_V3_NS):
            el.tag = "{%s}%s" % (PG_V2_NS, etree.QName(el).localname)
    # Drop the v3 schemaLocation hint: it points at a schema that is not available offline.
    root.attrib.pop("{%s}schemaLocation" % XSI_NS, None)
    etree.cleanup_namespaces(root)
    return root


def validate_request(xml: str | bytes, xsd_path: Path | str) -> list[str]:
    """Validate a GENI v3 request against the ProtoGENI v2 ``request.xsd`` at ``xsd_path``.

    Returns the list of schema errors as ``line N: message`` strings (empty when valid).
    """
    from lxml import etree

    schema = etree.XMLSchema(etree.parse(str(xsd_path)))
    doc = to_protogeni_v2(xml)
    ok = schema.validate(doc)
    return [] if ok else [f"line {err.line}: {err.message}" for err in schema.error_log]


def drift(spec: Spec, path: Path | str, opts: RSpecOptions | None = None) -> str | None:
    """Compare the committed request at ``path`` with a fresh one from ``spec``.

    Returns None when identical, else a one-line message saying how to regenerate it.
    """
    path = Path(path)
    if not path.is_file():
        return f"{path}: (file): missing; run `make rspec` to generate it from {spec.path}"
    if path.read_text() != request_xml(spec, opts):
        return f"{path}: (content): differs from the request generated from {spec.path}; run `make rspec` and commit it"
    return None
