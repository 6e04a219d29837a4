"""Papers as plug-ins: one sub-package per paper, each with an `EXPERIMENT` implementing
`AbstractExperiment` (`flows.experiments.base`). The CLI (`flows check|simulate|sweep|
derive`) is generated from `EXPERIMENTS`.

`EXPERIMENTS` is the one registry: the papers shipped here (`BUILTIN`, one sub-package
name each), then every installed package's entry point in the group `flows.papers`
(`ENTRY_POINT_GROUP`) — a paper outside this repository registers itself with

    [project.entry-points."flows.papers"]
    my-paper = "my_package.experiment:EXPERIMENT"

in its own `pyproject.toml`, and `flows check my-paper` exists once it is installed; no
edit to the toolkit. The entry point's name must be the experiment's `name`.
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points

from .base import AbstractExperiment as AbstractExperiment
from .base import Report as Report
from .base import Simulated as Simulated

#: The papers shipped with the toolkit: sub-packages of `flows.experiments`, in the order
#: `flows check all` runs them.
BUILTIN = ("multistage", "bias_plateau", "linear_teacher", "deep_linear")
#: The entry-point group through which installed packages add papers.
ENTRY_POINT_GROUP = "flows.papers"


def _check(obj, where: str) -> AbstractExperiment:
    if not isinstance(obj, AbstractExperiment):
        raise TypeError(
            f"{where} is {type(obj).__name__}, not a flows.experiments.AbstractExperiment "
            "instance (point the entry point at the paper's EXPERIMENT object)"
        )
    return obj


def discover(entry_points_=None) -> dict[str, AbstractExperiment]:
    """CLI name → experiment: `BUILTIN`, then the `flows.papers` entry points (or
    `entry_points_`, for tests). A plug-in that fails to load, is not an experiment, is
    registered under another name than its `name`, or takes a name already registered is
    skipped with a one-line warning naming it: one broken package never stops the
    others."""
    found: dict[str, AbstractExperiment] = {}
    for sub in BUILTIN:
        exp = _check(importlib.import_module(f"{__name__}.{sub}").EXPERIMENT, sub)
        found[exp.name] = exp
    eps = entry_points(group=ENTRY_POINT_GROUP) if entry_points_ is None else entry_points_
    for ep in eps:
        try:
            exp = _check(ep.load(), f"entry point {ep.name!r} ({ep.value})")
            if exp.name != ep.name:
                raise ValueError(f"it is registered as {ep.name!r} but its name is {exp.name!r}")
            if exp.name in found and found[exp.name] is not exp:
                raise ValueError(f"the name {exp.name!r} is taken by another paper")
        except Exception as exc:  # noqa: BLE001 - any failure of a plug-in is reported
            warnings.warn(
                f"flows: paper plug-in {ep.name!r} ({ep.value}) skipped: {exc}", stacklevel=2
            )
            continue
        found[exp.name] = exp
    return found


#: The registry: CLI name → experiment.
EXPERIMENTS: dict[str, AbstractExperiment] = discover()

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "EXPERIMENTS",
    "AbstractExperiment",
    "Report",
    "Simulated",
    "discover",
]
