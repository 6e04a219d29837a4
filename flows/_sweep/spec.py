"""What an experiment provides to describe its sweep (`AbstractSweepSpec`: the grid, how a
batch of points is computed, what each point records, how records combine, the figure and
the summary's lines), what a sweep returns (`SweepResult`), and the helpers every paper's
summary table uses (`mean_sd`, `fmt_number`, `grouped`)."""

from __future__ import annotations

import abc
import dataclasses
import math
import re
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .grid import Axis
from .points import combine_records, default_value_kind, error_text, load_sweep

if TYPE_CHECKING:
    import xarray as xr  # imported where used: `import flows` stays free of it


class AbstractSweepSpec(abc.ABC):
    """A sweep as an experiment defines it; run it with `sweep(spec, out, grid)`.

    A member declares `experiment` (its name in the manifest), `axes` (the grid),
    optionally `figure_name` and `brief_fields`, and implements:

    - `settings()`: what every point shares and a resumed folder must match (JSON data);
      `upgrade_settings(saved)` fills in what settings saved by older versions omit;
    - `dims()` and `variables()`: the per-point record schema — dimension sizes, and each
      variable's dimensions (all float64); a point file holds exactly these;
    - `run_batch(points, pad_to)`: one record per point (plain data: it may run on a Dask
      worker), each with `id` (`point_id`), the axis values, `status` ('ok' | 'failed'),
      `error`, `note` and every variable; a point that fails is recorded as failed, the
      others are unaffected. Points of one batch share `batch_key`; `pad_to` is the size
      of the key's largest batch (pad to reuse one compiled solve, or ignore it);
    - `describe()`, `point_text(rec)`, `summary_table(recs)`, `summary_notes(recs,
      plotted)`: the header, per-point and summary lines; `check(points)`: refuse
      (`ConfigError`) settings every point would fail on, before anything is written;
      `combine(records)` and `plot(sweep_nc, png)` (when `figure_name` is set).
    """

    experiment: ClassVar[str]
    axes: ClassVar[tuple[Axis, ...]]
    #: The figure `plot` writes into the folder (None: no figure).
    figure_name: ClassVar[str | None] = None
    #: Variables copied into the brief records of `SweepResult.points` and `.failed`.
    brief_fields: ClassVar[tuple[str, ...]] = ()
    #: The most points per batch (points of one `batch_key`).
    batch_size: int = 1

    @abc.abstractmethod
    def settings(self) -> dict:
        """The settings every point shares (saved in the manifest and each point file)."""

    def upgrade_settings(self, saved: dict) -> dict:
        """`saved` settings (a manifest's or a point's) with settings added since filled in
        as they were then."""
        return saved

    def dims(self) -> dict[str, int]:
        """Sizes of the per-point dimensions (each gets an index coordinate 0, 1, …)."""
        return {}

    @abc.abstractmethod
    def variables(self) -> dict[str, tuple[str, ...]]:
        """The per-point float64 variables, name → dimensions (() for a number)."""

    def run_batch(self, points: list[tuple], pad_to: int = 0) -> list[dict]:
        """Compute `points` (one `batch_key`); one record per point, in order. By default
        one point at a time through `run_point`, a point that raises recorded as failed
        with its error (override to solve a batch at once)."""
        records = []
        for point in points:
            rec = self.blank_record(point)
            try:
                rec.update(self.run_point(*point), status="ok")
            except Exception as exc:  # noqa: BLE001 - recorded for this point only
                rec["error"] = error_text(exc)
            records.append(rec)
        return records

    def run_point(self, *point) -> dict:
        """The variables of one point (used by the default `run_batch`; a spec implements
        this or `run_batch`, which `sweep` checks before anything is written)."""
        raise NotImplementedError(f"{type(self).__name__} implements no `run_point`.")

    def check(self, points: list[tuple]) -> None:
        """Refuse (`ConfigError`) before anything is written what every point would fail."""
        return None

    def value_kind(self, name: str) -> str | None:
        """The kind of the variable `name` — 'loss' (finite, ≥ 0), 'time' (finite, ≥ 0, or
        NaN: not reached), 'count' (a whole number ≥ 0, or NaN) — or None (unchecked). A
        point marked ok with a value invalid for its kind is not a finished point: read back,
        its file is rejected and the point recomputed; computed, it is recorded as failed.
        Default: by name (`flows._sweep.points.default_value_kind`)."""
        return default_value_kind(name)

    def batch_key(self, point: tuple) -> Hashable:
        """Points with equal keys may be computed together (default: each alone)."""
        return point

    def point_id(self, point: tuple) -> str:
        return "_".join(f"{a.name}{a.format(v)}" for a, v in zip(self.axes, point, strict=True))

    def point_label(self, rec: Mapping) -> str:
        """How progress lines and the summary name a point."""
        return " ".join(f"{a.name}={rec[a.name]:g}" for a in self.axes)

    def blank_record(self, point: tuple) -> dict:
        """A failed record of `point`, every variable NaN."""
        rec: dict[str, Any] = {"id": self.point_id(point)}
        rec.update({a.name: a.kind(v) for a, v in zip(self.axes, point, strict=True)})
        sizes = self.dims()
        for name, dims in self.variables().items():
            rec[name] = np.full(tuple(sizes[d] for d in dims), np.nan) if dims else math.nan
        rec.update(status="failed", error="", note="")
        return rec

    def describe(self) -> str:
        """The settings, for the header line."""
        return ", ".join(f"{k}={v!r}" for k, v in self.settings().items())

    def point_text(self, rec: Mapping) -> str:
        """The result of an 'ok' point, for its progress line."""
        return "ok"

    def combine(self, records: Iterable[dict]) -> xr.Dataset:
        """The labelled results of `records` (the contents of sweep.nc)."""
        return combine_records(self, records)

    def plot(self, sweep_nc: Path, png: Path) -> Any:
        """Write the figure of `sweep_nc` to `png`; returns what the summary reports."""
        return None

    def summary_table(self, records: list[dict]) -> list[str]:
        return []

    def summary_notes(self, records: list[dict], plotted: Any) -> list[str]:
        return []


