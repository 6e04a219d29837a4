"""Batched, resumable, optionally distributed parameter sweeps (`flows sweep`).

The multi-stage descent-time sweep: a grid over width m, init exponent α and seed. Runs of
equal shape (one m) are integrated together by `simulate_batch` (vmap); every grid point
is written atomically to its own file as soon as its batch is done, so an interrupted
sweep resumes where it stopped; the combined, labelled results file is rebuilt from the
point files after every batch.

Layout of the output folder `OUT`:

- `OUT/manifest.json`: experiment name, format and the settings that must match to resume
  (everything except the grid: target, data, n, solver, rtol, atol, β, n_save, margin,
  max_steps), creation time and library versions. A sweep into a folder with different
  settings is refused (use a new `--out`, or delete the folder to start fresh).
- `OUT/points/<id>.nc` (`id` = `m<m>_alpha<α>_seed<seed>`): one netCDF file per grid
  point — the curves `tau(save)`, `t(save)`, `loss(save)`, `K_hat(save)`, every scalar
  result as a 0-d variable, and `status` ('ok' | 'failed'), `error`, `note` as attributes.
  Written to a hidden temporary file in the same folder, fsynced, then renamed: a crash
  never leaves a half-written point (the next sweep into the folder deletes such
  temporaries, and only those: `flows._io.remove_stale_temporaries`).
- `OUT/sweep.nc`: the combined xarray Dataset on coordinates `m`, `alpha`, `seed` (and
  `save`, the save index, for curves). Each point's curves are on its own save times,
  `n_save` equally spaced on [0, τ₁] with τ₁ = T_d,leading(m, α) + margin, so `tau(m,
  alpha, seed, save)` is stored beside `loss` and `K_hat`. It holds every point in
  `points/` (the union over all sweeps into this folder, so an extended grid adds to it);
  combinations never run have `status = 'missing'` and NaN values. Attributes: config,
  solver settings and library versions.
- `OUT/descent_time.png`: T_d against α (per m) and against ln m (per α) with fitted
  slopes beside the theory (`plot_descent_sweep`).
- `OUT/.lock`: held (`flock`) by the sweep writing the folder; a second sweep into it is
  refused while the first runs. The operating system drops the lock when its process
  ends, however it ends.

Before anything is written, the settings are checked as every point would check them
(one point's problem is built), so a sweep that could only fail leaves no folder behind.

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

import contextlib
import dataclasses
import datetime
import functools
import io
import json
import math
import re
import signal
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import xarray as xr

from ._errors import ConfigError
from ._io import (
    LOCK_NAME,
    FolderBusy,
    hdf5_hazard,
    lock_folder,
    remove_stale_temporaries,
    write_atomic,
)
from ._resources import check_memory, two_layer_bytes
from ._trajectory import versions

__all__ = [
    "SweepConfig",
    "SweepResult",
    "parse_grid",
    "sweep",
    "run_points",
    "plot_descent_sweep",
    "EXPERIMENTS",
]

#: Experiments `flows sweep` knows.
EXPERIMENTS = ("multistage",)
#: Format tag written into the manifest.
FORMAT = "flows-sweep/1"
SCALARS = (
    "T_p",
    "T_d",
    "T_sp",
    "loss_plateau_end",
    "loss_descent_end",
    "loss_next_descent",
    "tau1",
    "t1",
    "t_reached",
    "vf_evals",
    "steps",
    "accepted_steps",
    "rejected_steps",
    "wall_s",
    "batch_wall_s",
    "batch_size",
    "compile_s",
    "energy_residual_max",
    "loss_initial",
    "loss_final",
)
CURVES = ("tau", "t", "loss", "K_hat")
TEXTS = ("status", "error", "note")


# ---------------------------------------------------------------------------------------
# Configuration and grid


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Settings of a multistage sweep that every grid point shares (saved in the manifest;
    a sweep into an existing folder must match them).

    `target` ('f1', 'f2', 'f3'), `data` ('paper' | 'assumption'), `n` data points, `solver`
    (a name in `flows.SOLVERS`), `vector_field` ('autodiff' or the hand-derived 'fused'),
    `dtype` ('float64' or 'float32': data, θ and the solve), `rtol`, `atol`, `beta`
    (T_d = first τ ≥ T_p with 1 − K̂ ≤ β), `n_save` save times per run, `margin`
    (horizon τ₁ = T_d,leading + margin, in the theorems' time τ), `max_steps` (solver step
    budget per run).
    """

    experiment: str = "multistage"
    target: str = "f1"
    data: str = "paper"
    n: int = 1000
    solver: str = "tsit5"
    rtol: float = 1e-6
    atol: float = 1e-9
    beta: float = 0.1
    n_save: int = 401
    margin: float = 8.0
    max_steps: int = 200_000
    vector_field: str = "autodiff"
    dtype: str = "float64"

    def __post_init__(self):
        from ._data import TARGETS
        from ._simulate import SOLVERS

        if self.experiment not in EXPERIMENTS:
            raise ConfigError(
                f"`flows sweep` supports the experiments {list(EXPERIMENTS)}; "
                f"got {self.experiment!r}."
            )
        if self.target not in TARGETS:
            raise ConfigError(f"`target` must be one of {sorted(TARGETS)}; got {self.target!r}.")
        if self.data not in ("paper", "assumption"):
            raise ConfigError(f"`data` must be 'paper' or 'assumption'; got {self.data!r}.")
        if not (_is_int(self.n) and self.n >= 2):
            raise ConfigError(f"`n` (data points) must be an integer ≥ 2; got {self.n!r}.")
        if self.solver not in SOLVERS:
            raise ConfigError(f"`solver` must be one of {sorted(SOLVERS)}; got {self.solver!r}.")
        for name in ("rtol", "atol", "margin"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"`{name}` must be a finite number > 0; got {v!r}.")
        if not (isinstance(self.beta, (int, float)) and 0 < self.beta < 1):
            raise ConfigError(f"`beta` must lie in (0, 1); got {self.beta!r}.")
        if not (_is_int(self.n_save) and self.n_save >= 3):
            raise ConfigError(f"`n_save` must be an integer ≥ 3; got {self.n_save!r}.")
        if not (_is_int(self.max_steps) and self.max_steps >= 1):
            raise ConfigError(f"`max_steps` must be an integer ≥ 1; got {self.max_steps!r}.")
        if self.vector_field not in ("autodiff", "fused"):
            raise ConfigError(
                f"`vector_field` must be 'autodiff' or 'fused'; got {self.vector_field!r}."
            )
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"`dtype` must be 'float64' or 'float32'; got {self.dtype!r}.")

    def to_dict(self) -> dict:
        from ._simulate import SOLVER_METHODS

        d = dataclasses.asdict(self)
        for k in ("rtol", "atol", "beta", "margin"):
            d[k] = float(d[k])
        for k in ("n", "n_save", "max_steps"):
            d[k] = int(d[k])
        # the algorithm behind the solver's name, so that a folder computed by an earlier
        # algorithm under the same name is not resumed with the new one
        d["solver_method"] = SOLVER_METHODS.get(self.solver, self.solver)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SweepConfig:
        """Inverse of `to_dict`. A `solver_method` that this library's solver does not
        implement (e.g. a Dask worker with another version) is refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        cfg = cls(**{k: v for k, v in d.items() if k in names})
        mine = cfg.to_dict()["solver_method"]
        if d.get("solver_method", mine) != mine:
            raise ConfigError(
                f"this process implements solver {cfg.solver!r} as {mine!r}, but the sweep "
                f"asks for {d['solver_method']!r} (a different flows version?)."
            )
        return cfg


#: What a manifest or point written before a setting existed meant by it.
_LEGACY_SOLVER_METHODS = {"rkc": "RKC2"}


def _upgrade_config(old: dict) -> dict:
    """A saved config with the settings added since filled in as they were then: `dtype`
    (float64), `solver_method` (RKC2 without non-stiff steps for 'rkc')."""
    solver = old.get("solver", "")
    return {
        "dtype": "float64",
        "solver_method": _LEGACY_SOLVER_METHODS.get(solver, solver),
        **old,
    }


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def _items(value, flag: str) -> list:
    """Split a grid given as text ('1,2,3') or a sequence into its items."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ConfigError(f"{flag} is empty: give comma-separated values, e.g. {flag} 1,2.")
        parts = [p.strip() for p in text.split(",")]
        if any(p == "" for p in parts):
            raise ConfigError(f"{flag} {value!r} is malformed: an empty item between commas.")
        return parts
    if isinstance(value, (int, float, np.integer, np.floating)):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise ConfigError(f"{flag} must be a list of values or a string; got {value!r}.") from None
    if not items:
        raise ConfigError(f"{flag} is empty: give at least one value.")
    return items


