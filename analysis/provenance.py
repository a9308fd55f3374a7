"""Which toolkit made an analysis, from which inputs: the record ``analysis.json``.

Each set of analysis outputs (tidy.csv.gz, summary.csv, figures/, verdict.json, report.md)
comes with ``analysis.json``, which records what made it and from what:

- ``made_by``: the toolkit version (see :func:`toolkit`), the package version, the git
  commit and the sha256 of the analysis sources; ``libraries``: the versions of Python,
  numpy, pandas, matplotlib and seaborn (they shape the numbers and the figures' bytes);
- ``inputs``: sha256 of run.json and of the raw tree as read, and the raw check;
- ``outputs``: sha256 of every output file.

Where the outputs go, written once, is the run folder's rule
(:func:`netrepro.runfolder.outputs.output_dir`); this module makes the record that rule compares.

The version is ``NETREPRO_TOOLKIT_VERSION`` when that environment variable is set (a name
of letters, digits and ``. _ + -``; then git is not asked, so that a test or a user can name
a version), else ``<package version>-g<12 hex of the git commit>``, with
``-dirty-<8 hex of the sources' sha256>`` when the analysis sources differ from that commit,
or ``<package version>-src-<8 hex>`` outside a git checkout.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import subprocess
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.integrity import sha256_file
from netrepro.runfolder.layout import incomplete_marker, run_json

#: Environment variable naming the toolkit version (overrides git; listed in docs/reference.md,
#: from netrepro/core/envvars.py).
VERSION_ENV = "NETREPRO_TOOLKIT_VERSION"
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")

_ANALYSIS_DIR = Path(__file__).resolve().parent
_REPO = _ANALYSIS_DIR.parent


def _sources() -> list[Path]:
    """The files whose code shapes an analysis's outputs: analysis/*.py and its subpackages'
    (analysis/substrate/), the spec reader, the model, the conversion of a version 1 file
    (netrepro/experiment/migrate.py) and the run folder's reader and writers (netrepro/runfolder/)."""
    import netrepro

    pkg = Path(netrepro.__file__).resolve().parent
    files = sorted(_ANALYSIS_DIR.rglob("*.py"))
    files += [pkg / n for n in ("experiment/spec.py", "core/yamlfile.py", "experiment/migrate.py")]
    files += sorted((pkg / "model").glob("*.py")) + sorted((pkg / "runfolder").glob("*.py"))
    files += sorted((pkg / "schemas").glob("*"))
    return [f for f in files if f.is_file()]


def sources_sha256() -> str:
    """sha256 over the analysis sources (sorted ``name<TAB>sha256`` lines)."""
    lines = "".join(f"{p.parent.name}/{p.name}\t{hashlib.sha256(p.read_bytes()).hexdigest()}\n" for p in _sources())
    return hashlib.sha256(lines.encode()).hexdigest()


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", "-C", str(_REPO), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return p.stdout.strip() if p.returncode == 0 else None


def toolkit() -> dict:
    """What made an analysis: ``{"version", "version_from", "package", "commit", "sources_sha256"}``.

    ``version_from`` is ``NETREPRO_TOOLKIT_VERSION``, ``git`` or ``sources``; ``commit`` is
    the full commit (None when the version comes from the environment or there is no git).
    Raises:
        RunFolderError: NETREPRO_TOOLKIT_VERSION set to something that is not a version name.
    """
    from netrepro import __version__ as package

    src = sources_sha256()
    env = os.environ.get(VERSION_ENV)
    if env is not None:
        if not _VERSION.match(env):
            raise RunFolderError(VERSION_ENV, f"expected a version name (letters, digits, . _ + -; at most 64), got {env[:80]!r}")
        return {"version": env, "version_from": VERSION_ENV, "package": package, "commit": None, "sources_sha256": src}
    commit = _git("rev-parse", "HEAD")
    if commit and re.fullmatch(r"[0-9a-f]{40,64}", commit):
        rel = [p.relative_to(_REPO).as_posix() for p in _sources() if p.is_relative_to(_REPO)]
        dirty = _git("status", "--porcelain", "--untracked-files=all", "--", *rel)
        version = f"{package}-g{commit[:12]}" + (f"-dirty-{src[:8]}" if dirty else "")
        return {"version": version, "version_from": "git", "package": package,
                "commit": commit + ("-dirty" if dirty else ""), "sources_sha256": src}
    return {"version": f"{package}-src-{src[:8]}", "version_from": "sources", "package": package,
            "commit": None, "sources_sha256": src}


def libraries() -> dict:
    """Versions of the interpreter and of the libraries that compute and draw."""
    import matplotlib
    import numpy
    import pandas
    import seaborn

    return {"python": platform.python_version(), "numpy": numpy.__version__, "pandas": pandas.__version__,
            "matplotlib": matplotlib.__version__, "seaborn": seaborn.__version__}


def run_record(run_dir: Path, check, figures: bool) -> dict:
    """analysis.json's record of a whole run's inputs before its outputs are known: this
    toolkit and its libraries, the sha256 of run.json, of the raw tree (``check``:
    :class:`netrepro.runfolder.integrity.RawCheck`) and of the INCOMPLETE marker if any, whether figures
    were drawn and whether the raw files were damaged (``partial``)."""
    marker = incomplete_marker(run_dir)
    return {
        "made_by": toolkit(), "libraries": libraries(),
        "inputs": {"run_json_sha256": sha256_file(run_json(run_dir)), "raw_tree_sha256": check.tree_sha256(),
                   "raw_check": check.summary(),
                   "incomplete_marker_sha256": sha256_file(marker) if marker.is_file() else None},
        "figures": bool(figures), "partial": bool(check.damaged),
    }


__all__ = ["VERSION_ENV", "toolkit", "libraries", "sources_sha256", "run_record"]
