"""The rate scale's names as they were before the time scale joined it: :mod:`analysis.scales`
now sets the claims of runs against either scale (``scale="rate_scale"`` or ``"time_scale"``);
this module keeps the names its earlier callers import."""

from __future__ import annotations

from analysis.scales import (COLUMNS, PANEL_KEYS, axis_label, claim_parts, claim_values, draw_rate_scale,
                             mean_ci, rate_scale_of, rate_scale_table, report_section)

__all__ = ["COLUMNS", "PANEL_KEYS", "axis_label", "claim_parts", "claim_values", "draw_rate_scale",
           "mean_ci", "rate_scale_of", "rate_scale_table", "report_section"]
