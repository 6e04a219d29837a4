"""What every experiment returns, and how its outputs are written."""

from __future__ import annotations

import abc
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from flows import Check, ConfigError, Trajectory, versions
from flows.claims import Reference, Trend, annotate

# The figure style's public home is `flows.figures`; re-exported here for the papers
# (`from ..base import new_figure, save_figure`).
from flows.figures import COLORS as COLORS
from flows.figures import COLUMN_WIDTH as COLUMN_WIDTH
from flows.figures import CYCLE as CYCLE
from flows.figures import STYLE as STYLE
from flows.figures import TEXT_WIDTH as TEXT_WIDTH
from flows.figures import VECTOR_SUFFIX as VECTOR_SUFFIX
from flows.figures import figure_size as figure_size
from flows.figures import figure_style as figure_style
from flows.figures import new_figure as new_figure
from flows.figures import save_figure as save_figure
from flows.plugin import INDEX_NAME as INDEX_NAME
from flows.plugin import MANIFEST as MANIFEST
from flows.plugin import REPORT_NAME as REPORT_NAME
from flows.plugin import Flag, add_owned_file
from flows.plugin import OutputDir as OutputDir
from flows.plugin import check_output_path as check_output_path


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
    #: Where each claim stands in the paper (section, statement, figure), keyed as
    #: `flows.claims._checks.annotate` matches: a claim, a part of a claim, or a source.
    references: ClassVar[Mapping[str, Reference]] = {}
    #: The module (dotted name) whose `IDENTITIES` (a list of `reduced.derive.Identity`)
    #: are the paper's symbolic derivations, settled by `flows derive <name>`; None: none.
    identities: ClassVar[str | None] = None

    @property
    def outputs(self) -> tuple[str, ...]:
        """Every file `flows check <name>` writes into `out/<name>/`: `files` and the
        HTML report."""
        return (*self.files, *((REPORT_NAME,) if REPORT_NAME not in self.files else ()))

    def trend(self, check: Check, cfg) -> Trend | None:
        """The finite-size trend `check` measured (e.g. T_d against ln m), or None. The
        default: none."""
        return None

    def annotate(self, checks, cfg=None) -> list[Check]:
        """`checks` with their paper reference (`references`, the title, the `source`)
        and finite-size trend (`trend`) attached; `run` calls it before writing results."""
        return annotate(
            checks, self.references, paper=self.title, trend=lambda c: self.trend(c, cfg)
        )

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


# ---------------------------------------------------------------------------------------
# The HTML report of `flows check <name>`


def _read_results(folder: Path) -> dict:
    try:
        data = json.loads((folder / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _loss_curves(folder: Path, names) -> list:
    """The loss curve of every trajectory file in `folder` (those that cannot be read are
    left out: the report shows what there is)."""
    from flows.plugin import Curve, hdf5_hazard

    curves = []
    for n in sorted(names):
        if not (n.startswith("trajectory") and n.endswith(".nc")):
            continue
        path = folder / n
        try:
            if hdf5_hazard(path) is not None:
                continue
            import xarray as xr

            with xr.open_dataset(path) as ds:
                if "loss" not in ds or ds["loss"].dims != ("time",):
                    continue
                t = ds["time"].values.astype(float)
                loss = ds["loss"].values.astype(float)
        except Exception:  # noqa: BLE001 - an unreadable file: no curve for it
            continue
        label = "main run" if n == "trajectory.nc" else n.removeprefix("trajectory_")[:-3]
        curves.append(Curve(label, t.tolist(), loss.tolist()))
    return curves


def write_report(
    exp: AbstractExperiment,
    report: Report,
    out: Path,
    *,
    mode: str = "",
    wall_s: float | None = None,
    command=None,
) -> Path:
    """Write `out/<name>/report.html` for a finished `exp.run` (figures, loss curves and
    provenance read from the folder it committed), and list it in the folder's manifest.

    **Returns:** the report's path. **Raises:** `ConfigError` if a `report.html` the
    toolkit did not write is in the way.
    """
    from flows.plugin import experiment_report

    folder = Path(out) / exp.name
    names = [p.name for p in report.files] or [n for n in exp.files if (folder / n).exists()]
    figures = {}
    for n in names:
        if n.endswith(".png"):
            try:
                figures[n] = (folder / n).read_bytes()
            except OSError:
                continue
    page = experiment_report(
        name=exp.name,
        title=exp.title,
        checks=report.checks,
        results=_read_results(folder),
        figures=figures,
        curves=_loss_curves(folder, names),
        mode=mode,
        wall_s=wall_s,
        command=command,
        files=sorted({*names, REPORT_NAME}),
    )
    return add_owned_file(
        folder, REPORT_NAME, lambda tmp: Path(tmp).write_text(page, encoding="utf-8"), exp.name
    )
