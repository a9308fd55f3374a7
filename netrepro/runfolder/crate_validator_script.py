"""Check an RO-Crate with roc-validator, offline: the script
:func:`netrepro.runfolder.cratecheck.validate_crate` runs with the python of the validator's own
virtual environment (``.venv-crate/``, ``make venv-crate``).

It imports ``rocrate_validator`` and ``requests_cache``, which live only in that environment
(roc-validator pins rich<14; .venv has rich 14, requirements-crate-validator.txt): netrepro must
never import this module, only run it as a file. It imports nothing of netrepro either, and
nothing beyond the standard library, roc-validator and what roc-validator installs.

Usage::

    python crate_validator_script.py CRATE --profile ID [--profile ID ...] --context URL=FILE [...]
                                     [--severity REQUIRED|RECOMMENDED|OPTIONAL]

- CRATE: a crate folder (holding ro-crate-metadata.json) or a .zip of one;
- ``--profile``: roc-validator's profile identifiers (``ro-crate-1.1``,
  ``process-run-crate-0.5``), each checked in the order given;
- ``--severity``: the level checked (roc-validator's ``requirement_severity``): REQUIRED (the
  default: the MUST rules), RECOMMENDED (the MUST and SHOULD rules) or OPTIONAL (all);
- ``--context URL=FILE``: a JSON-LD context the crate may name, served from FILE. The script
  puts these into a requests-cache sqlite cache in a temporary folder (through a requests
  adapter that reads the files: no network), then validates with ``offline=True`` on that cache,
  so the validator serves every remote document from it and a URL not given here is a cache
  miss, never a download.

Output (stdout), one line per problem, in the order found (a line repeated by the validator once)::

    <profile>: <SEVERITY> <check identifier> <check name>: <message> [entity <id>] [property <iri>]
    <profile>: ERROR validator: <exception type>: <text>        (the validator could not check)

and, last, one line per profile: ``<profile>: passed`` or ``<profile>: failed``.

Exit status: 0 every profile passed; 1 a profile failed or the validator could not check the
crate (a problem line says why); 2 the command line was wrong (a context file missing, an
unknown profile): one line on stderr.
"""

from __future__ import annotations

import argparse
import io
import logging
import sys
import tempfile
from pathlib import Path

import requests
from requests.adapters import BaseAdapter
from requests_cache import CachedSession
from urllib3.response import HTTPResponse


class _FileAdapter(BaseAdapter):
    """A requests adapter answering every GET from ``{url: file}``: the file's bytes with 200
    (``application/ld+json``), 404 for any other URL. It never opens a socket."""

    def __init__(self, files: dict[str, Path]):
        super().__init__()
        self.files = files

    def send(self, request, **kwargs):
        path = self.files.get(request.url)
        data = path.read_bytes() if path else b""
        r = requests.Response()
        r.url, r.request = request.url, request
        r.status_code = 200 if path else 404
        r.headers.update({"Content-Type": "application/ld+json", "Content-Length": str(len(data))})
        r.raw = HTTPResponse(body=io.BytesIO(data), headers=dict(r.headers), status=r.status_code,
                             preload_content=False, request_url=request.url)
        r.encoding = "utf-8"
        return r

    def close(self):
        pass


def warm_cache(cache_name: Path, contexts: dict[str, Path]) -> None:
    """Write ``contexts`` ({url: file}) into the requests-cache sqlite ``<cache_name>.sqlite``,
    as roc-validator's cached session (:class:`rocrate_validator.utils.http.HttpRequester`)
    reads it: backend sqlite, GET, never expiring.

    Raises:
        RuntimeError: a URL did not land in the cache.
    """
    with CachedSession(cache_name=str(cache_name), backend="sqlite", expire_after=-1,
                       allowable_methods=("GET",), allowable_codes=(200,)) as session:
        session.mount("https://", _FileAdapter(contexts))
        session.mount("http://", _FileAdapter(contexts))
        for url in contexts:
            session.get(url)
            if not session.cache.contains(url=url):
                raise RuntimeError(f"{url}: not stored in the cache {cache_name}.sqlite")


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def check(crate: str, profile: str, cache_name: Path, severity: str = "REQUIRED") -> tuple[bool, list[str]]:
    """Validate ``crate`` against ``profile`` at level ``severity`` (a name of roc-validator's
    ``Severity``), offline on ``cache_name``: (passed, problem lines). The validator's
    exceptions become a problem line."""
    from rocrate_validator import services
    from rocrate_validator.models import Severity, ValidationSettings

    settings = ValidationSettings(rocrate_uri=crate, profile_identifier=profile,
                                  requirement_severity=Severity[severity],
                                  offline=True, cache_path=cache_name)
    try:
        result = services.validate(settings)
    except Exception as e:  # noqa: BLE001 - whatever stops the validator is the crate's problem line
        return False, [f"{profile}: ERROR validator: {type(e).__name__}: {_one_line(e)}"]
    lines: list[str] = []
    for issue in result.get_issues():
        line = (f"{profile}: {issue.severity.name} {issue.check.identifier} {_one_line(issue.check.name)}: "
                f"{_one_line(issue.message)}")
        if issue.violatingEntity:
            line += f" [entity {issue.violatingEntity}]"
        if issue.violatingProperty:
            line += f" [property {issue.violatingProperty}]"
        if line not in lines:  # the validator may report one check on one entity twice
            lines.append(line)
    passed = bool(result.passed())
    if not passed and not lines:
        lines.append(f"{profile}: ERROR validator: the crate failed with no issue reported")
    return passed, lines


def _known_profiles() -> set[str]:
    from rocrate_validator import services

    return {p.identifier for p in services.get_profiles()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("crate")
    ap.add_argument("--profile", action="append", required=True)
    ap.add_argument("--context", action="append", default=[], metavar="URL=FILE")
    ap.add_argument("--severity", default="REQUIRED", choices=("REQUIRED", "RECOMMENDED", "OPTIONAL"))
    args = ap.parse_args(argv)
    # The validator's own log (a cache miss warns) goes to stderr; the problems are on stdout.
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)

    contexts: dict[str, Path] = {}
    for item in args.context:
        url, sep, file = item.partition("=")
        if not sep or not Path(file).is_file():
            print(f"crate_validator_script: --context {item}: expected URL=FILE of an existing file", file=sys.stderr)
            return 2
        contexts[url] = Path(file)
    unknown = [p for p in args.profile if p not in _known_profiles()]
    if unknown:
        print(f"crate_validator_script: unknown profile {', '.join(unknown)}; roc-validator has "
              f"{', '.join(sorted(_known_profiles()))}", file=sys.stderr)
        return 2
    if not Path(args.crate).exists():
        print(f"{args.profile[0]}: ERROR validator: {args.crate}: no such file or folder")
        return 1

    failed = False
    verdicts = []
    with tempfile.TemporaryDirectory(prefix="netrepro-crate-cache-") as tmp:
        cache_name = Path(tmp) / "http_cache"
        warm_cache(cache_name, contexts)
        for profile in args.profile:
            passed, lines = check(args.crate, profile, cache_name, args.severity)
            for line in lines:
                print(line)
            verdicts.append(f"{profile}: {'passed' if passed else 'failed'}")
            failed |= not passed
    for v in verdicts:
        print(v)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
