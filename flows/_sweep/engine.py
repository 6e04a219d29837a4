"""Batched, resumable, optionally distributed parameter sweeps: the engine of `flows sweep`.

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
  (`spec.settings()`: everything except the grid), creation time, library versions and
  the machine it was created on (`flows.machine`; each point file records its own). A
  sweep into a folder with different settings is refused (use a new `--out`, or delete
  the folder to start fresh).
- `OUT/points/<id>.nc` (`id` = `<axis><value>_…`, e.g. `n20_rate0.75_seed0`): one netCDF
  file per grid point — the variables `spec.variables()` declares (float64, on the
  dimensions `spec.dims()`, each with an integer index coordinate), and the point's
  coordinates, `status` ('ok' | 'failed'), `error`, `note`, the experiment, its
  settings and the machine it was computed on as attributes. Written to a hidden
  temporary file in the same folder, fsynced, then renamed: a crash never leaves a
  half-written point (the next sweep into the folder deletes such temporaries, and only
  those: `flows._io.remove_stale_temporaries`).
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

import datetime
import json
import re
import signal
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from .._io import remove_stale_temporaries
from .._solve.trajectory import machine, versions
from .batches import _compute_batch, _connect, _pads, make_batches
from .folder import (
    _check_out,
    _check_paths,
    _locked,
    _write_netcdf_atomic,
    _write_point,
    _write_text_atomic,
)
from .global_error import WithGlobalError
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
    _read_point,
    combine_records,
    error_text,
    invalid_values,
    load_sweep,
)
from .spec import (
    AbstractSweepSpec,
    SweepResult,
    fmt_number,
    grouped,
    mean_sd,
    point_name_pattern,
)

__all__ = [
    "AbstractSweepSpec",
    "Axis",
    "SweepProgress",
    "SweepResult",
    "combine_records",
    "error_text",
    "fmt_number",
    "grid_items",
    "grid_points",
    "grid_type",
    "grouped",
    "load_sweep",
    "make_batches",
    "mean_sd",
    "no_duplicates",
    "parse_seeds",
    "sweep",
    "to_float",
    "to_int",
]


class SweepProgress:
    """What a sweep tells while it runs. This one prints each line on stdout (or nothing,
    given `False`); a display of its own (the command line's live bar) overrides
    `begin`, `batch`, `point` and `end`, which print or do nothing here.

    The engine calls `line` for its notes (the header, a rejected file), `begin` once the
    grid is known, `batch` as each batch starts, `point` as each point is written, `phase`
    for the work after the points, `end` before the summary, then `line` for the
    summary."""

    def __init__(self, on: bool = True):
        self.on = bool(on)

    def line(self, text: str) -> None:
        if self.on:
            print(text, flush=True)

    def begin(self, n_points: int, n_done: int) -> None:
        """The grid holds `n_points`, of which `n_done` were done before this sweep."""

    def batch(self, labels: list[str]) -> None:
        """A batch of the points named `labels` starts (in this process)."""

    def point(self, k: int, n: int, text: str) -> None:
        """The `k`-th point of `n` is written; `text` names it and its result."""
        self.line(f"[{k}/{n}] {text}")

    def phase(self, text: str) -> None:
        """The sweep does `text` now (after the points: the figure)."""

    def end(self) -> None:
        """Every point is done; the summary follows."""


def sweep(
    spec: AbstractSweepSpec,
    out,
    grid: Mapping[str, Any],
    *,
    scheduler: str | None = None,
    connect_timeout: float = 10.0,
    plot: bool = True,
    progress: bool | SweepProgress = True,
    global_error: bool = False,
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
    - `plot`: write the spec's figure. `progress`: True (default) prints a line per grid
      point and the summary on stdout, False nothing; a `SweepProgress` shows them its
      own way (the command line's live bar).
    - `global_error`: also estimate each number's global error: every batch computed again
      with every adaptive solve in it at tolerances 10× tighter, the difference (×2.78,
      `flows.claims.error_calibration`) saved as `<name>_error` beside each number
      (`flows._sweep.global_error`; about twice the cost). Recorded in the folder's
      settings: a folder is resumed only with the same choice.

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
    if global_error not in (True, False):
        raise ConfigError(f"`global_error` must be True or False; got {global_error!r}.")
    if global_error:
        spec = WithGlobalError(spec)
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
            say = progress if isinstance(progress, SweepProgress) else SweepProgress(progress)
            return _run(out, spec, points, existing, client, scheduler, plot, say, interrupts)
    finally:
        if client is not None:
            client.close()


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


def _label(spec: AbstractSweepSpec, point: tuple) -> str:
    """How the progress names a point not yet computed: `spec.point_label` of its axis
    values (its id where the label needs more than those)."""
    try:
        return spec.point_label({a.name: a.kind(v) for a, v in zip(spec.axes, point, strict=True)})
    except (KeyError, TypeError, ValueError):
        return spec.point_id(point)


def _plural(n: int, word: str, suffix: str = "s") -> str:
    return f"{n} {word}{suffix if n != 1 else ''}"


def _start(out: Path, spec: AbstractSweepSpec, existing: bool, say: SweepProgress) -> None:
    """Remove what an interrupted write left, write the manifest of a new folder, make
    `points/`. The lock is held, so no write is in progress: a temporary of ours is a
    killed write's."""
    points_dir = out / "points"
    top = {"manifest.json", "sweep.nc"} | ({spec.figure_name} if spec.figure_name else set())
    is_point = point_name_pattern(spec).match
    stale = remove_stale_temporaries(out, top.__contains__)
    stale += remove_stale_temporaries(points_dir, lambda name: is_point(name) is not None)
    if stale:
        say.line(
            f"[sweep] removed {_plural(len(stale), 'temporary file')} left by an interrupted "
            "write: " + ", ".join(str(q.relative_to(out)) for q in stale)
        )
    if not existing:  # the manifest first: a folder with points always has one
        manifest = {
            "experiment": spec.experiment,
            "format": FORMAT,
            "config": spec.settings(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": versions(),
            "machine": machine(),
        }
        _write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2))
    points_dir.mkdir(parents=True, exist_ok=True)


