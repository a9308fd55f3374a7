"""Check an RO-Crate (a run folder as ``netrepro export`` writes it: RO-Crate 1.1 conforming to
the Process Run Crate profile 0.5, https://w3id.org/ro/wfrun/process/0.5) with roc-validator,
offline.

roc-validator (PyPI ``roc-validator``, pinned in requirements-crate-validator.txt) lives in a
virtual environment of its own, ``.venv-crate/`` (``make venv-crate``; ``make test`` makes it):
it pins rich<14, which .venv's import-linter and progress display cannot share. So
:func:`validate_crate` never imports it: it runs
:mod:`netrepro.runfolder.crate_validator_script` (a file, never imported by netrepro) with that
environment's python, as a subprocess.

Which python: ``$NETREPRO_CRATE_VALIDATOR`` (:data:`VALIDATOR_ENV`; the path of a python, or of
a virtual environment whose ``bin/python`` is used), else the repository's
``.venv-crate/bin/python`` (:data:`DEFAULT_VENV`).

Nothing reaches the network: the JSON-LD contexts a crate of netrepro names are vendored in
``netrepro/schemas/jsonld/`` (:data:`CONTEXTS`; the folder's README.md gives each one's source,
commit and licence), and the script serves them to the validator from a requests-cache built
from those files in a temporary folder, with the validator in offline mode. A crate naming any
other remote context fails the check (the validator's "Unable to retrieve the JSON-LD context"),
rather than fetching it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from netrepro.core.errors import CrateValidatorError, RunFolderError
from netrepro.experiment.spec import REPO_ROOT

#: The environment variable naming the validator's python, or its virtual environment
#: (netrepro/core/envvars.py).
VALIDATOR_ENV = "NETREPRO_CRATE_VALIDATOR"
#: The validator's virtual environment when :data:`VALIDATOR_ENV` is not set.
DEFAULT_VENV = REPO_ROOT / ".venv-crate"
#: The command that makes :data:`DEFAULT_VENV` (the Makefile's target; its stamp is
#: ``.venv-crate/.installed``).
INSTALL_COMMAND = "make venv-crate"
#: The script the validator's python runs.
SCRIPT = Path(__file__).resolve().with_name("crate_validator_script.py")
#: The vendored JSON-LD contexts.
JSONLD_DIR = Path(__file__).resolve().parent.parent / "schemas" / "jsonld"
#: Context URL -> its vendored file under :data:`JSONLD_DIR`.
CONTEXTS = {
    "https://w3id.org/ro/crate/1.1/context": "ro-crate-1.1-context.jsonld",
    "https://w3id.org/ro/terms/workflow-run/context": "workflow-run-context.json",
}
#: roc-validator's identifiers of the profiles a crate of ``netrepro export`` conforms to.
PROFILES = ("ro-crate-1.1", "process-run-crate-0.5")
#: The seconds a validation may take before it is given up (a crate of netrepro: about 5 s).
TIMEOUT_S = 600.0


def validator_python(environ: dict[str, str] | None = None) -> Path:
    """The python that runs the validator: ``$NETREPRO_CRATE_VALIDATOR`` (a python, or a
    virtual environment's folder: its ``bin/python``), else ``.venv-crate/bin/python`` of the
    repository.

    Raises:
        CrateValidatorError: that python does not exist or cannot be run; the message names
            ``make venv-crate`` (or the variable, when it was set).
    """
    env = os.environ if environ is None else environ
    given = env.get(VALIDATOR_ENV, "")
    path = Path(given) if given else DEFAULT_VENV
    python = path / "bin" / "python" if path.is_dir() else path
    if not (python.is_file() and os.access(python, os.X_OK)):
        if given:
            raise CrateValidatorError(
                f"{VALIDATOR_ENV}={given}: no python of the RO-Crate validator there (expected an executable python "
                f"or a virtual environment with bin/python and roc-validator); unset it to use {DEFAULT_VENV}, "
                f"which `{INSTALL_COMMAND}` makes")
        raise CrateValidatorError(
            f"the RO-Crate validator is not installed: {python} is missing; run `{INSTALL_COMMAND}` (it makes "
            f"{DEFAULT_VENV.name}/ with requirements-crate-validator.txt; or set {VALIDATOR_ENV} to a python with "
            f"roc-validator 0.13.0)")
    return python


def validate_crate(crate: Path, profiles: tuple[str, ...] | list[str] = PROFILES, *,
                   timeout: float = TIMEOUT_S, severity: str = "REQUIRED") -> list[str]:
    """Check ``crate`` against each of ``profiles`` at roc-validator's ``severity`` level
    (REQUIRED by default: the MUST rules; RECOMMENDED adds the SHOULD rules), offline.

    Args:
        crate: the crate: a folder holding ``ro-crate-metadata.json``, or a ``.zip`` of one.
        profiles: roc-validator's profile identifiers (:data:`PROFILES` by default).
        timeout: seconds before the validator is given up.
        severity: ``REQUIRED``, ``RECOMMENDED`` or ``OPTIONAL`` (roc-validator's levels).

    Returns:
        The problems, one line each, in the validator's order:
        ``<profile>: <SEVERITY> <check id> <check name>: <message> [entity <id>] [property <iri>]``
        for a failed check (e.g. ``process-run-crate-0.5: REQUIRED process-run-crate-0.5_1.1
        Action instrument: The Action MUST have an instrument property ...``), or
        ``<profile>: ERROR validator: <why>`` when the validator could not check the crate
        (unreadable metadata, a context that is not vendored). Empty when every profile passes.

    Raises:
        RunFolderError: ``crate`` does not exist.
        CrateValidatorError: the validator's python is missing (the message names
            ``make venv-crate``), or the validator gave no verdict (an unknown profile, a
            crash, ``timeout`` passed): the message holds the end of its error output.
        ValueError: no profile, or an unknown ``severity``.
    """
    crate = Path(crate)
    if not crate.exists():
        raise RunFolderError(crate, "no such RO-Crate (expected a folder holding ro-crate-metadata.json, or a .zip)")
    if not profiles:
        raise ValueError("validate_crate: no profile to check against")
    if severity not in ("REQUIRED", "RECOMMENDED", "OPTIONAL"):
        raise ValueError(f"validate_crate: severity {severity!r}; expected REQUIRED, RECOMMENDED or OPTIONAL")
    cmd = [str(validator_python()), "-I", str(SCRIPT), str(crate.resolve()), "--severity", severity]
    for p in profiles:
        cmd += ["--profile", p]
    for url, name in CONTEXTS.items():
        cmd += ["--context", f"{url}={JSONLD_DIR / name}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CrateValidatorError(f"{crate}: the RO-Crate validator gave no verdict within {timeout:g} s") from exc
    except OSError as exc:
        raise CrateValidatorError(f"{crate}: the RO-Crate validator could not be started ({cmd[0]}): {exc}") from exc
    if proc.returncode == 0:
        return []
    if proc.returncode == 1:
        lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
        verdicts = {f"{p}: {v}" for p in profiles for v in ("passed", "failed")}
        return ([ln for ln in lines if ln not in verdicts] or [ln for ln in lines if ln.endswith(": failed")]
                or [f"{crate}: the RO-Crate validator failed the crate without naming a check"])
    tail = " | ".join(ln.strip() for ln in proc.stderr.strip().splitlines()[-5:] if ln.strip())
    raise CrateValidatorError(f"{crate}: the RO-Crate validator stopped with exit status {proc.returncode} "
                              f"without a verdict: {tail or '(no error output)'}")
