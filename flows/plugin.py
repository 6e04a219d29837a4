"""The plug-in contract: what a paper implements (`AbstractExperiment`), what it returns
(`Report`, `Simulated`), and the few helpers a paper needs beyond the engine (`flows`),
the claim kit (`flows.claims`), the model families (`flows.models`) and the figure style
(`flows.figures`). The page *Adding a paper* (docs/plugin.md) walks through it.

A paper is a package with an `EXPERIMENT` (an `AbstractExperiment` instance) registered
in the entry-point group `flows.papers` of its `pyproject.toml`; the entry point's name
is the experiment's `name`:

    [project.entry-points."flows.papers"]
    my-paper = "my_paper.experiment:EXPERIMENT"

The four papers under `flows/experiments/` are written with these names only
(`tests/test_layering.py` enforces it), so a paper outside the repository has what they
have:

- **the interface**: `AbstractExperiment`, `Report`, `Simulated`; `write_results_json`
  (the `results.json` every `run` writes: config, versions, machine, checks, extra numbers);
- **output folders**: `OutputDir` (writes only what it can prove it wrote; the files a
  run declares, committed at once), `REPORT_NAME` (the HTML report the command line
  adds);
- **validation** of a config's values, each `ConfigError` naming the field and what to
  try: `as_float`, `as_int`, `as_bool`, `as_choice`, `as_seed`, `as_tolerance`,
  `as_real_array`; labels: `check_labels`, `check_sign_labels`; memory: `check_memory`
  (refuse a run that cannot fit, up front);
- **command-line flags** as data (`Flag`) with argparse types built on the validators
  (`typed`, `real`, `positive`, `count`, `seed`, `tolerance`, `tolerance_flags`) and the
  refusal of a flag that does not apply to the chosen method (`refuse_inapplicable`);
- **solver names and error norms** a config may name: `SOLVER_METHODS`,
  `resolve_solver_name`, `ERROR_NORMS`, `check_error_norm`;
- **sweeps** (the engine is `flows.sweep` / `flows.AbstractSweepSpec`): the grid (`Axis`,
  `grid_items`, `grid_values`, `grid_points`, `grid_type`, `no_duplicates`,
  `parse_prng_seeds`, `to_float`, `to_int`), records (`point_values`, `SOLVE_STATS`,
  `combine_records`, `error_text`), summaries and figures (`grouped`, `mean_sd`, `fmt_number`,
  `seed_mean_sd`, `sweep_settings`);
- **GD/SGD baselines**: the η rule (`ETA_FACTOR`, `eta_checked`, `merge_eta`);
- **compilation**: `callback_free` (trace a solve of the paper's own, e.g. a reduced
  model's, without equinox's host callbacks, so the persistent cache keeps it).

Names that left this module in 0.x (engine internals and one paper's helpers) still
resolve for one release, with a `DeprecationWarning` naming where they went.
"""

from __future__ import annotations

