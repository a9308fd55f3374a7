"""A trial's variables for playbooks/trial.yml (:func:`trial_vars`), and the experiment as a
site runs it: at the site's rate scale, its phases at TIME_SCALE, the node the barrier's
start is chosen on, a trial's settings in one phrase."""

from __future__ import annotations

import math
import os
from pathlib import Path

from netrepro.model import Trial, choose_rate_scale, rate_scale_option, trial_timeline
from netrepro.experiment.rolevars import iperf3_argv, model_ftp_source
from netrepro.runner.console import log
from netrepro.sites import Site
from netrepro.experiment.spec import Spec, check_time_scale


def trial_vars(spec: Spec, trial: Trial, time_scale: float, fetch_dir: Path, lead_s: float) -> dict:
    """Extra var ``trial`` for playbooks/trial.yml (see its header for the shape): the timeline of
    one of the model's trials (:func:`netrepro.model.trial_timeline`) at ``time_scale``, with each
    iperf3 client's arguments (:func:`netrepro.experiment.rolevars.iperf3_argv`), the base RTT's length
    (0 without ``base_rtt``), the FTP files (:func:`netrepro.experiment.rolevars.model_ftp_source`),
    ``id``, ``labels``, ``lead_s`` and ``fetch_dir``.

    Raises ValueError (``TIME_SCALE: ...``, one line) for a scale outside
    :func:`netrepro.experiment.spec.check_time_scale`'s range (a resumed run's scale comes from its
    run.json), or a trial whose traffic cannot run (:func:`netrepro.model.trial_timeline`).
    """
    check_time_scale(time_scale)
    timeline = trial_timeline(spec.model, trial, time_scale)
    timeline["iperf3"] = {n: [{"id": x["id"], "start_s": x["start_s"], "argv": iperf3_argv(x["item"], x["address"], time_scale)}
                          for x in items] for n, items in timeline["iperf3"].items()}
    base = spec.model.base_rtt
    ftp = model_ftp_source(spec.model) or {}
    return {"id": trial.id, "labels": trial.labels_data(), "lead_s": lead_s,
            "base_rtt_s": round(base.duration_s * time_scale, 3) if base else 0.0, "files": ftp.get("files", []),
            "fetch_dir": str(fetch_dir), **timeline}


def rate_scale_request(option: str | float | None = None) -> tuple[str | float | None, str]:
    """The rate scale asked for and who asked: ``(option, "--rate-scale")`` when the command
    line gave one (not None), else ``($RATE_SCALE or None, "RATE_SCALE")``. Not checked here:
    :func:`netrepro.model.rate_scale_option` checks it against the experiment, naming the
    second item."""
    if option is not None:
        return option, "--rate-scale"
    return os.environ.get("RATE_SCALE"), "RATE_SCALE"


def spec_at_rate_scale(spec: Spec, site: Site, choose: bool = False, rate_scale: str | float | None = None) -> Spec:
    """The experiment at the rate scale k of this site (:func:`netrepro.model.choose_rate_scale`:
    ``rate_scale`` (--rate-scale), else RATE_SCALE (:func:`rate_scale_request`), else from the
    site's rate ceiling (a simulator's) or measured forwarding capacity; ``spec`` itself at k = 1).
    The scale is chosen when provisioning (``choose``), said on the console and kept in the
    site's state; the run uses the same one and records it. A scale asked for (``rate_scale``
    or RATE_SCALE) that differs from the kept one is refused, not ignored: the nodes were
    provisioned at the kept one.

    Raises:
        ValueError: a bad --rate-scale or RATE_SCALE, a scale below the experiment's
            ``rate_scale.min``, or one other than the scale the site was provisioned at (one
            line naming both).
    """
    st = site.load_state()
    if not choose and "rate_scale" in st:
        option, name = rate_scale_request(rate_scale)
        asked, kept = rate_scale_option(spec.model, option, name), float(st["rate_scale"]["k"])
        if asked is not None and not math.isclose(asked, kept, rel_tol=1e-9):
            raise ValueError(f"{name}={option}: the site was provisioned at rate scale {kept:g} "
                             f"({st['rate_scale'].get('why')}); expected {kept:g} or nothing, or provision it again "
                             f"with {name}={option}")
    if choose or "rate_scale" not in st:
        status = site.status()
        cap = (status.get("capacity") or {}).get("forwarding_mbit")
        option, name = rate_scale_request(rate_scale)
        k, why = choose_rate_scale(spec.model, cap, option, status.get("rate_ceiling_mbit"), name)
        st = site.load_state()
        st["rate_scale"] = {"k": k, "why": why}
        site.save_state(st)
        log(f"[provision] rate scale {k:g}: {why}")
    k = float(st["rate_scale"]["k"])
    return spec if k == 1 else spec.at_rate_scale(k)


def sampled_node(spec: Spec) -> str:
    """The node whose clock the barrier's start is chosen on and whose qdisc dumps run.json
    keeps: the first queue sampler's node, or the first node."""
    return next((c.node for c in spec.model.collectors), next(iter(spec.model.nodes)))


def scaled_phases(spec: Spec, time_scale: float) -> list[dict]:
    """The phases (possibly none) with start and end multiplied by ``time_scale``."""
    return [p.scaled(time_scale) for p in spec.model.phases]


def settings_text(spec: Spec, trial: Trial) -> str:
    """One phrase of a trial's settings for the progress lines: its labels, else its id."""
    return ", ".join(f"{k} {v}" for k, v in trial.labels.items()) or trial.id
