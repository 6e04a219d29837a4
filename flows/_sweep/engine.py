"""Batched, resumable, optionally distributed parameter sweeps: the engine of `flows sweep`.

(Over 600 lines on purpose: grid values, the spec interface, the point-file format with
its integrity checks, the folder's manifest, lock and cleanup, and the run loop with its
Dask and Ctrl-C handling are one protocol sharing private helpers; split, those helpers
would become cross-module API.)

It knows nothing of any paper. An experiment describes its sweep as an
`AbstractSweepSpec`: the grid axes and how their values are parsed, how a batch of points
is computed, the variables each point records, how records combine into one Dataset, an
optional figure and the lines of the summary. `sweep(spec, out, grid)` then runs the grid:
points of one shape (`spec.batch_key`) are computed together (e.g. vmapped by
`simulate_batch`), every point is written atomically to its own file as soon as its batch
is done, so an interrupted sweep resumes where it stopped, and the combined results file
is rebuilt from the point files after every batch.

Layout of the output folder `OUT`:

- `OUT/manifest.json`: experiment name, format and the settings that must match to resume
  (`spec.settings()`: everything except the grid), creation time and library versions. A
  sweep into a folder with different settings is refused (use a new `--out`, or delete
  the folder to start fresh).
- `OUT/points/<id>.nc` (`id` = `<axis><value>_…`, e.g. `n20_rate0.75_seed0`): one netCDF
  file per grid point — the variables `spec.variables()` declares (float64, on the
  dimensions `spec.dims()`, each with an integer index coordinate), and the point's
  coordinates, `status` ('ok' | 'failed'), `error`, `note`, the experiment and its
  settings as attributes. Written to a hidden temporary file in the same folder, fsynced,
  then renamed: a crash never leaves a half-written point (the next sweep into the folder
  deletes such temporaries, and only those: `flows._io.remove_stale_temporaries`).
- `OUT/sweep.nc`: the combined xarray Dataset on the grid axes as coordinates
  (`spec.combine`; by default `combine_records`). It holds every point in `points/` (the
  union over all sweeps into this folder, so an extended grid adds to it); combinations
  never run have `status = 'missing'` and NaN values.
- `OUT/<spec.figure_name>`: the sweep's figure (`spec.plot`), when it has one.
- `OUT/.lock`: held (`flock`) by the sweep writing the folder; a second sweep into it is
  refused while the first runs. The operating system drops the lock when its process
  ends, however it ends.

Before anything is written, the grid is parsed and `spec.check` refuses settings that
every point would fail on, so a sweep that could only fail leaves no folder behind.

Resume: a grid point whose file exists, is readable and has status 'ok' is skipped;
failed points are retried (the summary says how many). A point file is merged only if it
is a plain HDF5 file (no external storage, virtual datasets or links: `flows._io.
hdf5_hazard`) with exactly the variables, dimensions, dtypes and sizes of a point of this
sweep's settings, and was written with those settings; any other is reported (file and
reason, and in the summary), left out of `sweep.nc`, and recomputed if in the grid.

Ctrl-C stops the sweep with `KeyboardInterrupt` (completed points are kept), reliably even
when the signal lands in a callback that Python cannot raise from.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import datetime
import json
import math
import os
import re
import signal
import threading
import time
import uuid
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from .._errors import ConfigError
from .._io import (
    LOCK_NAME,
    FolderBusy,
    check_lock_file,
    check_regular_or_absent,
    is_flows_lock,
    lock_folder,
    proven_temporary_target,
    remove_stale_temporaries,
    write_atomic,
    write_netcdf,
)
from .._solve.trajectory import versions
from .batches import _compute_batch, _connect, _pads, make_batches
from .grid import (
    Axis,
    grid_items,
    grid_points,
    grid_type,
    no_duplicates,
    parse_seeds,
    to_float,
    to_int,
)
from .points import (
    FORMAT,
    TEXTS,
    _point_dataset,
    _read_point,
    combine_records,
    default_value_kind,
    error_text,
    invalid_values,
    load_sweep,
)

if TYPE_CHECKING:
    import xarray as xr  # imported where used: `import flows` stays free of it

__all__ = [
    "AbstractSweepSpec",
    "Axis",
    "SweepResult",
    "combine_records",
    "error_text",
    "grid_items",
    "grid_points",
    "grid_type",
    "load_sweep",
    "make_batches",
    "no_duplicates",
    "parse_seeds",
    "sweep",
    "to_float",
    "to_int",
]


# ---------------------------------------------------------------------------------------
# What an experiment provides


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


# ---------------------------------------------------------------------------------------
# Storage


def _write_netcdf_atomic(ds: xr.Dataset, path: Path) -> Path:
    encoding = {
        v: {"zlib": True, "complevel": 4}
        for v in ds.data_vars
        if ds[v].dtype.kind in "fiu" and ds[v].ndim > 0
    }
    return write_netcdf(path, ds, encoding)


def _write_text_atomic(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _write_point(points_dir: Path, rec: dict, spec: AbstractSweepSpec) -> Path:
    return _write_netcdf_atomic(_point_dataset(rec, spec), points_dir / f"{rec['id']}.nc")


def _check_out(out: Path, spec: AbstractSweepSpec) -> bool:
    """Refuse a folder holding something else; True when it already holds this sweep."""
    fresh = (
        f"Refusing to mix results: use a new --out, or delete {out} to start fresh "
        "(its results will be lost)."
    )
    if not out.exists():
        return False
    if not out.is_dir():
        raise ConfigError(f"--out {out} exists and is not a folder.")
    manifest = out / "manifest.json"
    if not manifest.exists():
        # our lock, and our temporaries of an interrupted first write, do not make it a
        # foreign folder; anything flows cannot prove it made (a `.lock` of the user's or
        # of another program, a file named like a temporary) does
        ours = {
            LOCK_NAME,
            "manifest.json",
            "sweep.nc",
            *([spec.figure_name] if spec.figure_name else []),
        }
        if any(
            not (
                (p.name == LOCK_NAME and is_flows_lock(p, legacy=False))
                or proven_temporary_target(p.name) in ours
            )
            for p in out.iterdir()
        ):
            raise ConfigError(
                f"--out {out} exists, is not empty and holds no sweep (no manifest.json). "
                "Choose a new or empty folder."
            )
        return False
    try:
        man = json.loads(manifest.read_text(encoding="utf-8"))
        old_exp, old_cfg = man["experiment"], man["config"]
        old_cfg = spec.upgrade_settings(old_cfg)  # folders written before a setting existed
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{manifest} is unreadable ({exc}). {fresh}") from None
    if old_exp != spec.experiment:
        raise ConfigError(
            f"{out} holds a sweep of experiment {old_exp!r}, not {spec.experiment!r}. {fresh}"
        )
    new_cfg = spec.settings()
    diff = [k for k in sorted(set(old_cfg) | set(new_cfg)) if old_cfg.get(k) != new_cfg.get(k)]
    if diff:
        was = ", ".join(f"{k}={old_cfg.get(k)!r}" for k in diff)
        now = ", ".join(f"{k}={new_cfg.get(k)!r}" for k in diff)
        grid = ", ".join(a.flag for a in spec.axes)
        raise ConfigError(
            f"{out} holds a sweep with different settings ({was}); this sweep asks for {now}. "
            f"{fresh} Only the grid ({grid}) may change between runs into one folder."
        )
    return True


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


def sweep(
    spec: AbstractSweepSpec,
    out,
    grid: Mapping[str, Any],
    *,
    scheduler: str | None = None,
    connect_timeout: float = 10.0,
    plot: bool = True,
    progress: bool = True,
) -> SweepResult:
    """Run the grid `grid` of `spec` into the folder `out`, resumably.

    **Arguments:**
    - `spec`: the experiment's `AbstractSweepSpec` (its settings and how to run points).
    - `out`: output folder (created; see the module docstring for its layout). A folder
      holding a sweep with the same settings is resumed or extended: completed points are
      skipped, failed ones retried. Different settings are refused (`ConfigError`).
    - `grid`: each axis name → its values, as text ('1000,5000', seeds '0-2') or a
      sequence (`Axis.parse`).
    - `scheduler`: a Dask scheduler address ('tcp://host:8786'): one task per batch on
      the cluster, point files written here as results arrive. None: batches run one after
      another in this process. `connect_timeout`: seconds to wait for the scheduler
      (unreachable: `ConfigError`, nothing written).
    - `plot`: write the spec's figure. `progress`: print a line per grid point and the
      summary.

    **Returns:** a `SweepResult` (`.ok` is False when a point of this grid failed; failed
    points are recorded with their error, the others complete). Raises `ConfigError` on
    bad input before anything is written.
    """
    if not isinstance(spec, AbstractSweepSpec):
        raise ConfigError(f"`spec` must be an AbstractSweepSpec; got {type(spec).__name__}.")
    cls, base = type(spec), AbstractSweepSpec
    if cls.run_batch is base.run_batch and cls.run_point is base.run_point:
        raise ConfigError(
            f"{cls.__name__} computes no point: implement `run_point(*point)` (one point, its "
            "variables) or `run_batch(points, pad_to)` (a batch at once); nothing was written."
        )
    points = grid_points(spec.axes, grid)
    spec.check(points)
    if not (isinstance(connect_timeout, (int, float)) and connect_timeout > 0):
        raise ConfigError(f"`connect_timeout` must be > 0 seconds; got {connect_timeout!r}.")
    out = Path(out)
    _check_out(out, spec)  # refuse early, before connecting; checked again under the lock
    _check_paths(out, spec, points)
    client = _connect(scheduler, connect_timeout) if scheduler else None
    try:
        with _Interrupts() as interrupts, _locked(out):
            existing = _check_out(out, spec)
            return _run(out, spec, points, existing, client, scheduler, plot, progress, interrupts)
    finally:
        if client is not None:
            client.close()


def _check_paths(out: Path, spec: AbstractSweepSpec, points: list[tuple]) -> None:
    """Refuse, before computing, anything in `out` that stands where the sweep writes a file
    and is not a regular file (a folder, a link, a FIFO): the lock, the manifest, the
    combined file, the figure, and the files of this grid's points; and a `points` that is
    not a folder."""
    check_lock_file(out)
    tops = ["manifest.json", "sweep.nc", *([spec.figure_name] if spec.figure_name else [])]
    for name in tops:
        check_regular_or_absent(out / name, f"the sweep's {name}")
    points_dir = out / "points"
    if os.path.lexists(points_dir) and (points_dir.is_symlink() or not points_dir.is_dir()):
        raise ConfigError(
            f"{str(points_dir)!r} must be the sweep's folder of point files; it is a file or a "
            "link. Move it away or choose another --out."
        )
    if points_dir.is_dir():
        for p in points:
            check_regular_or_absent(points_dir / f"{spec.point_id(p)}.nc", "a point's file")


@contextlib.contextmanager
def _locked(out: Path):
    """The sweep's exclusive hold on `out` (see `lock_folder`), refused with a
    `ConfigError` while another sweep holds it."""
    hold = contextlib.ExitStack()
    try:  # only taking the lock is translated: errors of the sweep itself pass unchanged
        hold.enter_context(lock_folder(out))
    except FolderBusy as exc:
        who = f" (process {exc.holder})" if exc.holder is not None else ""
        raise ConfigError(
            f"another sweep is running on {out}{who}: two sweeps writing one folder would mix "
            "their results. Wait for it to finish (then rerun this command to add this grid), "
            "or use another --out."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"--out {out}: cannot create the folder or its lock file ({exc}). Choose a folder "
            "you can write to."
        ) from None
    with hold:
        yield


class _Interrupts:
    """Ctrl-C for the duration of a sweep. SIGINT raises `KeyboardInterrupt` at once, as
    Python's own handler does, and is also remembered: where Python cannot propagate the
    exception (a `__del__`, a garbage-collector callback such as JAX's) it is printed and
    dropped, and the sweep would run on. `check()`, called between points and batches,
    raises it again. The previous handler is restored on exit; a handler someone else
    installed (or SIGINT ignored) is left alone, as is any thread but the main one."""

    def __init__(self):
        self.pending = False
        self._previous = None

    def _handler(self, signum, frame):
        self.pending = True
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.pending:
            raise KeyboardInterrupt

    def __enter__(self) -> _Interrupts:
        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._handler)
        return self

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, flush=True)


def _plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n} {word}{suffix if n != 1 else ''}"


def _run(out, spec, grid, existing, client, scheduler, plot, progress, interrupts):
    start = time.perf_counter()
    points_dir = out / "points"
    top = {"manifest.json", "sweep.nc"} | ({spec.figure_name} if spec.figure_name else set())
    is_point = point_name_pattern(spec).match
    # we hold the lock, so no write is in progress: a temporary of ours is a killed write's
    stale = remove_stale_temporaries(out, top.__contains__)
    stale += remove_stale_temporaries(points_dir, lambda name: is_point(name) is not None)
    if stale:
        _say(
            progress,
            f"[sweep] removed {_plural(len(stale), 'temporary file')} left by an interrupted "
            "write: " + ", ".join(str(q.relative_to(out)) for q in stale),
        )
    if not existing:  # the manifest first: a folder with points always has one
        manifest = {
            "experiment": spec.experiment,
            "format": FORMAT,
            "config": spec.settings(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": versions(),
        }
        _write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2))
    points_dir.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict] = {}
    rejected: list[dict] = []
    ids = [spec.point_id(p) for p in grid]
    grid_ids = set(ids)
    for path in sorted(points_dir.glob("*.nc")):
        if path.name.startswith("."):
            continue  # a temporary file of an interrupted write
        rec, reason = _read_point(path, spec)
        if rec is not None:
            records[rec["id"]] = rec
            continue
        action = "recomputing it" if path.stem in grid_ids else "left out (not in this grid)"
        rejected.append({"file": str(path.relative_to(out)), "reason": reason})
        _say(progress, f"[sweep] rejected {path.relative_to(out)}: {reason}; {action}")
    done = [i for i in ids if records.get(i, {}).get("status") == "ok"]
    retried = [i for i in ids if records.get(i, {}).get("status") == "failed"]
    done_set = set(done)
    pending = [p for p, i in zip(grid, ids, strict=True) if i not in done_set]
    batches = make_batches(pending, spec.batch_size, spec.batch_key)
    backend = "in-process"
    if client is not None:
        backend = f"Dask scheduler {scheduler}, {_plural(len(client.nthreads()), 'worker')}"
    n_bad = len(rejected)
    _say(
        progress,
        f"[sweep] {spec.experiment}: {len(grid)} grid points, {len(done)} done (skipped), "
        + (f"{len(retried)} failed before (retried), " if retried else "")
        + (f"{_plural(n_bad, 'point file')} rejected, " if n_bad else "")
        + f"{len(pending)} to run in {_plural(len(batches), 'batch', 'es')} ({backend}); "
        + spec.describe(),
    )
    counter = [len(done)]

    def handle(batch_recs):
        for rec in batch_recs:
            bad = invalid_values(spec, rec) if rec.get("status") == "ok" else None
            if bad is not None:  # never written as done: it would be rejected when read back
                rec = {**rec, "status": "failed", "error": f"invalid result: {bad}"}
            _write_point(points_dir, rec, spec)
            records[rec["id"]] = rec
            counter[0] += 1
            tail = spec.point_text(rec) if rec["status"] == "ok" else f"FAILED: {rec['error']}"
            _say(progress, f"[{counter[0]}/{len(grid)}] {spec.point_label(rec)} {tail}")
            interrupts.check()
        _write_netcdf_atomic(spec.combine(records.values()), out / "sweep.nc")

    pads = _pads(batches, spec.batch_key)
    if client is None:
        for batch, pad in zip(batches, pads, strict=True):
            interrupts.check()
            handle(spec.run_batch(batch, pad))
    elif batches:
        from distributed import as_completed

        futures = {}
        for batch, pad in zip(batches, pads, strict=True):
            tag = re.sub(r"[^\w.-]+", "_", str(spec.batch_key(batch[0]))).strip("_")
            fut = client.submit(
                _compute_batch,
                spec,
                [tuple(p) for p in batch],
                pad,
                pure=False,
                key=f"flows-sweep-{tag}-{uuid.uuid4().hex[:12]}",
            )
            futures[fut] = batch
        for fut in as_completed(list(futures), loop=client.loop):
            interrupts.check()
            batch = futures[fut]
            try:
                recs = fut.result()
            except Exception as exc:  # noqa: BLE001 - the batch's points fail, others go on
                recs = []
                for p in batch:
                    rec = spec.blank_record(p)
                    rec["error"] = f"batch failed on the cluster: {error_text(exc)}"
                    recs.append(rec)
            handle(recs)
    interrupts.check()
    _write_netcdf_atomic(spec.combine(records.values()), out / "sweep.nc")

    plotted, figure = None, None
    if plot and spec.figure_name:
        figure = out / spec.figure_name
        plotted = spec.plot(out / "sweep.nc", figure)
    grid_recs = [records[i] for i in ids if i in records]
    failed = [r for r in grid_recs if r["status"] != "ok"]
    lines = [
        f"\n== sweep summary: {len(grid)} points; {len(done)} skipped (done before), "
        f"{len(pending)} run ({len(retried)} of them retried after failing before); "
        f"{len(failed)} failed; {time.perf_counter() - start:.1f}s ==",
        *spec.summary_table(grid_recs),
    ]
    if rejected:
        lines.append(
            f"REJECTED point files ({len(rejected)}; not merged, recomputed if in this grid):"
        )
        lines += [f"  {r['file']}: {r['reason']}" for r in rejected]
    if failed:
        lines.append(f"FAILED ({len(failed)}):")
        lines += [f"  {spec.point_label(r)}: {r['error']}" for r in failed]
    lines += spec.summary_notes(grid_recs, plotted)
    summary = "\n".join(lines)
    _say(progress, summary)
    files = [out / "sweep.nc"] + ([figure] if figure else [])
    _say(progress, "wrote: " + ", ".join(str(f) for f in files))
    brief = ("id", *(a.name for a in spec.axes), *TEXTS, *spec.brief_fields)
    return SweepResult(
        out=out,
        path=out / "sweep.nc",
        n_points=len(grid),
        n_skipped=len(done),
        n_run=len(pending),
        n_retried=len(retried),
        failed=[{k: r[k] for k in brief} for r in failed],
        figure=figure,
        summary=summary,
        backend=backend,
        rejected=rejected,
        points=[{k: r[k] for k in brief} for r in grid_recs],
        plotted=plotted,
    )
