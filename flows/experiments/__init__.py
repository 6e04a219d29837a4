"""The paper registry, and the papers shipped with the toolkit (one sub-package each,
each with an `EXPERIMENT` implementing `flows.plugin.AbstractExperiment`). The command
line (`flows check|simulate|sweep|derive`) is generated from `EXPERIMENTS`.

`EXPERIMENTS` is the one registry: the papers shipped here (`BUILTIN`, one sub-package
name each), then every installed package's entry point in the group `flows.papers`
(`ENTRY_POINT_GROUP`). A paper outside this repository registers itself in its own
`pyproject.toml` (the entry point's name is the experiment's `name`; see docs/plugin.md):

    [project.entry-points."flows.papers"]
    my-paper = "my_package.experiment:EXPERIMENT"

The registry is built on first use (the first `EXPERIMENTS` lookup), not on import:
importing this package, or `flows.plugin`, loads no paper.
"""

from __future__ import annotations

import importlib
import warnings
from importlib.metadata import entry_points
from typing import TYPE_CHECKING

from flows import plugin as _plugin

if TYPE_CHECKING:
    from flows.plugin import AbstractExperiment

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "EXPERIMENTS", "discover"]

#: The papers shipped with the toolkit: sub-packages of `flows.experiments`, in the order
#: `flows check all` runs them.
BUILTIN = ("multistage", "bias_plateau", "linear_teacher", "deep_linear")
#: The entry-point group through which installed packages add papers.
ENTRY_POINT_GROUP = "flows.papers"


def _check(obj, where: str) -> AbstractExperiment:
    if not isinstance(obj, _plugin.AbstractExperiment):
        raise TypeError(
            f"{where} is {type(obj).__name__}, not a flows.plugin.AbstractExperiment "
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


#: The registry: CLI name → experiment. Discovered on the first lookup (this module's
#: `__getattr__`), then kept here.
EXPERIMENTS: dict[str, AbstractExperiment]

#: Names that left this package for `flows.plugin` (the plug-in contract): one release
#: with a DeprecationWarning.
_MOVED = ("AbstractExperiment", "Report", "Simulated")


def __getattr__(name: str):
    if name == "EXPERIMENTS":
        registry = globals()["EXPERIMENTS"] = discover()
        return registry
    if name in _MOVED:
        warnings.warn(
            f"flows.experiments.{name} is deprecated and will be removed in the next "
            f"release: import it from flows.plugin (flows.plugin.{name}).",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(_plugin, name)
    raise AttributeError(f"module 'flows.experiments' has no attribute {name!r}")
