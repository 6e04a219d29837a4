"""Papers as plug-ins: one sub-package per paper, each with an `EXPERIMENT` implementing
`AbstractExperiment` (`flows.experiments.base`). The CLI (`flows check|simulate|sweep`) is
generated from `EXPERIMENTS`; adding a paper adds one sub-package and one line here."""

from . import bias_plateau as bias_plateau
from . import deep_linear as deep_linear
from . import linear_teacher as linear_teacher
from . import multistage as multistage
from .base import AbstractExperiment as AbstractExperiment
from .base import Report as Report
from .base import Simulated as Simulated

#: The registry: CLI name → experiment.
EXPERIMENTS: dict[str, AbstractExperiment] = {
    e.name: e
    for e in (
        multistage.EXPERIMENT,
        bias_plateau.EXPERIMENT,
        linear_teacher.EXPERIMENT,
        deep_linear.EXPERIMENT,
    )
}

__all__ = [
    "EXPERIMENTS",
    "AbstractExperiment",
    "Report",
    "Simulated",
    "bias_plateau",
    "deep_linear",
    "linear_teacher",
    "multistage",
]