import abc
import dataclasses
import importlib
import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ._cli.flags import Flag as Flag
from ._cli.flags import count as count
from ._cli.flags import positive as positive
from ._cli.flags import real as real
from ._cli.flags import refuse_inapplicable as refuse_inapplicable
from ._cli.flags import seed as seed
from ._cli.flags import tolerance as tolerance
from ._cli.flags import tolerance_flags as tolerance_flags
from ._cli.flags import typed as typed
from ._compile import callback_free as callback_free
from ._errors import ConfigError
from ._io import REPORT_NAME as REPORT_NAME
from ._io import OutputDir as OutputDir
from ._solve.losses import check_labels as check_labels
from ._solve.losses import check_sign_labels as check_sign_labels
from ._solve.problem import two_layer_field as two_layer_field
from ._solve.resources import check_memory as check_memory
from ._solve.trajectory import Trajectory, machine, versions
from ._solvers import ERROR_NORMS as ERROR_NORMS
from ._solvers import SOLVER_METHODS as SOLVER_METHODS
from ._solvers import check_error_norm as check_error_norm
from ._solvers import resolve_solver_name as resolve_solver_name
from ._sweep.engine import fmt_number as fmt_number
from ._sweep.engine import grouped as grouped
from ._sweep.engine import mean_sd as mean_sd
from ._sweep.grid import Axis as Axis
from ._sweep.grid import grid_items as grid_items
from ._sweep.grid import grid_points as grid_points
from ._sweep.grid import grid_type as grid_type
from ._sweep.grid import grid_values as grid_values
from ._sweep.grid import no_duplicates as no_duplicates
from ._sweep.grid import parse_prng_seeds as parse_prng_seeds
from ._sweep.grid import to_float as to_float
from ._sweep.grid import to_int as to_int
from ._sweep.points import SOLVE_STATS as SOLVE_STATS
from ._sweep.points import combine_records as combine_records
from ._sweep.points import error_text as error_text
from ._sweep.points import point_values as point_values
from ._sweep.points import seed_mean_sd as seed_mean_sd
from ._sweep.points import sweep_settings as sweep_settings
from ._validate import as_bool as as_bool
from ._validate import as_choice as as_choice
from ._validate import as_float as as_float
from ._validate import as_int as as_int
from ._validate import as_real_array as as_real_array
from ._validate import as_seed as as_seed
from ._validate import as_tolerance as as_tolerance
from .claims import Check, Reference, Trend, annotate
from .claims._eta import ETA_FACTOR as ETA_FACTOR
from .claims._eta import eta_checked as eta_checked
from .claims._eta import merge_eta as merge_eta

__all__ = [
    # the interface
    "AbstractExperiment",
    "Report",
    "Simulated",
    "write_results_json",
    # output folders
    "OutputDir",
    "REPORT_NAME",
    # validation
    "as_bool",
    "as_choice",
    "as_float",
    "as_int",
    "as_real_array",
    "as_seed",
    "as_tolerance",
    "check_labels",
    "check_sign_labels",
    "two_layer_field",
    "check_memory",
    # command-line flags
    "Flag",
    "count",
    "positive",
    "real",
    "refuse_inapplicable",
    "seed",
    "tolerance",
    "tolerance_flags",
    "typed",
    # solver names and error norms
    "ERROR_NORMS",
    "SOLVER_METHODS",
    "check_error_norm",
    "resolve_solver_name",
    # sweeps
    "Axis",
    "combine_records",
    "error_text",
    "fmt_number",
    "grid_items",
    "grid_points",
    "grid_type",
    "grid_values",
    "grouped",
    "mean_sd",
    "no_duplicates",
    "parse_prng_seeds",
    "point_values",
    "SOLVE_STATS",
    "seed_mean_sd",
    "sweep_settings",
    "to_float",
    "to_int",
    # GD/SGD baselines: the η rule
    "ETA_FACTOR",
    "eta_checked",
    "merge_eta",
    # compilation
    "callback_free",
]


# ---------------------------------------------------------------------------------------
# The interface


@dataclasses.dataclass
class Report:
    """What `AbstractExperiment.run` returns: the checks (`flows.Check`, one row each of
    `flows check`'s table), the files written (the paths `OutputDir.commit` returns) and
    a summary (JSON data, shown in `flows check --format json`)."""

    name: str
    checks: list[Check]
    files: list[Path]
    results: dict


@dataclasses.dataclass
class Simulated:
    """What `AbstractExperiment.simulate` returns: the run, and the rtol its accuracy
    certificate is judged against (None for a discrete baseline such as GD)."""

    traj: Trajectory
    rtol: float | None


class AbstractExperiment(abc.ABC):
    """One paper as a plug-in: `flows check|simulate|sweep|derive <name>` are generated
    from it.

    A member declares `name` (the command-line name, and the name of its entry point in
    the group `flows.papers`), `title` (the paper), `files` (what `run` writes into
    `out/<name>/`) and `simulate_flags` (`Flag`s; `sweep_flags` too when it has a sweep),
    and implements `default_config`, `run` and `simulate`; `sweep` is optional (without
    it the command line has no `flows sweep <name>`). Optional: `references` (where each
    claim stands in the paper), `identities` (the module of the paper's symbolic
    derivations) and `trend` (the finite-size trend a check measured).
    """

    name: ClassVar[str]
    title: ClassVar[str]
    files: ClassVar[tuple[str, ...]]
    simulate_flags: ClassVar[tuple[Flag, ...]]
    sweep_flags: ClassVar[tuple[Flag, ...]] = ()
    #: Where each claim stands in the paper (section, statement, figure), keyed as
    #: `flows.claims.annotate` matches: a claim, a part of a claim, or a source.
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


