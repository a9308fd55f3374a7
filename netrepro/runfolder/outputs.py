"""Where an analysis writes in a run folder, so that results are written once.

Each set of analysis outputs (:data:`netrepro.runfolder.layout.OUTPUT_NAMES`) comes with
``analysis.json``, the record of what made it and from what (:mod:`analysis.provenance` makes
it). The set whose ``analysis.json`` has the same identity (:func:`identity`: toolkit version,
libraries, inputs, figures drawn or not) is rewritten in place, and since every output is
deterministic its bytes do not change (an identical file is left as it is:
:mod:`netrepro.runfolder.atomic`). Otherwise the first analysis of an intact run goes into the
run folder itself, and any other (another toolkit version, other libraries, or damaged raw data
analysed with --partial) into a new folder ``<run>/analysis-<version>[-partial][-N]/``
(:func:`output_dir`); earlier outputs are never replaced. run.json and raw/ are never written.
A crate (``netrepro export``) is never written: its analysis goes into a new folder beside it
(:func:`crate_output_dir`).
"""

from __future__ import annotations

import json
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.atomic import write_text
from netrepro.runfolder.integrity import plain_files, sha256_file
from netrepro.runfolder.layout import ANALYSIS_RECORD, OUTPUT_NAMES


def identity(record: dict) -> dict | None:
    """The part of an analysis.json that decides whether two analyses are the same one:
    ``{"version", "libraries", "inputs", "figures"}``; None when ``record`` lacks one."""
    try:
        return {"version": record["made_by"]["version"], "libraries": record["libraries"],
                "inputs": record["inputs"], "figures": record["figures"]}
    except (KeyError, TypeError):
        return None


def _read_record(folder: Path) -> dict | None:
    try:
        rec = json.loads((folder / ANALYSIS_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return rec if isinstance(rec, dict) else None


def _free(folder: Path) -> bool:
    return not any((folder / n).exists() or (folder / n).is_symlink() for n in OUTPUT_NAMES)


def _own_outputs(folder: Path) -> Path:
    """``folder`` after checking that its outputs are real files and folders (nothing written
    through a link); RunFolderError naming the first that is not."""
    plain_files(folder, "expected the analysis' own outputs, real files and folders of the run "
                        "(an analysis never writes through a link)", OUTPUT_NAMES)
    return folder


def analysis_folders(run_dir: Path, rejudgements: bool = False) -> list[Path]:
    """The run's later analyses, each in a real folder ``analysis-<version>[-partial][-N]/``
    (:func:`output_dir`), in name order; a link of such a name is not one of them. A
    re-judgement (its analysis.json has ``rejudgement``: the run judged with claims changed
    after it) is one of them only with ``rejudgements``: it is not the run's own analysis,
    so export never publishes it as such."""
    return sorted(p for p in run_dir.glob("analysis-*") if p.is_dir() and not p.is_symlink()
                  and (rejudgements or "rejudgement" not in (_read_record(p) or {})))


def output_dir(run_dir: Path, record: dict, intact: bool) -> Path:
    """Where an analysis with this ``record`` (analysis.json without ``outputs``) writes.

    Args:
        run_dir: the run folder.
        record: the new analysis.json (made_by, libraries, inputs, figures).
        intact: the raw files match the record (no damage accepted with --partial).
    Returns:
        The folder of the same analysis if there is one; else the run folder if no analysis
        was written there yet, the data are intact and the record is not of a re-judgement
        (``rejudgement``: the run judged with claims changed after it, :func:`analysis.analyze`);
        else the first free name of ``analysis-<version>[-partial][-rejudged][-N]`` inside
        the run folder. Nothing is created.
    Raises:
        RunFolderError: an output of the folder chosen (``figures/``, ``summary.csv``...), or
            anything under one, is a symbolic link or a special file: the analysis would write
            through it, anywhere (a run folder may come from anyone).
    """
    me = identity(record)
    again = bool(record.get("rejudgement"))
    candidates = ([] if again else [run_dir]) + analysis_folders(run_dir, rejudgements=again)
    for folder in candidates:
        rec = _read_record(folder)
        if rec is not None and identity(rec) == me:
            return _own_outputs(folder)
    if intact and not again and _free(run_dir):
        return _own_outputs(run_dir)
    base = f"analysis-{record['made_by']['version']}" + ("" if intact else "-partial") + ("-rejudged" if again else "")
    n, name = 1, base
    while (run_dir / name).exists() or (run_dir / name).is_symlink():
        n += 1
        name = f"{base}-{n}"
    return run_dir / name


def seal(out: Path, record: dict, outputs: list[Path]) -> list[Path]:
    """Finish an analysis: put the sha256 of each output (``outputs``: absolute paths inside
    ``out``) into ``record["outputs"]`` (keys relative to ``out``), write ``record`` as
    ``out/analysis.json`` and return ``outputs`` with that file appended.

    Raises:
        OSError: a file cannot be read or written.
    """
    record["outputs"] = {p.relative_to(out).as_posix(): sha256_file(p) for p in outputs}
    return [*outputs, write_text(out / ANALYSIS_RECORD, json.dumps(record, indent=1) + "\n")]


def crate_output_dir(crate: Path) -> Path:
    """Make and return the new folder an analysis of the crate ``crate`` (a folder, or a zip:
    :mod:`netrepro.runfolder.crate`) writes into, beside it: the first free of
    ``<crate name without .zip>-analysis``, ``-analysis-2``, ``-analysis-3``... (made with
    ``mkdir``, so a folder that exists, or appears meanwhile, is never written). A crate is
    input only: it stays byte for byte as published, so it can be checked again.

    Raises:
        RunFolderError: the folder beside the crate cannot be written (read-only, a full
            disk), naming it and what was expected.
    """
    base, n = crate.name.removesuffix(".zip") + "-analysis", 1
    while True:
        out = crate.parent / (base if n == 1 else f"{base}-{n}")
        try:
            out.mkdir()
            return out
        except FileExistsError:
            n += 1
        except OSError as exc:
            raise RunFolderError(crate.parent, f"cannot hold the analysis folder {out.name} ({exc.strerror}); expected "
                                               f"a folder that can be written beside the crate {crate.name} (its "
                                               "outputs go there; copy the crate into one)") from None
