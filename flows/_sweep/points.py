"""A sweep's point files read back and checked (layout, schema, size: a foreign or
truncated file is refused, never half-read), combined into one dataset
(`combine_records`), and a finished sweep loaded (`load_sweep`)."""

from __future__ import annotations

import io
import json
import math
import re
import stat
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .._errors import ConfigError
from .._io import (
    hdf5_hazard,
)
from .._solve.trajectory import machine, versions

if TYPE_CHECKING:
    import xarray as xr  # imported where used: `import flows` stays free of it

    from .spec import AbstractSweepSpec

#: Format tag written into the manifest.
FORMAT = "flows-sweep/1"
#: The text fields of every record (attributes of a point file, string variables of
#: sweep.nc).
TEXTS = ("status", "error", "note")


def error_text(exc: BaseException) -> str:
    """How a failed grid point's error is recorded: 'TypeName: message'."""
    return f"{type(exc).__name__}: {exc}"


def _point_dataset(rec: dict, spec: AbstractSweepSpec) -> xr.Dataset:
    import xarray as xr

    data = {k: (dims, np.asarray(rec[k], dtype=np.float64)) for k, dims in spec.variables().items()}
    ds = xr.Dataset(data, coords={d: np.arange(n) for d, n in spec.dims().items()})
    ds.attrs.update(
        id=rec["id"],
        **{a.name: a.kind(rec[a.name]) for a in spec.axes},
        **{k: rec[k] for k in TEXTS},
        experiment=spec.experiment,
        config=json.dumps(spec.settings()),
        # where the point was computed (`_compute_batch`); a record made here: this machine
        machine=json.dumps(rec.get("machine") or machine()),
    )
    return ds


# --- the kinds of a point's values: what an 'ok' point may hold ---------------------------

#: Largest magnitude a loss or a time read back may have: float64 reaches 1.8e308, and a
#: value within a factor 1.8e8 of it is not something a run computes (the sum of the
#: loss's terms, or the energy identity's integral of ‖∇L‖², would have overflowed first):
#: a file holding one was not written by a finished run.
LARGEST_VALUE = 1e300
#: Largest count: float64 holds every integer up to 2⁵³ exactly.
LARGEST_COUNT = 2.0**53

_LOSS_NAME = re.compile(r"^loss(_initial|_final|_curve)?$")
_TIME_NAME = re.compile(r"^(t|tau|t1|tau1|t_reached|stopped_at|T_[A-Za-z0-9]+)$")
_DURATION_NAMES = frozenset({"wall_s", "batch_wall_s", "compile_s"})
_COUNT_NAMES = frozenset(
    {"vf_evals", "steps", "accepted_steps", "rejected_steps", "segments", "batch_size"}
)


def default_value_kind(name: str) -> str | None:
    """The kind of a point variable named `name`, by the names the toolkit's sweeps use:
    'loss' (`loss`, `loss_initial`, `loss_final`, `loss_curve`), 'time' (`t`, `tau`,
    `t1`, `tau1`, `t_reached`, `stopped_at`, `T_…`, and the durations `wall_s`,
    `batch_wall_s`, `compile_s`), 'count' (`vf_evals`, `steps`, `accepted_steps`,
    `rejected_steps`, `segments`, `batch_size`); None (not checked) for anything else."""
    if _LOSS_NAME.match(name):
        return "loss"
    if _TIME_NAME.match(name) or name in _DURATION_NAMES:
        return "time"
    if name in _COUNT_NAMES:
        return "count"
    return None


#: What each kind admits, for the messages.
KIND_RULES = {
    "loss": f"a finite number ≥ 0 (≤ {LARGEST_VALUE:g}) at every save of a curve, and as a "
    "single value the same or NaN for 'not recorded'",
    "time": f"a finite number ≥ 0 (≤ {LARGEST_VALUE:g}), or NaN for 'not reached'",
    "count": "a whole number from 0 to 2⁵³, or NaN for 'not recorded'",
    "error": f"a finite number ≥ 0 (≤ {LARGEST_VALUE:g}), or NaN for 'not estimated'",
}


def _bad_value(kind: str, x: float, curve: bool) -> bool:
    if math.isnan(x):
        # a time not reached, a count or a summary loss not recorded; but a loss curve is
        # measured at every save of a finished run
        return kind == "loss" and curve
    if kind in ("loss", "time", "error"):
        return not (math.isfinite(x) and 0 <= x <= LARGEST_VALUE)
    return not (math.isfinite(x) and 0 <= x <= LARGEST_COUNT and x == math.floor(x))


def invalid_values(spec: AbstractSweepSpec, rec: dict) -> str | None:
    """Why the values of the 'ok' record `rec` cannot be those of a finished point — the
    first variable whose value is not valid for its kind (`spec.value_kind`), named with
    the value and the rule — or None when they are all valid (or the kind is unknown)."""
    for name in spec.variables():
        kind = spec.value_kind(name)
        if kind not in KIND_RULES:
            continue
        curve = bool(np.ndim(rec[name]))
        values = np.asarray(rec[name], dtype=np.float64).ravel()
        for i, x in enumerate(values.tolist()):
            if _bad_value(kind, x, curve):
                where = f"{name}[{i}]" if curve else name
                return (
                    f"{where} = {x!r} in a point marked ok, but a {kind} must be {KIND_RULES[kind]}"
                )
    return None


