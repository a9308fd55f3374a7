"""Which toolkit made an analysis, and where its outputs go: results are written once.

Each set of analysis outputs (tidy.csv.gz, summary.csv, figures/, verdict.json, report.md)
comes with ``analysis.json``, which records what made it and from what:

- ``made_by``: the toolkit version (see :func:`toolkit`), the package version, the git
  commit and the sha256 of the analysis sources; ``libraries``: the versions of Python,
  numpy, pandas, matplotlib and seaborn (they shape the numbers and the figures' bytes);
- ``inputs``: sha256 of run.json and of the raw tree as read, and the raw check;
- ``outputs``: sha256 of every output file.

Where the outputs go (:func:`output_dir`): the set whose ``analysis.json`` has the same
identity (toolkit version, libraries, inputs, figures drawn or not) is rewritten in place,
and since every output is deterministic its bytes do not change (an identical file is left
as it is, see :mod:`analysis.io`). Otherwise the first analysis of an intact run goes into
the run folder itself, and any other (another toolkit version, other libraries, or damaged
raw data analysed with --partial) into a new folder ``<run>/analysis-<version>[-partial][-N]/``;
earlier outputs are never replaced. run.json and raw/ are never written.

The version is ``NETREPRO_TOOLKIT_VERSION`` when that environment variable is set (a name
of letters, digits and ``. _ + -``; then git is not asked, so that a test or a user can name
a version), else ``<package version>-g<12 hex of the git commit>``, with
``-dirty-<8 hex of the sources' sha256>`` when the analysis sources differ from that commit,
or ``<package version>-src-<8 hex>`` outside a git checkout.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import subprocess
from pathlib import Path

from analysis.run import AnalysisError

#: Environment variable naming the toolkit version (overrides git; listed in docs/reference.md,
#: from netrepro/core/envvars.py).
VERSION_ENV = "NETREPRO_TOOLKIT_VERSION"
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")

#: The files and folders of one analysis output set.
OUTPUT_NAMES = ("tidy.csv.gz", "summary.csv", "figures", "verdict.json", "report.md", "analysis.json",
                "repetitions", "repetitions.csv", "flent")
RECORD = "analysis.json"

_ANALYSIS_DIR = Path(__file__).resolve().parent
_REPO = _ANALYSIS_DIR.parent


def _sources() -> list[Path]:
    """The files whose code shapes an analysis's outputs: analysis/*.py and its subpackages'
    (analysis/substrate/), the spec reader, the model and the conversion of a version 1 file
    (netrepro/experiment/migrate.py)."""
    import netrepro

    pkg = Path(netrepro.__file__).resolve().parent
    files = sorted(_ANALYSIS_DIR.rglob("*.py"))
    files += [pkg / n for n in ("experiment/spec.py", "core/yamlfile.py", "experiment/migrate.py")]
    files += sorted((pkg / "model").glob("*.py"))
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
        AnalysisError: NETREPRO_TOOLKIT_VERSION set to something that is not a version name.
    """
    from netrepro import __version__ as package

    src = sources_sha256()
    env = os.environ.get(VERSION_ENV)
    if env is not None:
        if not _VERSION.match(env):
            raise AnalysisError(VERSION_ENV, f"expected a version name (letters, digits, . _ + -; at most 64), got {env[:80]!r}")
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


def identity(record: dict) -> dict | None:
    """The part of an analysis.json that decides whether two analyses are the same one."""
    try:
        return {"version": record["made_by"]["version"], "libraries": record["libraries"],
                "inputs": record["inputs"], "figures": record["figures"]}
    except (KeyError, TypeError):
        return None


def _read_record(folder: Path) -> dict | None:
    try:
        rec = json.loads((folder / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _free(folder: Path) -> bool:
    return not any((folder / n).exists() or (folder / n).is_symlink() for n in OUTPUT_NAMES)


def output_dir(run_dir: Path, record: dict, intact: bool) -> Path:
    """Where an analysis with this ``record`` (analysis.json without ``outputs``) writes.

    Args:
        run_dir: the run folder.
        record: the new analysis.json (made_by, libraries, inputs, figures).
        intact: the raw files match the record (no damage accepted with --partial).
    Returns:
        The folder of the same analysis if there is one; else the run folder if no analysis
        was written there yet and the data are intact; else the first free name of
        ``analysis-<version>[-partial][-N]`` inside the run folder. Nothing is created.
    """
    me = identity(record)
    candidates = [run_dir] + sorted(p for p in run_dir.glob("analysis-*") if p.is_dir() and not p.is_symlink())
    for folder in candidates:
        rec = _read_record(folder)
        if rec is not None and identity(rec) == me:
            return folder
    if intact and _free(run_dir):
        return run_dir
    base = f"analysis-{record['made_by']['version']}" + ("" if intact else "-partial")
    n, name = 1, base
    while (run_dir / name).exists() or (run_dir / name).is_symlink():
        n += 1
        name = f"{base}-{n}"
    return run_dir / name


__all__ = ["VERSION_ENV", "OUTPUT_NAMES", "RECORD", "INCOMPLETE", "INCOMPLETE_PROBLEM", "toolkit", "libraries",
           "identity", "output_dir", "sources_sha256", "run_record", "incomplete_problems", "seal"]

#: The marker ``netrepro run`` keeps in a run folder while it runs, and leaves there when the
#: run was interrupted or failed (netrepro.runner.run); its text says why.
INCOMPLETE = "INCOMPLETE"
#: How a report's problem list begins the line about that marker.
INCOMPLETE_PROBLEM = "the run is marked INCOMPLETE"


def incomplete_problems(run_dir: Path) -> list[str]:
    """``["the run is marked INCOMPLETE: <why>"]`` (the marker's text, blanks collapsed, at most
    200 characters) when ``run_dir`` holds the marker, else []."""
    marker = run_dir / INCOMPLETE
    if not marker.is_file():
        return []
    why = " ".join(marker.read_bytes().decode("utf-8", "replace").split())[:200]
    return [f"{INCOMPLETE_PROBLEM}: {why}" if why else INCOMPLETE_PROBLEM]


def seal(out: Path, record: dict, outputs: list[Path]) -> list[Path]:
    """Finish an analysis: put the sha256 of each output (``outputs``: absolute paths inside
    ``out``) into ``record["outputs"]`` (keys relative to ``out``), write ``record`` as
    ``out/analysis.json`` and return ``outputs`` with that file appended.

    Raises:
        OSError: a file cannot be read or written.
    """
    from analysis.integrity import sha256_file
    from analysis.io import write_text
    record["outputs"] = {p.relative_to(out).as_posix(): sha256_file(p) for p in outputs}
    return [*outputs, write_text(out / RECORD, json.dumps(record, indent=1) + "\n")]


def run_record(run_dir: Path, check, figures: bool) -> dict:
    """analysis.json's record of a whole run's inputs before its outputs are known: this
    toolkit and its libraries, the sha256 of run.json, of the raw tree (``check``:
    :class:`analysis.integrity.RawCheck`) and of the INCOMPLETE marker if any, whether figures
    were drawn and whether the raw files were damaged (``partial``)."""
    from analysis.integrity import sha256_file
    marker = run_dir / INCOMPLETE
    return {
        "made_by": toolkit(), "libraries": libraries(),
        "inputs": {"run_json_sha256": sha256_file(run_dir / "run.json"), "raw_tree_sha256": check.tree_sha256(),
                   "raw_check": check.summary(),
                   "incomplete_marker_sha256": sha256_file(marker) if marker.is_file() else None},
        "figures": bool(figures), "partial": bool(check.damaged),
    }