def _to_int(item, flag: str) -> int:
    if _is_int(item):
        return int(item)
    if isinstance(item, (float, np.floating)) and math.isfinite(item) and item == int(item):
        return int(item)
    if isinstance(item, str):
        try:
            return int(item)
        except ValueError:
            try:
                f = float(item)
            except ValueError:
                f = float("nan")
            if math.isfinite(f) and f == int(f):
                return int(f)
    raise ConfigError(f"{flag}: {item!r} is not an integer.")


def _to_float(item, flag: str) -> float:
    try:
        v = float(item)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag}: {item!r} is not a number.") from None
    if not math.isfinite(v):
        raise ConfigError(f"{flag}: {item!r} is not a finite number.")
    return v


def _no_duplicates(values: list, flag: str, name: str) -> tuple:
    seen = set()
    for v in values:
        if v in seen:
            raise ConfigError(
                f"duplicate grid point: {name}={v!r} given twice in {flag}; list each value once."
            )
        seen.add(v)
    return tuple(values)


#: Smallest initial-weight scale m^-α a sweep accepts (atol must sit 100× below it).
MIN_INIT_STD = 1e-150


def parse_widths(value) -> tuple[int, ...]:
    """Widths m ('1000,5000' or a sequence): integers ≥ 2 (the theory uses ln m)."""
    ms = [_to_int(v, "--m") for v in _items(value, "--m")]
    for m in ms:
        if m < 2:
            raise ConfigError(
                f"--m: width m = {m} is too small; widths must be integers ≥ 2 "
                "(the predictions use ln m)."
            )
    return _no_duplicates(ms, "--m", "m")


def parse_alphas(value) -> tuple[float, ...]:
    """Init exponents α ('0.75,1.0' or a sequence): α > 1/2, the theorems' regime."""
    alphas = [_to_float(v, "--alpha") for v in _items(value, "--alpha")]
    for a in alphas:
        if not a > 0.5:
            raise ConfigError(
                f"--alpha: α = {a} ≤ 1/2; the multi-stage theorems (and their predicted T_p, "
                "T_d) need small initialization, α > 1/2."
            )
    return _no_duplicates(alphas, "--alpha", "alpha")


_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_seeds(value) -> tuple[int, ...]:
    """Seeds: '0-2' (inclusive range), '0,1,2', or a sequence; integers ≥ 0."""
    if isinstance(value, str):
        seeds: list[int] = []
        for part in _items(value, "--seeds"):
            rng = _RANGE.match(part)
            if rng:
                lo, hi = int(rng.group(1)), int(rng.group(2))
                if hi < lo:
                    raise ConfigError(f"--seeds: range {part!r} is empty (end before start).")
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(_to_int(part, "--seeds"))
    else:
        seeds = [_to_int(v, "--seeds") for v in _items(value, "--seeds")]
    for s in seeds:
        if s < 0:
            raise ConfigError(f"--seeds: seed {s} is negative; seeds are integers ≥ 0.")
    return _no_duplicates(seeds, "--seeds", "seed")


#: A sweep refuses an atol above this fraction of the smallest initial scale m^{-α}.
ATOL_INIT_FRACTION = 1e-2


def parse_grid(m, alpha, seeds) -> list[tuple[int, float, int]]:
    """The grid points (m, α, seed), m outermost; raises `ConfigError` on bad input."""
    ms, alphas, ss = parse_widths(m), parse_alphas(alpha), parse_seeds(seeds)
    return [(mi, ai, si) for mi in ms for ai in alphas for si in ss]


def point_id(m: int, alpha: float, seed: int) -> str:
    return f"m{int(m)}_alpha{float(alpha)!r}_seed{int(seed)}"


# ---------------------------------------------------------------------------------------
# Computing grid points (runs on the client in-process, or on Dask workers)


@functools.lru_cache(maxsize=8)
def _data_and_units(target: str, data: str, n: int):
    from ._data import assumption_data, moments, paper_data
    from .experiments.multistage.experiment import Units

    ds = paper_data(target, n=n) if data == "paper" else assumption_data(target, n=n)
    return ds, Units.of(moments(ds))