def write_results_json(path: Path, name: str, config: dict, checks, extra: dict) -> None:
    """Write the `results.json` of `flows check <name>`: `{"experiment": name, "config":
    config, "versions": …, "machine": …, "checks": [check.to_dict(), …], **extra}`
    (`flows.versions`, `flows.machine`: the libraries and the cores the numbers came from).

    **Arguments:** `path` (inside an `OutputDir`: `outdir.path("results.json")`); `name`,
    the experiment's; `config`, its settings as JSON data (e.g. `dataclasses.asdict`);
    `checks`, the run's `Check`s; `extra`, any further numbers (arrays, numpy scalars,
    paths and mappings such as a trajectory's `stats` are converted).
    """
    payload = {
        "experiment": name,
        "config": config,
        "versions": versions(),
        "machine": machine(),
        "checks": [c.to_dict() for c in checks],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=_json_default))


def _json_default(o):
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
# The toolkit's side: the HTML report of `flows check <name>` (not part of the contract)


def _read_results(folder: Path) -> dict:
    try:
        data = json.loads((folder / "results.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _loss_curves(folder: Path, names) -> list:
    """The loss curve of every trajectory file in `folder` (those that cannot be read are
    left out: the report shows what there is)."""
    from ._io import hdf5_hazard
    from ._report.html import Curve

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
    The command line calls it after `run`; a paper never does.

    **Returns:** the report's path. **Raises:** `ConfigError` if a `report.html` the
    toolkit did not write is in the way.
    """
    from ._io import add_owned_file
    from ._report.html import experiment_report

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


# ---------------------------------------------------------------------------------------
# Names that left this module: one release with a DeprecationWarning naming the new place

_INTERNAL = "internal to the toolkit, no longer part of the plug-in contract"
#: old name → (module it resolves from, the name there, what the warning says of it)
_MOVED: dict[str, tuple[str, str, str]] = {
    "INDEX_NAME": ("flows._io", "INDEX_NAME", f"{_INTERNAL} (flows._io.INDEX_NAME)"),
    "MANIFEST": ("flows._io", "MANIFEST", f"{_INTERNAL} (flows._io.MANIFEST)"),
    "add_owned_file": ("flows._io", "add_owned_file", f"{_INTERNAL} (flows._io); use OutputDir"),
    "check_output_path": (
        "flows._io",
        "check_output_path",
        f"{_INTERNAL} (flows._io); OutputDir checks its folder",
    ),
    "hdf5_hazard": ("flows._io", "hdf5_hazard", f"{_INTERNAL} (flows._io.hdf5_hazard)"),
    "Curve": (
        "flows._report.html",
        "Curve",
        f"{_INTERNAL} (flows._report.html); the command line writes the report",
    ),
    "experiment_report": (
        "flows._report.html",
        "experiment_report",
        f"{_INTERNAL} (flows._report.html); the command line writes the report",
    ),
    "two_layer_bytes": (
        "flows._solve.resources",
        "two_layer_bytes",
        "one paper's helper, now flows.experiments.multistage.config.two_layer_bytes "
        "(itemsize · n · m · batch bytes; pass your own estimate to check_memory)",
    ),
    "parse_seeds": (
        "flows._sweep.grid",
        "parse_seeds",
        "no paper needs it: use flows.plugin.parse_prng_seeds (the same, each a valid PRNG seed)",
    ),
}


def __getattr__(name: str):
    if name in _MOVED:
        module, attr, where = _MOVED[name]
        warnings.warn(
            f"flows.plugin.{name} is deprecated and will be removed in the next release: {where}.",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(module), attr)
    raise AttributeError(f"module 'flows.plugin' has no attribute {name!r}")
