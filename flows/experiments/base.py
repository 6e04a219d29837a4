"""What every experiment returns, and how its outputs are written."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, overload

from flows import Check, ConfigError, Trajectory, versions
from flows.claims import Reference, Trend, annotate
from flows.plugin import INDEX_NAME as INDEX_NAME
from flows.plugin import MANIFEST as MANIFEST
from flows.plugin import REPORT_NAME as REPORT_NAME
from flows.plugin import Flag, add_owned_file
from flows.plugin import OutputDir as OutputDir
from flows.plugin import check_output_path as check_output_path

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


#: Figure widths in inches: one column of a two-column paper, and the full text width
#: (a two-column figure).
COLUMN_WIDTH = 3.4
TEXT_WIDTH = 7.0

#: The Okabe–Ito palette (colour-blind safe), by name; `CYCLE` is the order lines take.
COLORS = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#8C8C8C",
}
CYCLE = tuple(COLORS[c] for c in ("blue", "orange", "green", "vermillion", "purple", "sky"))

#: The toolkit's figure style, as matplotlib rcParams: applied only while a figure is
#: built and saved (`figure_style`), never to the user's global settings.
STYLE: dict[str, Any] = {
    "font.size": 8.0,
    "axes.titlesize": 8.5,
    "axes.labelsize": 8.0,
    "xtick.labelsize": 7.0,
    "ytick.labelsize": 7.0,
    "legend.fontsize": 6.5,
    "legend.title_fontsize": 7.0,
    "figure.titlesize": 9.0,
    "mathtext.fontset": "dejavusans",
    "axes.formatter.use_mathtext": True,
    "axes.linewidth": 0.6,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.which": "major",
    "grid.color": "0.88",
    "grid.linewidth": 0.5,
    "grid.linestyle": "-",
    "axes.axisbelow": True,
    "xtick.major.width": 0.6,
    "ytick.major.width": 0.6,
    "xtick.minor.width": 0.4,
    "ytick.minor.width": 0.4,
    "xtick.major.size": 3.0,
    "ytick.major.size": 3.0,
    "lines.linewidth": 1.2,
    "lines.markersize": 3.5,
    "errorbar.capsize": 2.0,
    "legend.frameon": True,
    "legend.framealpha": 0.85,
    "legend.edgecolor": "0.85",
    "legend.fancybox": False,
    "legend.borderpad": 0.3,
    "legend.handlelength": 1.8,
    "legend.labelspacing": 0.3,
    "figure.dpi": 100.0,
    "figure.constrained_layout.h_pad": 0.03,
    "figure.constrained_layout.w_pad": 0.03,
    "savefig.dpi": 200.0,
    "savefig.facecolor": "white",
    "svg.fonttype": "path",  # the SVG looks the same without the fonts installed
    "svg.hashsalt": "flows",  # ...and is byte-for-byte reproducible
}

#: The vector copy written next to every figure (`save_figure`).
VECTOR_SUFFIX = ".svg"


@contextlib.contextmanager
def figure_style():
    """The toolkit's figure style (`STYLE`, with `CYCLE` as the colour cycle) while the
    block runs, and the caller's rcParams restored after it: the user's (e.g. a notebook's)
    settings are never changed. Also a decorator (`@figure_style()`), for a function that
    builds and saves a figure: titles, legends and ticks read the style when created."""
    import matplotlib
    from cycler import cycler

    rc: dict[Any, Any] = {**STYLE, "axes.prop_cycle": cycler(color=list(CYCLE))}
    with matplotlib.rc_context(rc):
        yield


def figure_size(
    nrows: int = 1, ncols: int = 1, width: float | str | None = None, height: float | None = None
) -> tuple[float, float]:
    """(width, height) in inches for an `nrows` × `ncols` grid: `width` is "column"
    (`COLUMN_WIDTH`), "text" (`TEXT_WIDTH`) or inches — by default a column for one panel,
    the text width for more; `height` by default gives each panel a 4:3-ish shape."""
    if width is None:
        width = "column" if ncols == 1 else "text"
    if isinstance(width, str):
        if width not in ("column", "text"):
            raise ValueError(f"width must be 'column', 'text' or inches, not {width!r}")
        width = COLUMN_WIDTH if width == "column" else TEXT_WIDTH
    w = float(width)
    if height is None:
        height = nrows * min(2.6, max(2.0, 0.72 * w / ncols)) + 0.3
    return w, float(height)


@overload
def new_figure(
    nrows: Literal[1] = 1, ncols: Literal[1] = 1, **kwargs: Any
) -> tuple[Figure, Axes]: ...
@overload
def new_figure(nrows: int, ncols: int, **kwargs: Any) -> tuple[Figure, np.ndarray]: ...
def new_figure(nrows: int = 1, ncols: int = 1, **kwargs: Any) -> tuple[Figure, Any]:
    """A figure and its axes in the toolkit's style, without pyplot: no global backend
    switch, no figure manager, so library plotting neither leaks figures nor breaks a
    notebook's inline backend.

    The figure is `figsize` inches, else `figure_size(nrows, ncols, width, height)` (a paper
    column for one panel, the text width for more), with constrained layout; the axes are
    `fig.subplots(nrows, ncols, **kwargs)`: one `Axes` for a 1 × 1 grid, else an array of
    them (typed as such for the default `squeeze=True`). The style (`figure_style`) is
    applied while the figure is built and left off afterwards: build the rest of the figure
    and save it (`save_figure`) inside `figure_style()` too, for titles, legends and tick
    labels to follow it."""
    from matplotlib.figure import Figure

    figsize = kwargs.pop("figsize", None)
    width, height = kwargs.pop("width", None), kwargs.pop("height", None)
    layout = kwargs.pop("layout", "constrained")
    if figsize is None:
        figsize = figure_size(nrows, ncols, width, height)
    with figure_style():
        fig = Figure(figsize=figsize, layout=layout)
        return fig, fig.subplots(nrows, ncols, **kwargs)


def save_figure(
    fig: Figure, path: str | Path, *, vector: bool = True, atomic: bool = False
) -> list[Path]:
    """Save `fig` as the PNG `path` and, with `vector`, as SVG next to it (same name,
    `VECTOR_SUFFIX`), in the toolkit's style; the SVG carries no date, so the same figure
    gives the same bytes. `atomic`: each file through `write_atomic` (for a file written in
    place; files written into an `OutputDir` are moved into place by its `commit`).

    **Returns:** the paths written, the PNG first."""
    from flows import write_atomic

    path = Path(path)
    targets: list[tuple[Path, str, dict | None]] = [(path, "png", None)]
    if vector and path.suffix != VECTOR_SUFFIX:
        targets.append((path.with_suffix(VECTOR_SUFFIX), "svg", {"Date": None}))
    with figure_style():
        for target, fmt, meta in reversed(targets):  # the PNG last: it names the pair

            def write(to, fmt=fmt, meta=meta):
                fig.savefig(to, format=fmt, metadata=meta)

            if atomic:
                write_atomic(target, write)
            else:
                write(target)
    return [t for t, _, _ in targets]


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
    #: Where each claim stands in the paper (section, statement, figure), keyed as
    #: `flows._checks.annotate` matches: a claim, a part of a claim, or a source.
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
