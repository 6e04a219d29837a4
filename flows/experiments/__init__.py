"""Experiments: one module per paper, each with `Config`, `default_config(quick)` and
`run(config, out_dir)` returning a `Report` (checks, files, results)."""

from . import bias_plateau as bias_plateau
from . import linear_teacher as linear_teacher
from . import multistage as multistage
from .base import Report as Report

#: Registry used by `flows check`; adding a paper adds one entry.
EXPERIMENTS = {
    "multistage": multistage,
    "bias-plateau": bias_plateau,
    "linear-teacher": linear_teacher,
}

__all__ = ["EXPERIMENTS", "Report", "bias_plateau", "linear_teacher", "multistage"]