# --- summary tables: the helpers every paper's `summary_table` uses ---------------------


def mean_sd(values) -> tuple[float, float]:
    """(mean, sample standard deviation) of the finite values; NaN where there are too few."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    mean = float(np.mean(v)) if v.size else math.nan
    return mean, float(np.std(v, ddof=1)) if v.size > 1 else math.nan


def fmt_number(x: float, digits: int = 3) -> str:
    """`x` to `digits` significant digits, or 'NaN'."""
    return f"{x:.{digits}g}" if math.isfinite(x) else "NaN"


def grouped(records: Iterable[Mapping], *keys: str) -> list[tuple[tuple, list]]:
    """The records grouped by the values of `keys`, in sorted key order."""
    by: dict = {}
    for r in records:
        by.setdefault(tuple(r[k] for k in keys), []).append(r)
    return sorted(by.items())


def point_name_pattern(spec: AbstractSweepSpec) -> re.Pattern:
    return re.compile("^" + "_".join(a.pattern for a in spec.axes) + r"\.nc$")


@dataclasses.dataclass
class SweepResult:
    """What `sweep` did: counts, failures, the files written and the summary.

    `points` and `failed` are brief records (id, axis values, status, error, note and the
    spec's `brief_fields`) of the grid's points and of those that failed; `plotted` is
    what `spec.plot` returned (None without a figure)."""

    out: Path
    path: Path
    n_points: int
    n_skipped: int
    n_run: int
    n_retried: int
    failed: list[dict]
    figure: Path | None
    summary: str
    backend: str
    #: Point files found unreadable, unsafe or not from this sweep: [{"file", "reason"}].
    rejected: list[dict] = dataclasses.field(default_factory=list)
    points: list[dict] = dataclasses.field(default_factory=list)
    plotted: Any = None

    @property
    def ok(self) -> bool:
        """True when no point of this grid failed."""
        return not self.failed

    def dataset(self) -> xr.Dataset:
        return load_sweep(self.path)