class _Rejected(Exception):
    """A point file that is not merged; the message says why."""


def _point_schema(spec: AbstractSweepSpec) -> dict[str, tuple[tuple[str, ...], str, tuple]]:
    """The variables of a point file of this sweep: name → (dims, dtype kind, shape)."""
    sizes = spec.dims()
    schema: dict[str, tuple[tuple[str, ...], str, tuple]] = {
        d: ((d,), "i", (n,)) for d, n in sizes.items()
    }
    for name, dims in spec.variables().items():
        schema[name] = (tuple(dims), "f", tuple(sizes[d] for d in dims))
    return schema


def _point_max_bytes(spec: AbstractSweepSpec) -> int:
    # a point holds a few curves and ~20 numbers: tens of kB. Anything far larger is not
    # read into memory.
    return (1 << 20) + 64 * sum(spec.dims().values())


def _check_point_layout(data: bytes, spec: AbstractSweepSpec) -> None:
    """Refuse (`_Rejected`) a point file that could make HDF5 read other files, or whose
    variables, shapes or dtypes are not those of `_point_schema`: checked on the raw HDF5
    before netCDF parses anything, so a crafted size is never allocated."""
    import h5py

    hazard = hdf5_hazard(io.BytesIO(data))
    if hazard is not None:
        raise _Rejected(hazard)
    schema = _point_schema(spec)
    with h5py.File(io.BytesIO(data), "r") as f:
        names = set(f)
        if names != set(schema):
            missing, extra = sorted(set(schema) - names), sorted(names - set(schema))
            raise _Rejected(
                "not the variables of a point file"
                + (f"; missing {missing}" if missing else "")
                + (f"; unexpected {extra}" if extra else "")
            )
        for name, (_, kind, shape) in schema.items():
            obj = f[name]
            if not isinstance(obj, h5py.Dataset):
                raise _Rejected(f"{name!r} is a group, not a variable")
            if obj.shape != shape or obj.dtype.kind != kind or obj.dtype.itemsize != 8:
                raise _Rejected(
                    f"variable {name!r} is {obj.dtype} of shape {obj.shape}; a point of this "
                    f"sweep has {'float64' if kind == 'f' else 'int64'} of shape {shape}"
                )


def _read_point(path: Path, spec: AbstractSweepSpec) -> tuple[dict | None, str | None]:
    """A point record from its file: (record, None), or (None, why the file is rejected)
    when it is unreadable, could read other files (`hdf5_hazard`), does not have the
    layout of a point of this sweep (`_point_schema`), or was written with other
    settings."""
    import xarray as xr

    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read; a link may lead out
            raise _Rejected("not a regular file (a folder, link, FIFO or device)")
        size = st.st_size
        if size > _point_max_bytes(spec):
            raise _Rejected(f"{size} bytes, far more than a point file of this sweep")
        # read once: the bytes checked are the bytes parsed, whatever happens to the file
        data = path.read_bytes()
        _check_point_layout(data, spec)
        # raw values: no attribute of the file may change what is read (scales, units)
        ds = xr.load_dataset(io.BytesIO(data), engine="h5netcdf", decode_cf=False)
        schema = _point_schema(spec)
        for name, (dims, _, _) in schema.items():
            if ds[name].dims != dims:
                raise _Rejected(f"variable {name!r} has dimensions {ds[name].dims}, not {dims}")
        attrs = ds.attrs
        try:
            saved = spec.upgrade_settings(json.loads(attrs["config"]))
            point = tuple(a.kind(attrs[a.name]) for a in spec.axes)
            texts = {k: attrs.get(k, "") for k in TEXTS}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise _Rejected(f"its attributes are malformed ({error_text(exc)})") from None
        if not isinstance(saved, dict) or not all(isinstance(v, str) for v in texts.values()):
            raise _Rejected("its attributes are malformed")
        try:  # coordinates a grid could hold: the combined file is indexed by them
            for a, v in zip(spec.axes, point, strict=True):
                a.parse([v])
        except ConfigError as exc:
            raise _Rejected(f"not a grid point ({exc})") from None
        mine = spec.settings()
        diff = [k for k in sorted(set(saved) | set(mine)) if saved.get(k) != mine.get(k)]
        if diff:
            was = ", ".join(f"{k}={saved.get(k)!r}" for k in diff)
            now = ", ".join(f"{k}={mine.get(k)!r}" for k in diff)
            raise _Rejected(f"written with other settings ({was}; this sweep: {now})")
        if attrs.get("id") != path.stem or spec.point_id(point) != path.stem:
            coords = ", ".join(f"{a.name}={v!r}" for a, v in zip(spec.axes, point, strict=True))
            raise _Rejected(
                f"it holds point {attrs.get('id')!r} ({coords}), not the point its name says"
            )
        if texts["status"] not in ("ok", "failed"):
            raise _Rejected(f"status {texts['status']!r} is neither 'ok' nor 'failed'")
        rec = {
            "id": path.stem,
            **{a.name: v for a, v in zip(spec.axes, point, strict=True)},
            **texts,
        }
        for name, dims in spec.variables().items():
            values = np.asarray(ds[name].values, dtype=np.float64)
            rec[name] = values if dims else float(values)
        if rec["status"] == "ok":  # believed done only if its values can be a run's
            bad = invalid_values(spec, rec)
            if bad is not None:
                raise _Rejected(bad)
        return rec, None
    except _Rejected as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - an unreadable point is reported and recomputed
        return None, f"unreadable ({error_text(exc)})"