def horizon(cfg: SweepConfig, m: int, alpha: float) -> tuple[float, float]:
    """(τ₁, t₁): the horizon T_d,leading(m, α) + margin in τ, and in physical time."""
    from reduced import multistage as ms

    _, units = _data_and_units(cfg.target, cfg.data, cfg.n)
    tau1 = ms.descent_time_leading(m, alpha) + cfg.margin
    return tau1, float(units.t(tau1))


def descent_observables(problem, theta, t):
    """What a descent-time point needs at each save time: K̂ = K·s²/‖b‖ (T_d) — the loss
    and the energy are always recorded. `flows.multistage_observables` would add a
    gradient, a sort and the linearized closed form per save time, which on the sweep's
    401 saves cost more than the solve itself."""
    x, y = problem.x, problem.y
    n, d = x.shape
    b = x.T @ y / n
    s2 = jnp.trace(x.T @ x / n) / d
    b_norm = jnp.linalg.norm(b)
    K = jnp.sum(theta["a"] * (theta["w"] @ (b / b_norm)))
    return {"K_hat": K * s2 / b_norm}


def _make_point_problem(cfg: SweepConfig, m: int, alpha: float, seed: int):
    from ._problem import make_problem
    from .models import TwoLayer

    data, _ = _data_and_units(cfg.target, cfg.data, cfg.n)
    model = TwoLayer(m=int(m), d=data.d, alpha=float(alpha))
    return make_problem(model, data, key=int(seed), vector_field=cfg.vector_field, dtype=cfg.dtype)


def _error_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _blank_record(cfg: SweepConfig, m: int, alpha: float, seed: int) -> dict:
    rec = {"id": point_id(m, alpha, seed), "m": int(m), "alpha": float(alpha), "seed": int(seed)}
    rec.update({k: float("nan") for k in SCALARS})
    rec.update({k: np.full(cfg.n_save, np.nan) for k in CURVES})
    rec.update(status="failed", error="", note="")
    try:
        rec["tau1"], rec["t1"] = horizon(cfg, m, alpha)
    except Exception:  # noqa: BLE001 - the record says what failed later
        pass
    return rec


def _fill_from_trajectory(rec: dict, traj, cfg: SweepConfig, units) -> None:
    from .experiments.multistage.experiment import stage_times

    st = traj.stats
    o = traj.observables

    def finite(a):
        a = np.asarray(a, dtype=np.float64)
        return np.where(np.isfinite(a), a, np.nan)

    rec["t"] = finite(traj.times)
    rec["tau"] = finite(units.tau(traj.times))
    rec["loss"] = finite(o["loss"])
    rec["K_hat"] = finite(o["K_hat"])
    for k in ("t_reached", "steps", "accepted_steps", "rejected_steps", "vf_evals"):
        rec[k] = float(st[k])
    for k in ("wall_s", "batch_wall_s", "batch_size", "compile_s"):
        rec[k] = float(st.get(k, float("nan")))
    res = finite(o["energy_residual"])
    rec["energy_residual_max"] = float(np.nanmax(res)) if np.isfinite(res).any() else float("nan")
    rec["loss_initial"] = float(rec["loss"][0])
    rec["loss_final"] = float(rec["loss"][-1])
    if st["result"] != "successful":
        return
    times = stage_times(traj, units, rec["m"], rec["alpha"], cfg.beta)
    for k in ("T_p", "T_d", "T_sp", "loss_plateau_end", "loss_descent_end", "loss_next_descent"):
        rec[k] = float(times[k])


def run_points(config: dict, specs: Sequence[tuple[int, float, int]], pad_to: int = 0) -> list:
    """Compute grid points `specs` = [(m, α, seed), …] of one width as one vmapped batch.

    Plain data in, plain data out (runs on Dask workers): `config` is
    `SweepConfig.to_dict()`; returns one record (dict of floats, strings and NumPy curves)
    per spec, in order. `pad_to` pads the batch with copies of its last member (results
    discarded) so that batches of one width share one compiled solve. A point that cannot
    be built, whose solve fails, or whose analysis raises is recorded as failed with its
    error; the others are unaffected.
    """
    from ._batch import simulate_batch

    cfg = SweepConfig.from_dict(config)
    _, units = _data_and_units(cfg.target, cfg.data, cfg.n)
    records = [_blank_record(cfg, *spec) for spec in specs]
    built = []  # (index, problem, t1)
    for i, (m, alpha, seed) in enumerate(specs):
        try:
            _, t1 = horizon(cfg, m, alpha)
            built.append((i, _make_point_problem(cfg, m, alpha, seed), t1))
        except Exception as exc:  # noqa: BLE001 - recorded for this point only
            records[i]["error"] = _error_text(exc)
    if not built:
        return records
    run = built + [built[-1]] * max(0, pad_to - len(built))
    kwargs = dict(
        n_save=cfg.n_save,
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=descent_observables,
        max_steps=cfg.max_steps,
    )
    try:
        outs = simulate_batch([p for _, p, _ in run], t1s=[t for _, _, t in run], **kwargs)
    except Exception:  # noqa: BLE001 - isolate the culprit: run the members one by one
        outs = []
        for _, p, t1 in built:
            try:
                outs.extend(simulate_batch([p], t1s=[t1], **kwargs))
            except Exception as exc:  # noqa: BLE001
                outs.append(exc)
    for (i, _, _), out in zip(built, outs, strict=False):
        rec = records[i]
        try:
            traj = getattr(out, "trajectory", out)
            if traj is not None and not isinstance(traj, BaseException):
                _fill_from_trajectory(rec, traj, cfg, units)
            if isinstance(out, BaseException):
                rec["error"] = _error_text(out)
                continue
            rec["status"] = "ok"
            if not math.isfinite(rec["T_d"]):
                rec["note"] = (
                    f"T_d not reached within the horizon τ₁ = {rec['tau1']:.4g} "
                    f"(K̂ stayed below 1 − β = {1 - cfg.beta:g}); increase the margin"
                )
        except Exception as exc:  # noqa: BLE001
            rec["status"] = "failed"
            rec["error"] = _error_text(exc)
    return records


# ---------------------------------------------------------------------------------------
# Storage


