"""The verdict (verdict.json, :func:`analysis.claims.evaluate`) told on the console: a label per
claim status and the run's verdict in one line. Light to import (no plotting library), so
that the command line can import it for every command.
"""

from __future__ import annotations

from analysis.health import failure_line

#: How a claim's status is shown on the console.
LABEL = {"holds": "HOLDS", "fails": "FAILS", "not evaluable": "NOT EVALUABLE", "inconclusive": "INCONCLUSIVE",
         "undecided": "UNDECIDED", "not applicable": "NOT APPLICABLE"}


def verdict_line(verdict: dict) -> str:
    """The run's verdict in one line: ``reproduced``, ``not reproduced``, or ``inconclusive:
    the substrate failed N health checks: <trial>: <check> <value> (<max|min> <threshold>); ...``
    (:func:`analysis.health.failure_line`) and, when claims are undecided, ``N claims undecided
    (<id>, ...): their 95 % intervals straddle a bound; REPEAT=<n> would likely decide them``
    (the most repetitions any of them needs)."""
    v = verdict.get("verdict") or ("reproduced" if verdict.get("reproduced") else "not reproduced")
    failed = verdict.get("health_failures") or []
    if v != "inconclusive":
        return v
    parts = []
    if failed:
        parts.append(f"the substrate failed {len(failed)} health check{'s' if len(failed) > 1 else ''}: "
                     + "; ".join(failure_line(f) for f in failed))
    undecided = [c for c in verdict.get("claims") or [] if c.get("status") == "undecided"]
    if undecided:
        needed = [x.get("repetitions_to_decide") for c in undecided for x in c.get("values") or []
                  if x.get("outcome") == "undecided"]
        then = (f"REPEAT={max(needed)} would likely decide {'them' if len(undecided) > 1 else 'it'}"
                if needed and all(isinstance(n, int) for n in needed) else
                "a value sits on or very near its bound")
        parts.append(f"{len(undecided)} claim{'s' if len(undecided) > 1 else ''} undecided ("
                     + ", ".join(c["id"] for c in undecided) + f"): {'their' if len(undecided) > 1 else 'its'} "
                     f"95 % intervals straddle a bound; {then}")
    return v + (": " + "; ".join(parts) if parts else "")


__all__ = ["LABEL", "verdict_line"]