def _read_points(
    out: Path, spec: AbstractSweepSpec, grid_ids: set[str], say: SweepProgress
) -> tuple[dict[str, dict], list[dict]]:
    """(id → record, rejected files) of the point files in `out/points`."""
    records: dict[str, dict] = {}
    rejected: list[dict] = []
    for path in sorted((out / "points").glob("*.nc")):
        if path.name.startswith("."):
            continue  # a temporary file of an interrupted write
        rec, reason = _read_point(path, spec)
        if rec is not None:
            records[rec["id"]] = rec
            continue
        action = "recomputing it" if path.stem in grid_ids else "left out (not in this grid)"
        rejected.append({"file": str(path.relative_to(out)), "reason": reason})
        say.line(f"[sweep] rejected {path.relative_to(out)}: {reason}; {action}")
    return records, rejected


def _run(out, spec, grid, existing, client, scheduler, plot, say, interrupts):
    start = time.perf_counter()
    _start(out, spec, existing, say)
    ids = [spec.point_id(p) for p in grid]
    records, rejected = _read_points(out, spec, set(ids), say)
    done = [i for i in ids if records.get(i, {}).get("status") == "ok"]
    retried = [i for i in ids if records.get(i, {}).get("status") == "failed"]
    done_set = set(done)
    pending = [p for p, i in zip(grid, ids, strict=True) if i not in done_set]
    batches = make_batches(pending, spec.batch_size, spec.batch_key)
    backend = "in-process"
    if client is not None:
        backend = f"Dask scheduler {scheduler}, {_plural(len(client.nthreads()), 'worker')}"
    n_bad = len(rejected)
    say.line(
        f"[sweep] {spec.experiment}: {len(grid)} grid points, {len(done)} done (skipped), "
        + (f"{len(retried)} failed before (retried), " if retried else "")
        + (f"{_plural(n_bad, 'point file')} rejected, " if n_bad else "")
        + f"{len(pending)} to run in {_plural(len(batches), 'batch', 'es')} ({backend}); "
        + spec.describe()
    )
    say.begin(len(grid), len(done))
    counter = [len(done)]
    points_dir = out / "points"

    def handle(batch_recs):
        for rec in batch_recs:
            bad = invalid_values(spec, rec) if rec.get("status") == "ok" else None
            if bad is not None:  # never written as done: it would be rejected when read back
                rec = {**rec, "status": "failed", "error": f"invalid result: {bad}"}
            _write_point(points_dir, rec, spec)
            records[rec["id"]] = rec
            counter[0] += 1
            tail = spec.point_text(rec) if rec["status"] == "ok" else f"FAILED: {rec['error']}"
            say.point(counter[0], len(grid), f"{spec.point_label(rec)} {tail}")
            interrupts.check()
        _write_netcdf_atomic(spec.combine(records.values()), out / "sweep.nc")

    if client is None:
        for batch, pad in zip(batches, _pads(batches, spec.batch_key), strict=True):
            interrupts.check()
            say.batch([_label(spec, p) for p in batch])
            handle(_compute_batch(spec, batch, pad))
    elif batches:
        _run_on_cluster(client, spec, batches, handle, interrupts)
    interrupts.check()
    say.phase("writing sweep.nc")
    _write_netcdf_atomic(spec.combine(records.values()), out / "sweep.nc")
    plotted, figure = None, None
    if plot and spec.figure_name:
        figure = out / spec.figure_name
        say.phase(f"drawing {spec.figure_name}")
        plotted = spec.plot(out / "sweep.nc", figure)
    say.end()
    grid_recs = [records[i] for i in ids if i in records]
    failed = [r for r in grid_recs if r["status"] != "ok"]
    counts = (
        f"{len(grid)} points; {len(done)} skipped (done before), {len(pending)} run "
        f"({len(retried)} of them retried after failing before); {len(failed)} failed; "
        f"{time.perf_counter() - start:.1f}s"
    )
    summary = _summary(spec, counts, grid_recs, failed, rejected, plotted)
    say.line(summary)
    files = [out / "sweep.nc"] + ([figure] if figure else [])
    say.line("wrote: " + ", ".join(str(f) for f in files))
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


def _run_on_cluster(client, spec: AbstractSweepSpec, batches, handle, interrupts) -> None:
    """One Dask task per batch; each batch's records handled as it arrives (a batch that
    failed on the cluster: its points recorded as failed, the others go on)."""
    from distributed import as_completed

    futures = {}
    for batch, pad in zip(batches, _pads(batches, spec.batch_key), strict=True):
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


def _summary(spec, counts: str, grid_recs, failed, rejected, plotted) -> str:
    """The sweep's summary: the counts, the spec's table, the rejected files, the failed
    points and the spec's notes."""
    lines = [f"\n== sweep summary: {counts} ==", *spec.summary_table(grid_recs)]
    if rejected:
        lines.append(
            f"REJECTED point files ({len(rejected)}; not merged, recomputed if in this grid):"
        )
        lines += [f"  {r['file']}: {r['reason']}" for r in rejected]
    if failed:
        lines.append(f"FAILED ({len(failed)}):")
        lines += [f"  {spec.point_label(r)}: {r['error']}" for r in failed]
    lines += spec.summary_notes(grid_recs, plotted)
    return "\n".join(lines)
