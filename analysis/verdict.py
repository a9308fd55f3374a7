"""A verdict (verdict.json, :func:`analysis.generic.evaluate`) told on the console: a label per
claim status and the run's verdict in one line. Light to import (no plotting library), so
that the command line can import it for every command.
"""

from __future__ import annotations

from analysis.health import failure_line

#: How a claim's status is shown on the console.
LABEL = {"holds": "HOLDS", "fails": "FAILS", "not evaluable": "NOT EVALUABLE", "inconclusive": "INCONCLUSIVE",
         "not applicable": "NOT APPLICABLE"}


def verdict_line(verdict: dict) -> str:
    """The run's verdict in one line: ``reproduced``, ``not reproduced``, or ``inconclusive:
    the substrate failed N health checks: <trial>: <check> <value> (<max|min> <threshold>); ...``
    (:func:`analysis.health.failure_line`)."""
    v = verdict.get("verdict") or ("reproduced" if verdict.get("reproduced") else "not reproduced")
    failed = verdict.get("health_failures") or []
    if v == "inconclusive" and failed:
        v += f": the substrate failed {len(failed)} health check{'s' if len(failed) > 1 else ''}: " + \
            "; ".join(failure_line(f) for f in failed)
    return v


__all__ = ["LABEL", "verdict_line"]
