"""What every experiment returns, and how its outputs are written."""

from __future__ import annotations

import abc
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from .._checks import Check
from .._errors import ConfigError
from .._flags import Flag
from .._io import MANIFEST as MANIFEST
from .._io import OutputDir as OutputDir
from .._io import check_output_path as check_output_path
from .._trajectory import Trajectory, versions

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure


@dataclasses.dataclass
class Report:
    """Result of `flows check <experiment>`: the checks, the files written and a summary."""

    name: str
    checks: list[Check]
    files: list[Path]
    results: dict


def write_results_json(path: Path, name: str, config: dict, checks, extra: dict) -> None:
    payload = {
        "experiment": name,
        "config": config,
        "versions": versions(),
        "checks": [c.to_dict() for c in checks],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=_default))


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, Path):
        return str(o)
    if isinstance(o, Mapping):  # e.g. a trajectory's `SolveStats`: its JSON form
        return dict(o)
    return str(o)


@overload
def new_figure(
    nrows: Literal[1] = 1, ncols: Literal[1] = 1, **kwargs: Any
) -> tuple[Figure, Axes]: ...
@overload
def new_figure(nrows: int, ncols: int, **kwargs: Any) -> tuple[Figure, np.ndarray]: ...
def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes, without pyplot: no global backend switch, no figure manager,
    so library plotting neither leaks figures nor breaks a notebook's inline backend.

    The axes are `fig.subplots(nrows, ncols, **kwargs)`: one `Axes` for a 1 × 1 grid, else
    an array of them (typed as such for the default `squeeze=True`)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kwargs.pop("figsize", None))
    return fig, fig.subplots(nrows, ncols, **kwargs)


def mpl_rcparams():
    """matplotlib's rcParams (imported lazily, like the rest of the plotting)."""
    import matplotlib

    return matplotlib.rcParams


# ---------------------------------------------------------------------------------------
# The plug-in interface


@dataclasses.dataclass
class Simulated:
    """What `AbstractExperiment.simulate` returns: the run, and the rtol its accuracy
    certificate is judged against (None for a discrete baseline such as GD)."""

    traj: Trajectory
    rtol: float | None


class AbstractExperiment(abc.ABC):
    """One paper as a plug-in: `flows check|simulate|sweep <name>` are generated from it.

    A member declares `name` (the CLI name), `title` (the paper), `files` (what `run`
    writes into `out/<name>/`), `simulate_flags` and `sweep_flags`, and implements
    `default_config`, `run` and `simulate`; `sweep` is optional (the CLI then has no
    `flows sweep <name>`).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    files: ClassVar[tuple[str, ...]]
    simulate_flags: ClassVar[tuple[Flag, ...]]
    sweep_flags: ClassVar[tuple[Flag, ...]] = ()

    @abc.abstractmethod
    def default_config(self, quick: bool = False):
        """The built-in configuration (`quick`: a smaller, faster one)."""

    @abc.abstractmethod
    def run(self, cfg, out: Path, *, progress: bool = True) -> Report:
        """`flows check <name>`: every run and check; outputs under `out/<name>/`."""

    @abc.abstractmethod
    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """`flows simulate <name>`: one run from the given flags (name → value; absent
        flags take the experiment's defaults)."""

    def sweep(self, out: Path, options: dict, **engine) -> Any:
        """`flows sweep <name>`: a resumable grid through `flows.sweep`'s engine."""
        raise ConfigError(f"`flows sweep {self.name}` is not available.")

    @property
    def has_sweep(self) -> bool:
        return type(self).sweep is not AbstractExperiment.sweep