def combine_records(spec: AbstractSweepSpec, records: Iterable[dict]) -> xr.Dataset:
    """The labelled results of `records` on the grid axes (and the per-point dimensions):
    numbers first, then curves, then the texts; combinations without a record have NaN
    and status 'missing'. Attributes: experiment, format, settings (`config`), versions."""
    import xarray as xr

    records = list(records)
    coords = {a.name: sorted({r[a.name] for r in records}) for a in spec.axes}
    index = {name: {v: i for i, v in enumerate(vals)} for name, vals in coords.items()}
    shape = tuple(len(v) for v in coords.values())
    sizes = spec.dims()
    variables = spec.variables()
    order = [k for k, d in variables.items() if not d] + [k for k, d in variables.items() if d]
    values = {k: np.full(shape + tuple(sizes[d] for d in variables[k]), np.nan) for k in order}
    texts = {k: np.full(shape, "", dtype=object) for k in TEXTS}
    texts["status"][...] = "missing"
    for r in records:
        idx = tuple(index[a.name][r[a.name]] for a in spec.axes)
        for k in order:
            values[k][idx] = r[k]
        for k in TEXTS:
            texts[k][idx] = r[k]
    axes = tuple(coords)
    data = {k: (axes + tuple(variables[k]), values[k]) for k in order}
    data.update({k: (axes, v.astype(str)) for k, v in texts.items()})
    kinds = {a.name: np.int64 if a.kind is int else np.float64 for a in spec.axes}
    ds = xr.Dataset(
        data,
        coords={
            **{n: np.asarray(v, dtype=kinds[n]) for n, v in coords.items()},
            **{d: np.arange(n) for d, n in sizes.items()},
        },
    )
    ds["status"].attrs["description"] = "'ok', 'failed' or 'missing' (never run)"
    ds["error"].attrs["description"] = "error message of a failed point"
    ds.attrs.update(
        experiment=spec.experiment,
        format=FORMAT,
        config=json.dumps(spec.settings()),
        versions=json.dumps(versions()),
    )
    return ds


#: The solve statistics a sweep point records as numbers (keys of `Trajectory.stats`, in
#: the order the shipped papers' point files hold them).
SOLVE_STATS = (
    "t_reached",
    "steps",
    "accepted_steps",
    "rejected_steps",
    "vf_evals",
    "wall_s",
    "compile_s",
)


def point_values(values: Mapping[str, Any], curves: Iterable[str]) -> dict:
    """A point's variables as its file stores them: each of `curves` a float64 array,
    every other value a float (what `AbstractSweepSpec.run_point` returns)."""
    curves = frozenset(curves)
    return {
        k: np.asarray(v, dtype=np.float64) if k in curves else float(v) for k, v in values.items()
    }


def sweep_settings(ds: xr.Dataset) -> dict:
    """The settings a combined sweep (`load_sweep`) was run with (`spec.settings()`, as
    its manifest holds them); {} when it records none."""
    return json.loads(ds.attrs.get("config", "{}"))


def seed_mean_sd(ds: xr.Dataset, name: str, dim: str = "seed") -> tuple[np.ndarray, np.ndarray]:
    """Mean and sample standard deviation of the variable `name` of a combined sweep over
    `dim` (the seeds), on the points with status 'ok' only: NaN where no point is, the sd
    0 where fewer than two are (a figure's error bars)."""
    values = ds[name].where(ds["status"] == "ok")
    mean = values.mean(dim, skipna=True).values
    count = np.isfinite(values.values).sum(axis=values.get_axis_num(dim))
    sd = np.where(count > 1, values.std(dim, ddof=1, skipna=True).values, 0.0)
    return mean, sd


def load_sweep(path) -> xr.Dataset:
    """A combined results file (sweep.nc), refused (`ConfigError`) if it could read other
    files (`hdf5_hazard`)."""
    import xarray as xr

    path = Path(path)
    data = path.read_bytes()  # the bytes checked are the bytes parsed
    hazard = hdf5_hazard(io.BytesIO(data))
    if hazard is not None:
        raise ConfigError(f"refusing to read {path}: {hazard}.")
    return xr.load_dataset(io.BytesIO(data), engine="h5netcdf")
