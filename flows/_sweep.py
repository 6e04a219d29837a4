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
  never leaves a half-written point (temporary files are ignored on resume).
- `OUT/sweep.nc`: the combined xarray Dataset on coordinates `m`, `alpha`, `seed` (and
  `save`, the save index, for curves). Each point's curves are on its own save times,
  `n_save` equally spaced on [0, τ₁] with τ₁ = T_d,leading(m, α) + margin, so `tau(m,
  alpha, seed, save)` is stored beside `loss` and `K_hat`. It holds every point in
  `points/` (the union over all sweeps into this folder, so an extended grid adds to it);
  combinations never run have `status = 'missing'` and NaN values. Attributes: config,
  solver settings and library versions.
- `OUT/descent_time.png`: T_d against α (per m) and against ln m (per α) with fitted
  slopes beside the theory (`plot_descent_sweep`).

Resume: a grid point whose file exists, is readable and has status 'ok' is skipped;
failed points are retried (the summary says how many).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import xarray as xr

from ._errors import ConfigError
from ._trajectory import versions, write_atomic

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
    from .experiments.multistage import Units

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
    from .experiments.multistage import stage_times

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


def _fsync_file(path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _write_netcdf_atomic(ds: xr.Dataset, path: Path) -> Path:
    encoding = {
        v: {"zlib": True, "complevel": 4}
        for v in ds.data_vars
        if ds[v].dtype.kind in "fiu" and ds[v].ndim > 0
    }

    def write(tmp):
        ds.to_netcdf(tmp, engine="h5netcdf", encoding=encoding)
        _fsync_file(tmp)

    write_atomic(path, write)
    _fsync_dir(path.parent)
    return path


def _write_text_atomic(path: Path, text: str) -> Path:
    def write(tmp):
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())

    write_atomic(path, write)
    _fsync_dir(path.parent)
    return path


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


def _read_point(path: Path, cfg: SweepConfig) -> dict | None:
    """A point record from its file, or None when unreadable or not from this config."""
    try:
        ds = xr.load_dataset(path, engine="h5netcdf")
        attrs = ds.attrs
        saved = _upgrade_config(json.loads(attrs["config"]))
        if attrs.get("id") != path.stem or saved != cfg.to_dict():
            return None
        rec = {
            "id": attrs["id"],
            "m": int(attrs["m"]),
            "alpha": float(attrs["alpha"]),
            "seed": int(attrs["seed"]),
        }
        for k in TEXTS:
            rec[k] = str(attrs.get(k, ""))
        for k in SCALARS:
            rec[k] = float(ds[k].values)
        for k in CURVES:
            rec[k] = np.asarray(ds[k].values, dtype=np.float64)
            if rec[k].shape != (cfg.n_save,):
                return None
        if rec["status"] not in ("ok", "failed"):
            return None
        return rec
    except Exception:  # noqa: BLE001 - an unreadable point is recomputed
        return None


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
        # hidden temporary files of an interrupted first write do not make it a foreign folder
        if any(not (p.name.startswith(".") and p.name.endswith(".tmp")) for p in out.iterdir()):
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
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except Exception as exc:  # noqa: BLE001 - any failure to connect is bad input here
        raise ConfigError(
            f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g}s "
            f"({_error_text(exc)}). Check the address (e.g. tcp://host:8786) and that the "
            "scheduler is running; nothing was written."
        ) from None


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

    @property
    def ok(self) -> bool:
        """True when no point of this grid failed."""
        return not self.failed

    def dataset(self) -> xr.Dataset:
        return xr.load_dataset(self.path, engine="h5netcdf")


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
    out = Path(out)
    existing = _check_out(out, cfg)
    client = _connect(scheduler, connect_timeout) if scheduler else None
    try:
        return _run(out, cfg, grid, existing, batch_size, client, scheduler, plot, progress)
    finally:
        if client is not None:
            client.close()


def _say(progress: bool, text: str) -> None:
    if progress:
        print(text, flush=True)


def _run(out, cfg, grid, existing, batch_size, client, scheduler, plot, progress):
    start = time.perf_counter()
    points_dir = out / "points"
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
    for path in sorted(points_dir.glob("*.nc")):
        if path.name.startswith("."):
            continue  # a temporary file of an interrupted write
        rec = _read_point(path, cfg)
        if rec is not None:
            records[rec["id"]] = rec
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
    _say(
        progress,
        f"[sweep] {cfg.experiment}: {len(grid)} grid points, {len(done)} done (skipped), "
        + (f"{len(retried)} failed before (retried), " if retried else "")
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
        _write_netcdf_atomic(combined_dataset(records.values(), cfg), out / "sweep.nc")

    cfg_dict = cfg.to_dict()
    pads = _pads(batches)
    if client is None:
        for batch, pad in zip(batches, pads, strict=True):
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


def _summary(grid, recs, failed, not_reached, n_done, n_retried, n_run, slopes, wall) -> str:
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

    ds = xr.load_dataset(sweep_nc_path, engine="h5netcdf")
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