def _write_netcdf_atomic(ds: xr.Dataset, path: Path) -> Path:
    encoding = {
        v: {"zlib": True, "complevel": 4}
        for v in ds.data_vars
        if ds[v].dtype.kind in "fiu" and ds[v].ndim > 0
    }
    return write_atomic(path, lambda tmp: ds.to_netcdf(tmp, engine="h5netcdf", encoding=encoding))


def _write_text_atomic(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


def _point_dataset(rec: dict, cfg: SweepConfig) -> xr.Dataset:
    data = {k: (("save",), np.asarray(rec[k], dtype=np.float64)) for k in CURVES}
    data.update({k: ((), np.float64(rec[k])) for k in SCALARS})
    ds = xr.Dataset(data, coords={"save": np.arange(cfg.n_save)})
    ds.attrs.update(
        id=rec["id"],
        m=int(rec["m"]),
        alpha=float(rec["alpha"]),
        seed=int(rec["seed"]),
        status=rec["status"],
        error=rec["error"],
        note=rec["note"],
        experiment=cfg.experiment,
        config=json.dumps(cfg.to_dict()),
    )
    return ds


def _write_point(points_dir: Path, rec: dict, cfg: SweepConfig) -> Path:
    return _write_netcdf_atomic(_point_dataset(rec, cfg), points_dir / f"{rec['id']}.nc")


class _Rejected(Exception):
    """A point file that is not merged; the message says why."""


def _point_max_bytes(cfg: SweepConfig) -> int:
    # a point holds 4 curves and a coordinate of n_save numbers, ~20 scalars and a few
    # strings: tens of kB at the defaults. Anything far larger is not read into memory.
    return (1 << 20) + 64 * cfg.n_save


def _point_schema(cfg: SweepConfig) -> dict[str, tuple[tuple[str, ...], str, tuple[int, ...]]]:
    """The variables of a point file of this sweep: name → (dims, dtype kind, shape)."""
    schema = {"save": (("save",), "i", (cfg.n_save,))}
    schema.update({k: (("save",), "f", (cfg.n_save,)) for k in CURVES})
    schema.update({k: ((), "f", ()) for k in SCALARS})
    return schema


def _check_point_layout(data: bytes, cfg: SweepConfig) -> None:
    """Refuse (`_Rejected`) a point file that could make HDF5 read other files, or whose
    variables, shapes or dtypes are not those of `_point_schema`: checked on the raw HDF5
    before netCDF parses anything, so a crafted size is never allocated."""
    import h5py

    hazard = hdf5_hazard(io.BytesIO(data))
    if hazard is not None:
        raise _Rejected(hazard)
    schema = _point_schema(cfg)
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


def _read_point(path: Path, cfg: SweepConfig) -> tuple[dict | None, str | None]:
    """A point record from its file: (record, None), or (None, why the file is rejected)
    when it is unreadable, could read other files (`hdf5_hazard`), does not have the
    layout of a point of this sweep (`_point_schema`), or was written with other
    settings."""
    try:
        size = path.stat().st_size
        if size > _point_max_bytes(cfg):
            raise _Rejected(f"{size} bytes, far more than a point file of this sweep")
        # read once: the bytes checked are the bytes parsed, whatever happens to the file
        data = path.read_bytes()
        _check_point_layout(data, cfg)
        # raw values: no attribute of the file may change what is read (scales, units)
        ds = xr.load_dataset(io.BytesIO(data), engine="h5netcdf", decode_cf=False)
        schema = _point_schema(cfg)
        for name, (dims, _, _) in schema.items():
            if ds[name].dims != dims:
                raise _Rejected(f"variable {name!r} has dimensions {ds[name].dims}, not {dims}")
        attrs = ds.attrs
        try:
            saved = _upgrade_config(json.loads(attrs["config"]))
            m, alpha, seed = int(attrs["m"]), float(attrs["alpha"]), int(attrs["seed"])
            texts = {k: attrs.get(k, "") for k in TEXTS}
        except (KeyError, TypeError, ValueError) as exc:
            raise _Rejected(f"its attributes are malformed ({_error_text(exc)})") from None
        if not isinstance(saved, dict) or not all(isinstance(v, str) for v in texts.values()):
            raise _Rejected("its attributes are malformed")
        try:  # coordinates a grid could hold: the combined file is indexed by them
            parse_widths([m]), parse_alphas([alpha]), parse_seeds([seed])
        except ConfigError as exc:
            raise _Rejected(f"not a grid point ({exc})") from None
        mine = cfg.to_dict()
        diff = [k for k in sorted(set(saved) | set(mine)) if saved.get(k) != mine.get(k)]
        if diff:
            was = ", ".join(f"{k}={saved.get(k)!r}" for k in diff)
            now = ", ".join(f"{k}={mine.get(k)!r}" for k in diff)
            raise _Rejected(f"written with other settings ({was}; this sweep: {now})")
        if attrs.get("id") != path.stem or point_id(m, alpha, seed) != path.stem:
            raise _Rejected(
                f"it holds point {attrs.get('id')!r} (m={m}, α={alpha!r}, seed={seed}), "
                "not the point its name says"
            )
        if texts["status"] not in ("ok", "failed"):
            raise _Rejected(f"status {texts['status']!r} is neither 'ok' nor 'failed'")
        rec = {"id": path.stem, "m": m, "alpha": alpha, "seed": seed, **texts}
        for k in SCALARS:
            rec[k] = float(ds[k].values)
        for k in CURVES:
            rec[k] = np.asarray(ds[k].values, dtype=np.float64)
        return rec, None
    except _Rejected as exc:
        return None, str(exc)
    except Exception as exc:  # noqa: BLE001 - an unreadable point is reported and recomputed
        return None, f"unreadable ({_error_text(exc)})"


def combined_dataset(records: Iterable[dict], cfg: SweepConfig) -> xr.Dataset:
    """The labelled results of `records` on coordinates (m, alpha, seed[, save])."""
    records = list(records)
    ms = sorted({r["m"] for r in records})
    alphas = sorted({r["alpha"] for r in records})
    seeds = sorted({r["seed"] for r in records})
    shape = (len(ms), len(alphas), len(seeds))
    scal = {k: np.full(shape, np.nan) for k in SCALARS}
    curves = {k: np.full(shape + (cfg.n_save,), np.nan) for k in CURVES}
    texts = {k: np.full(shape, "", dtype=object) for k in TEXTS}
    texts["status"][...] = "missing"
    im = {v: i for i, v in enumerate(ms)}
    ia = {v: i for i, v in enumerate(alphas)}
    is_ = {v: i for i, v in enumerate(seeds)}
    for r in records:
        idx = (im[r["m"]], ia[r["alpha"]], is_[r["seed"]])
        for k in SCALARS:
            scal[k][idx] = r[k]
        for k in CURVES:
            curves[k][idx] = r[k]
        for k in TEXTS:
            texts[k][idx] = r[k]
    dims = ("m", "alpha", "seed")
    data = {k: (dims, v) for k, v in scal.items()}
    data.update({k: (dims + ("save",), v) for k, v in curves.items()})
    data.update({k: (dims, v.astype(str)) for k, v in texts.items()})
    ds = xr.Dataset(
        data,
        coords={
            "m": np.asarray(ms, dtype=np.int64),
            "alpha": np.asarray(alphas, dtype=np.float64),
            "seed": np.asarray(seeds, dtype=np.int64),
            "save": np.arange(cfg.n_save),
        },
    )
    descriptions = {
        "T_p": "predicted plateau end (Table 1), in τ",
        "T_d": "measured descent time: first τ ≥ T_p with 1 − K̂ ≤ β (NaN: not reached)",
        "T_sp": "secondary-plateau end T_d + ln m/(40β) (eq. 63), in τ",
        "loss_plateau_end": "loss-only detector: end of the initial plateau, in τ",
        "loss_descent_end": "loss-only detector: end of the descent, in τ",
        "loss_next_descent": "loss-only detector: start of the next descent, in τ",
        "tau1": "horizon in τ: T_d,leading(m, α) + margin",
        "t1": "horizon in physical time",
        "wall_s": "batch wall time / batch size (s)",
        "energy_residual_max": "max |L(0) − L(t) − ∫‖∇L‖²| (accuracy certificate)",
        "tau": "save times of this point in τ = ‖E[f x]‖·t",
        "t": "save times of this point in physical time",
        "loss": "loss R at the save times",
        "K_hat": "K̂ = K·s²/‖b‖ at the save times",
        "status": "'ok', 'failed' or 'missing' (never run)",
        "error": "error message of a failed point",
    }
    for k, text in descriptions.items():
        ds[k].attrs["description"] = text
    c = cfg.to_dict()
    ds.attrs.update(
        experiment=cfg.experiment,
        format=FORMAT,
        config=json.dumps(c),
        versions=json.dumps(versions()),
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        target=cfg.target,
        data=cfg.data,
        n=cfg.n,
        beta=cfg.beta,
        layout="curves on each point's own save times: tau(m, alpha, seed, save)",
    )
    return ds


def _check_out(out: Path, cfg: SweepConfig) -> bool:
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
        # our lock, and hidden temporary files of an interrupted first write, do not make it
        # a foreign folder
        if any(
            p.name != LOCK_NAME and not (p.name.startswith(".") and p.name.endswith(".tmp"))
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
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{manifest} is unreadable ({exc}). {fresh}") from None
    if old_exp != cfg.experiment:
        raise ConfigError(
            f"{out} holds a sweep of experiment {old_exp!r}, not {cfg.experiment!r}. {fresh}"
        )
    new_cfg = cfg.to_dict()
    old_cfg = _upgrade_config(old_cfg)  # folders written before a setting existed
    diff = [k for k in sorted(set(old_cfg) | set(new_cfg)) if old_cfg.get(k) != new_cfg.get(k)]
    if diff:
        was = ", ".join(f"{k}={old_cfg.get(k)!r}" for k in diff)
        now = ", ".join(f"{k}={new_cfg.get(k)!r}" for k in diff)
        raise ConfigError(
            f"{out} holds a sweep with different settings ({was}); this sweep asks for {now}. "
            f"{fresh} Only the grid (--m, --alpha, --seeds) may change between runs into one "
            "folder."
        )
    return True


# ---------------------------------------------------------------------------------------
# Batches and the backends


def make_batches(points: Sequence[tuple[int, float, int]], batch_size: int) -> list[list]:
    """Group points by width m (equal shapes) and split each group into balanced batches
    of at most `batch_size`, keeping equal α together (similar horizons)."""
    groups: dict[int, list] = {}
    for p in points:
        groups.setdefault(p[0], []).append(p)
    batches = []
    for m in sorted(groups):
        group = sorted(groups[m], key=lambda p: (p[1], p[2]))
        k = math.ceil(len(group) / batch_size)
        size = math.ceil(len(group) / k)
        batches.extend(group[i : i + size] for i in range(0, len(group), size))
    return batches


def _connect(scheduler: str, timeout: float):
    try:
        from distributed import Client
    except ImportError as exc:
        raise ConfigError(
            f"--scheduler needs Dask's distributed scheduler ({exc}): install the dask "
            "extra: pip install 'flows-theory[dask]'."
        ) from None
    # Built in two steps so that a client whose connection failed can be closed here: left
    # to the garbage collector, its `__del__` waits 2×timeout on its dead event loop at exit
    # and prints a TimeoutError traceback after our message (seen with a bad address
    # scheme, or a peer that is not a scheduler).
    client = Client.__new__(Client)
    try:
        client.__init__(scheduler, timeout=timeout, set_as_default=False)
    except BaseException as exc:
        _close_quietly(client, timeout)
        if not isinstance(exc, Exception):
            raise  # Ctrl-C while connecting stays an interrupt
        raise ConfigError(
            f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g}s "
            f"({_error_text(exc)}). Check the address (e.g. tcp://host:8786) and that the "
            "scheduler is running; nothing was written."
        ) from None
    return client


def _close_quietly(client, timeout: float) -> None:
    try:
        client.close(timeout=timeout)
    except Exception:  # noqa: BLE001 - the connection error is what the user needs
        pass


@dataclasses.dataclass
class SweepResult:
    """What `sweep` did: counts, failures, the files written and the fitted slopes."""

    out: Path
    path: Path
    n_points: int
    n_skipped: int
    n_run: int
    n_retried: int
    failed: list[dict]
    not_reached: list[dict]
    slopes: dict | None
    figure: Path | None
    summary: str
    backend: str
    #: Point files found unreadable, unsafe or not from this sweep: [{"file", "reason"}].
    rejected: list[dict] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no point of this grid failed."""
        return not self.failed

    def dataset(self) -> xr.Dataset:
        return _load_checked(self.path)


def _load_checked(path: Path) -> xr.Dataset:
    """A combined results file, refused (`ConfigError`) if it could read other files."""
    data = path.read_bytes()  # the bytes checked are the bytes parsed
    hazard = hdf5_hazard(io.BytesIO(data))
    if hazard is not None:
        raise ConfigError(f"refusing to read {path}: {hazard}.")
    return xr.load_dataset(io.BytesIO(data), engine="h5netcdf")


def _fmt(x: float, digits: int = 4) -> str:
    return f"{x:.{digits}g}" if math.isfinite(x) else "NaN"


def sweep(
    out,
    *,
    m,
    alpha,
    seeds,
    experiment: str = "multistage",
    target: str = "f1",
    data: str = "paper",
    n: int = 1000,
    solver: str = "tsit5",
    rtol: float = 1e-6,
    atol: float = 1e-9,
    beta: float = 0.1,
    n_save: int = 401,
    margin: float = 8.0,
    max_steps: int = 200_000,
    vector_field: str = "autodiff",
    dtype: str = "float64",
    batch_size: int = 8,
    scheduler: str | None = None,
    connect_timeout: float = 10.0,
    plot: bool = True,
    progress: bool = True,
) -> SweepResult:
    """Run the descent-time grid m × α × seeds of the multi-stage experiment, resumably.

    **Arguments:**
    - `out`: output folder (created; see the module docstring for its layout). A folder
      holding a sweep with the same settings is resumed or extended: completed points are
      skipped, failed ones retried. Different settings are refused (`ConfigError`).
    - `m`, `alpha`, `seeds`: the grid, as sequences or strings ('1000,5000', '0.75,1',
      seeds '0-2' or '0,1,2'). Widths ≥ 2, α > 1/2, seeds ≥ 0, no duplicates.
    - `target`, `data`, `n`, `solver`, `rtol`, `atol`, `beta`, `n_save`, `margin`,
      `max_steps`, `vector_field` ('autodiff' or 'fused'), `dtype` ('float64' or
      'float32'): see `SweepConfig`.
    - `batch_size`: the most runs per vmapped batch (runs of one width are batched).
    - `scheduler`: a Dask scheduler address ('tcp://host:8786'): one task per batch on
      the cluster, point files written here as results arrive. None: batches run one after
      another in this process. `connect_timeout`: seconds to wait for the scheduler
      (unreachable: `ConfigError`, nothing written).
    - `plot`: write `OUT/descent_time.png` (`plot_descent_sweep`). `progress`: print a line
      per grid point and the summary.

    **Returns:** a `SweepResult` (`.ok` is False when a point of this grid failed; failed
    points are recorded with their error, the others complete). Raises `ConfigError` on
    bad input before anything is written.
    """
    cfg = SweepConfig(
        experiment=experiment,
        target=target,
        data=data,
        n=n,
        solver=solver,
        rtol=rtol,
        atol=atol,
        beta=beta,
        n_save=n_save,
        margin=margin,
        max_steps=max_steps,
        vector_field=vector_field,
        dtype=dtype,
    )
    grid = parse_grid(m, alpha, seeds)
    from ._simulate import _IMPLICIT, MAX_IMPLICIT_PARAMS

    widest = max(p[0] for p in grid)
    if cfg.solver in _IMPLICIT and 2 * widest > MAX_IMPLICIT_PARAMS:
        raise ConfigError(
            f"solver {cfg.solver!r} forms the dense Hessian and is limited to "
            f"{MAX_IMPLICIT_PARAMS} parameters; m = {widest} has {2 * widest}. Use 'tsit5'."
        )
    if not (_is_int(batch_size) and batch_size >= 1):
        raise ConfigError(f"`batch_size` must be an integer ≥ 1; got {batch_size!r}.")
    for mm, aa, _ in grid:
        if not float(mm) ** (-float(aa)) >= MIN_INIT_STD:
            raise ConfigError(
                f"--alpha/--m: at m = {mm}, α = {aa} the initial weights have std m^-α = "
                f"{float(mm) ** (-float(aa)):.3g}, below {MIN_INIT_STD:g}: float64 cannot "
                "resolve their growth. Use a smaller α (the theorems need α > 1/2; the paper "
                "uses α ≤ 2) or a smaller m."
            )
    if cfg.vector_field == "autodiff":  # the fused field works in sample blocks
        batch = min(batch_size, len(grid))
        check_memory(
            two_layer_bytes(cfg.n, widest, batch=batch, itemsize=jnp.dtype(cfg.dtype).itemsize),
            f"--m {widest} with --n {cfg.n} (batches of {batch})",
            "Reduce --m, --n or --batch-size.",
        )
    # atol must sit well below the initial weights (std m^{-α}); otherwise the early,
    # exponentially growing phase runs without error control and T_d shifts (measured:
    # +0.5 in τ at α = 2, m = 2·10⁴ with atol 1e-8).
    tiny = min(float(mm) ** (-float(aa)) for mm, aa, _ in grid)
    if cfg.atol > ATOL_INIT_FRACTION * tiny:
        mm, aa = min(((mm, aa) for mm, aa, _ in grid), key=lambda p: float(p[0]) ** -p[1])
        raise ConfigError(
            f"`atol` = {cfg.atol:g} is not small against the initial weights: at m = {mm}, "
            f"α = {aa:g} they have std m^-α = {tiny:.3g}, so the early growth would run "
            f"without error control. Use atol ≤ {ATOL_INIT_FRACTION * tiny:.1g} "
            f"(= {ATOL_INIT_FRACTION:g}·m^-α)."
        )
    if not (isinstance(connect_timeout, (int, float)) and connect_timeout > 0):
        raise ConfigError(f"`connect_timeout` must be > 0 seconds; got {connect_timeout!r}.")
    _check_points_buildable(cfg, grid)
    out = Path(out)
    _check_out(out, cfg)  # refuse early, before connecting; checked again under the lock
    client = _connect(scheduler, connect_timeout) if scheduler else None
    try:
        with _Interrupts() as interrupts, _locked(out):
            existing = _check_out(out, cfg)
            return _run(
                out, cfg, grid, existing, batch_size, client, scheduler, plot, progress, interrupts
            )
    finally:
        if client is not None:
            client.close()


def _check_points_buildable(cfg: SweepConfig, grid) -> None:
    """`ConfigError` now, before the folder is touched, for settings that every point would
    fail on: the narrowest point's problem is built (data, model, dtype) and its solver
    settings go through the check `simulate` makes (e.g. an rtol that float32 cannot
    meet). A manifest written for such a sweep would lock the folder against the corrected
    command."""
    from ._simulate import _resolve_solver

    m, alpha, seed = min(grid, key=lambda p: p[0])
    problem = _make_point_problem(cfg, m, alpha, seed)
    _resolve_solver(cfg.solver, cfg.rtol, problem.n_params, problem.dtype)


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


def _is_point_name(name: str) -> bool:
    return _POINT_NAME.match(name) is not None


_POINT_NAME = re.compile(r"^m\d+_alpha[^/]+_seed\d+\.nc$")
#: The files a sweep writes at the top of its folder.
_TOP_FILES = frozenset({"manifest.json", "sweep.nc", "descent_time.png"})


def _run(out, cfg, grid, existing, batch_size, client, scheduler, plot, progress, interrupts):
    start = time.perf_counter()
    points_dir = out / "points"
    # we hold the lock, so no write is in progress: a temporary of ours is a killed write's
    stale = remove_stale_temporaries(out, _TOP_FILES.__contains__)
    stale += remove_stale_temporaries(points_dir, _is_point_name)
    if stale:
        _say(
            progress,
            f"[sweep] removed {len(stale)} temporary file{'s' if len(stale) != 1 else ''} left "
            "by an interrupted write: " + ", ".join(str(q.relative_to(out)) for q in stale),
        )
    if not existing:  # the manifest first: a folder with points always has one
        manifest = {
            "experiment": cfg.experiment,
            "format": FORMAT,
            "config": cfg.to_dict(),
            "created": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "versions": versions(),
        }
        _write_text_atomic(out / "manifest.json", json.dumps(manifest, indent=2))
    points_dir.mkdir(parents=True, exist_ok=True)
    records: dict[str, dict] = {}
    rejected: list[dict] = []
    grid_ids = {point_id(*p) for p in grid}
    for path in sorted(points_dir.glob("*.nc")):
        if path.name.startswith("."):
            continue  # a temporary file of an interrupted write
        rec, reason = _read_point(path, cfg)
        if rec is not None:
            records[rec["id"]] = rec
            continue
        action = "recomputing it" if path.stem in grid_ids else "left out (not in this grid)"
        rejected.append({"file": str(path.relative_to(out)), "reason": reason})
        _say(progress, f"[sweep] rejected {path.relative_to(out)}: {reason}; {action}")
    ids = [point_id(*p) for p in grid]
    done = [i for i in ids if records.get(i, {}).get("status") == "ok"]
    retried = [i for i in ids if records.get(i, {}).get("status") == "failed"]
    done_set = set(done)
    pending = [p for p, i in zip(grid, ids, strict=True) if i not in done_set]
    batches = make_batches(pending, batch_size)
    backend = "in-process"
    if client is not None:
        n_workers = len(client.nthreads())
        backend = f"Dask scheduler {scheduler}, {n_workers} worker{'s' if n_workers != 1 else ''}"
    n_bad = len(rejected)
    _say(
        progress,
        f"[sweep] {cfg.experiment}: {len(grid)} grid points, {len(done)} done (skipped), "
        + (f"{len(retried)} failed before (retried), " if retried else "")
        + (f"{n_bad} point file{'s' if n_bad != 1 else ''} rejected, " if n_bad else "")
        + f"{len(pending)} to run in {len(batches)} "
        f"batch{'es' if len(batches) != 1 else ''} ({backend}); {cfg.solver}, "
        f"rtol={cfg.rtol:g}, atol={cfg.atol:g}, {cfg.target}, {cfg.data} data, n={cfg.n}",
    )
    counter = [len(done)]

    def handle(batch_recs):
        for rec in batch_recs:
            _write_point(points_dir, rec, cfg)
            records[rec["id"]] = rec
            counter[0] += 1
            if rec["status"] != "ok":
                tail = f"FAILED: {rec['error']}"
            elif math.isfinite(rec["T_d"]):
                tail = f"T_d={rec['T_d']:.4g} (wall {rec['wall_s']:.3g}s)"
            else:
                tail = f"T_d not reached by τ₁={rec['tau1']:.4g} (wall {rec['wall_s']:.3g}s)"
            _say(
                progress,
                f"[{counter[0]}/{len(grid)}] m={rec['m']} α={rec['alpha']:g} "
                f"seed={rec['seed']} {tail}",
            )
            interrupts.check()
        _write_netcdf_atomic(combined_dataset(records.values(), cfg), out / "sweep.nc")

    cfg_dict = cfg.to_dict()
    pads = _pads(batches)
    if client is None:
        for batch, pad in zip(batches, pads, strict=True):
            interrupts.check()
            handle(run_points(cfg_dict, batch, pad_to=pad))
    elif batches:
        from distributed import as_completed

        futures = {}
        for batch, pad in zip(batches, pads, strict=True):
            fut = client.submit(
                run_points,
                cfg_dict,
                [tuple(p) for p in batch],
                pad,
                pure=False,
                key=f"flows-sweep-{batch[0][0]}-{uuid.uuid4().hex[:12]}",
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
                    rec = _blank_record(cfg, *p)
                    rec["error"] = f"batch failed on the cluster: {_error_text(exc)}"
                    recs.append(rec)
            handle(recs)
    interrupts.check()
    ds = combined_dataset(records.values(), cfg)
    _write_netcdf_atomic(ds, out / "sweep.nc")

    slopes, figure = None, None
    if plot:
        figure = out / "descent_time.png"
        slopes = plot_descent_sweep(out / "sweep.nc", figure)
    grid_recs = [records[i] for i in ids if i in records]
    failed = [r for r in grid_recs if r["status"] != "ok"]
    not_reached = [r for r in grid_recs if r["status"] == "ok" and not math.isfinite(r["T_d"])]
    summary = _summary(
        grid,
        grid_recs,
        failed,
        not_reached,
        len(done),
        len(retried),
        len(pending),
        slopes,
        time.perf_counter() - start,
        rejected,
    )
    _say(progress, summary)
    files = [out / "sweep.nc"] + ([figure] if figure else [])
    _say(progress, "wrote: " + ", ".join(str(f) for f in files))
    return SweepResult(
        out=out,
        path=out / "sweep.nc",
        n_points=len(grid),
        n_skipped=len(done),
        n_run=len(pending),
        n_retried=len(retried),
        failed=[_brief(r) for r in failed],
        not_reached=[_brief(r) for r in not_reached],
        slopes=slopes,
        figure=figure,
        summary=summary,
        backend=backend,
        rejected=rejected,
    )


def _pads(batches: list[list]) -> list[int]:
    """Pad every batch of one width to that width's largest batch (one compiled solve)."""
    largest: dict[int, int] = {}
    for b in batches:
        largest[b[0][0]] = max(largest.get(b[0][0], 0), len(b))
    return [largest[b[0][0]] for b in batches]


def _brief(rec: dict) -> dict:
    return {
        k: rec[k] for k in ("id", "m", "alpha", "seed", "status", "error", "note", "T_d", "tau1")
    }


def _summary(
    grid, recs, failed, not_reached, n_done, n_retried, n_run, slopes, wall, rejected
) -> str:
    lines = [
        f"\n== sweep summary: {len(grid)} points; {n_done} skipped (done before), "
        f"{n_run} run ({n_retried} of them retried after failing before); {len(failed)} failed; "
        f"{wall:.1f}s ==",
        f"{'m':>8} {'α':>6} {'T_p':>8} {'T_d mean':>9} {'± sd':>7}  reached/n",
    ]
    by = {}
    for r in recs:
        by.setdefault((r["m"], r["alpha"]), []).append(r)
    for (m_, a_), rs in sorted(by.items()):
        vals = np.array([r["T_d"] for r in rs if r["status"] == "ok"], dtype=float)
        fin = vals[np.isfinite(vals)]
        mean = float(np.mean(fin)) if fin.size else float("nan")
        sd = float(np.std(fin, ddof=1)) if fin.size > 1 else float("nan")
        t_p = next((r["T_p"] for r in rs if math.isfinite(r["T_p"])), float("nan"))
        lines.append(
            f"{m_:>8} {a_:>6g} {_fmt(t_p):>8} {_fmt(mean):>9} {_fmt(sd, 2):>7} "
            f"{fin.size:>6}/{len(rs)}"
        )
    if rejected:
        lines.append(
            f"REJECTED point files ({len(rejected)}; not merged, recomputed if in this grid):"
        )
        lines += [f"  {r['file']}: {r['reason']}" for r in rejected]
    if failed:
        lines.append(f"FAILED ({len(failed)}):")
        lines += [f"  m={r['m']} α={r['alpha']:g} seed={r['seed']}: {r['error']}" for r in failed]
    if not_reached:
        lines.append(
            f"T_d not reached within the horizon ({len(not_reached)}; NaN, not a failure):"
        )
        lines += [
            f"  m={r['m']} α={r['alpha']:g} seed={r['seed']} (τ₁ = {r['tau1']:.4g})"
            for r in not_reached
        ]
    if slopes:
        for a_, s in slopes["T_d_vs_ln_m"].items():
            lines.append(
                f"slope of T_d vs ln m at α = {a_:g}: {_slope_text(s['fit'])} "
                f"(theory (2α−1)/2 = {s['theory']:.4g})"
            )
        for m_, s in slopes["T_d_vs_alpha"].items():
            lines.append(
                f"slope of T_d vs α at m = {m_}: {_slope_text(s['fit'])} "
                f"(theory ln m = {s['theory']:.4g})"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Figure


def _slope_text(fit: float) -> str:
    return f"{fit:.4g}" if math.isfinite(fit) else "n/a (needs two values)"


def _fit(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2 or np.ptp(x[ok]) == 0:
        return float("nan")
    return float(np.polyfit(x[ok], y[ok], 1)[0])


def plot_descent_sweep(sweep_nc_path, out_png) -> dict:
    """The descent-time figure of a sweep: T_d (mean ± sd over seeds, failed points and
    T_d not reached left out) against α for each m, and against ln m for each α, with
    least-squares slopes of the means in the legends beside the theory (ln m and
    (2α − 1)/2). Written atomically to `out_png`.

    **Returns:** {"T_d_vs_alpha": {m: {"fit", "theory"}}, "T_d_vs_ln_m": {α: {"fit",
    "theory"}}}; a fit is NaN with fewer than two finite means.
    """
    from .experiments.base import new_figure

    ds = _load_checked(Path(sweep_nc_path))
    ok = ds["status"] == "ok"
    td = ds["T_d"].where(ok)
    mean = td.mean("seed", skipna=True).values  # (m, alpha)
    count = np.isfinite(td.values).sum(axis=2)
    sd = np.where(count > 1, td.std("seed", ddof=1, skipna=True).values, 0.0)
    ms_ = ds["m"].values.astype(int)
    alphas = ds["alpha"].values.astype(float)
    fig, axes = new_figure(1, 2, figsize=(12, 4.5))
    slopes: dict = {"T_d_vs_alpha": {}, "T_d_vs_ln_m": {}}
    ax = axes[0]
    for i, m_ in enumerate(ms_):
        fit, theory = _fit(alphas, mean[i]), math.log(int(m_))
        slopes["T_d_vs_alpha"][int(m_)] = {"fit": fit, "theory": theory}
        ax.errorbar(
            alphas,
            mean[i],
            yerr=sd[i],
            marker="o",
            capsize=3,
            label=f"m = {m_}: slope {_slope_text(fit)} (theory ln m = {theory:.3g})",
        )
    ax.set(xlabel="α", ylabel="T_d (τ)", title="T_d vs α (mean ± sd over seeds)")
    ax.legend(fontsize=8)
    ax = axes[1]
    lnm = np.log(ms_.astype(float))
    for j, a_ in enumerate(alphas):
        fit, theory = _fit(lnm, mean[:, j]), (2 * float(a_) - 1) / 2
        slopes["T_d_vs_ln_m"][float(a_)] = {"fit": fit, "theory": theory}
        ax.errorbar(
            lnm,
            mean[:, j],
            yerr=sd[:, j],
            marker="o",
            capsize=3,
            label=f"α = {a_:g}: slope {_slope_text(fit)} (theory (2α−1)/2 = {theory:.3g})",
        )
    ax.set(xlabel="ln m", ylabel="T_d (τ)", title="T_d vs ln m (mean ± sd over seeds)")
    ax.legend(fontsize=8)
    cfg = json.loads(ds.attrs.get("config", "{}"))
    fig.suptitle(
        f"Descent time: {cfg.get('target', '?')}, {cfg.get('data', '?')} data, "
        f"n = {cfg.get('n', '?')}, β = {cfg.get('beta', '?')}"
    )
    fig.tight_layout()
    write_atomic(Path(out_png), lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    return slopes
