"""The verdict (verdict.json, :func:`analysis.claims.evaluate`) told on the console: a label per
claim status and the run's verdict in one line. Light to import (no plotting library), so
that the command line can import it for every command.
"""

from __future__ import annotations

from analysis.health import failure_line

#: How a claim's status is shown on the console.
LABEL = {"holds": "HOLDS", "fails": "FAILS", "not evaluable": "NOT EVALUABLE", "inconclusive": "INCONCLUSIVE",
         "undecided": "UNDECIDED", "not applicable": "NOT APPLICABLE"}


#: Every status a claim can have in verdict.json (analysis.claims.evaluate), in the order the
#: verdict's counts name them: the judged ones first, then those the run could not judge.
STATUSES = ("holds", "fails", "undecided", "inconclusive", "not evaluable", "not applicable")


def status_counts(verdict: dict, means: dict[str, str] | None = None) -> list[str]:
    """Every claim status of verdict.json ``verdict`` counted, the non-zero ones only, in the
    order of :data:`STATUSES`, the claims named beside every status but ``holds``:
    ``["1 of 3 claims hold", "1 fails (link-used)", "1 undecided (pie-near-target)"]``
    (``0 of 2 claims hold`` when none holds: the count of all claims is told there), each
    followed by ``: <means[status]>`` where ``means`` says what a status means. Empty for a
    verdict without claims."""
    claims = verdict.get("claims") or []
    if not claims:
        return []
    held = sum(c.get("status") == "holds" for c in claims)
    parts = [f"{held} of {len(claims)} claim{'s' if len(claims) > 1 else ''} hold{'' if len(claims) > 1 else 's'}"]
    for status in STATUSES[1:]:
        ids = [c["id"] for c in claims if c.get("status") == status]
        if ids:
            parts.append(f"{len(ids)} {status} ({', '.join(ids)})" + (f": {means[status]}" if status in (means or {}) else ""))
    return parts


def verdict_line(verdict: dict) -> str:
    """The run's verdict in one line: ``reproduced``, ``not reproduced`` or ``inconclusive``,
    then every claim status counted (:func:`status_counts`: a failed claim is never left out,
    and the claims undecided, inconclusive or not evaluable are listed beside a verdict of not
    reproduced too), then ``the substrate failed N health checks: <trial>: <check> <value>
    (<max|min> <threshold>); ...`` (:func:`analysis.health.failure_line`) and, when claims are
    undecided, ``their 95 % intervals straddle a bound; REPEAT=<n> would likely decide them``
    (the most repetitions any of them needs)."""
    v = verdict.get("verdict") or ("reproduced" if verdict.get("reproduced") else "not reproduced")
    failed = verdict.get("health_failures") or []
    parts = status_counts(verdict)
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
        whose = "the undecided claims'" if len(undecided) > 1 else "the undecided claim's"
        parts.append(f"{whose} 95 % intervals straddle a bound; {then}")
    return v + (": " + "; ".join(parts) if parts else "")


def changes_text(changes: dict[str, list[str]]) -> str:
    """A run's claims changed by an experiment file (:func:`analysis.claims.claims_changed`)
    in words: ``changed pie-near-target; added link-used; removed x``."""
    return "; ".join(f"{how} {', '.join(ids)}" for how, ids in changes.items() if ids)


def claims_changed_line(changes: dict[str, list[str]], experiment: str, rejudged: bool) -> str:
    """The console's line when the experiment file ``experiment`` (EXPERIMENT) has other claims
    than those recorded in the run (``changes``: :func:`analysis.claims.claims_changed`):
    which, by which claims the run was judged, and how to judge it by the file's instead."""
    if rejudged:
        return (f"re-judged with the claims of {experiment}, changed after the run ({changes_text(changes)}), "
                "not with those recorded in the run: a new analysis folder, whose verdict.json and report say so")
    return (f"the claims of {experiment} differ from those recorded in the run ({changes_text(changes)}); "
            "judged by the recorded claims, fixed before the run; add --rejudge to judge with the file's claims "
            "(written as a re-judgement into a new analysis folder)")


__all__ = ["LABEL", "STATUSES", "status_counts", "verdict_line", "changes_text", "claims_changed_line"]
