"""The one error type of the analysis: a run folder that cannot be analysed."""

from __future__ import annotations

from pathlib import Path


class AnalysisError(ValueError):
    """The run directory cannot be analysed. ``str(err)`` is one line: file: what was expected."""

    def __init__(self, path: Path | str, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")
