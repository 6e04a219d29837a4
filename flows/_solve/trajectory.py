"""`Trajectory`: what a run returns, and its labelled xarray/netCDF form."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import jax
import numpy as np

from .._errors import ConfigError
from .._io import machine as machine
from .._io import netcdf_arrays_writable, write_netcdf, write_netcdf_arrays
from .._io import versions as versions

# the one atomic writer (fsync, rename, fsync of the folder), kept importable from here
from .._io import write_atomic as write_atomic
from .stats import SolveStats, certificate

if TYPE_CHECKING:
    import xarray as xr

__all__ = [
    "Trajectory",
    "assemble_trajectory",
    "flat_params",
    "param_names",
    "stack_params",
    "versions",
    "machine",
    "write_atomic",
]

#: Observables every run has, under these names always (a parameter so named is renamed).
_CORE = frozenset({"loss", "energy", "energy_residual", "param_saved"})

#: The name of θ itself when it is a bare array (a pytree of one leaf, no path).
WHOLE_THETA = "theta"


def _key_name(key) -> str:
    """One step of a pytree path as text: a dict key, a sequence index, an attribute."""
    tu = jax.tree_util
    if isinstance(key, tu.DictKey):
        return str(key.key)
    if isinstance(key, tu.SequenceKey):
        return str(key.idx)
    if isinstance(key, tu.GetAttrKey):
        return key.name
    if isinstance(key, tu.FlattenedIndexKey):
        return str(key.key)
    return str(key)  # pragma: no cover - a key type jax adds later


def param_names(tree, *, name: str = "theta0") -> list[str]:
    """The names θ's leaves carry in results (`Trajectory.params`, netCDF variables), in
    the order of `jax.tree_util.tree_leaves`: the leaf's path, steps joined by dots — a
    dict of arrays keeps its keys (`W`, `b`), a nested dict gives `layer1.W`, a tuple or
    list `0`, `1`, a list of dicts `0.W`, a bare array `theta`. A `/` in a key (Haiku's
    `mlp/~/linear`) becomes `.` too: netCDF reserves `/` for groups.

    Raises `ConfigError` (naming `name`) when two leaves would get the same name
    (`{"a.b": …, "a": {"b": …}}`).
    """
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(tree)[0]]
    names = [
        ".".join(_key_name(k).replace("/", ".") for k in path) or WHOLE_THETA for path in paths
    ]
    seen: dict[str, tuple] = {}
    for path, n in zip(paths, names, strict=True):
        if n in seen:
            raise ConfigError(
                f"`{name}` has two parameters that would both be saved as {n!r}: "
                f"{name}{jax.tree_util.keystr(seen[n])} and {name}{jax.tree_util.keystr(path)} "
                "(paths are named with their steps joined by dots, `/` read as a dot). "
                "Rename one of the keys."
            )
        seen[n] = path
    return names


def flat_params(tree, *, name: str = "theta0") -> dict[str, np.ndarray]:
    """θ (any pytree: a dict of arrays, nested dicts, tuples, lists, a bare array, each leaf
    possibly with a leading time axis) as the flat `{name: array}` of `Trajectory.params`,
    named by `param_names`."""
    leaves = jax.tree_util.tree_leaves(tree)
    return {n: np.asarray(v) for n, v in zip(param_names(tree, name=name), leaves, strict=True)}


def stack_params(thetas: list) -> dict[str, np.ndarray]:
    """θ at several times (a list of pytrees of one structure) as `{name: (P, …) array}`."""
    if not thetas:
        return {}
    stacked = jax.tree_util.tree_map(lambda *v: np.stack([np.asarray(a) for a in v]), *thetas)
    return flat_params(stacked)


@dataclasses.dataclass(frozen=True)
class GlobalError:
    """An estimate of a flow's global error |computed − exact| at every save, from a
    companion solve of the same problem at tolerances `factor` times tighter: the
    difference of the two runs times `flows.claims.error_calibration(factor)` (2.78 at
    `factor` = 10: Richardson's factor/(factor − 1) times a measured safety factor of
    2.5), per observable (`observables`, arrays over the save times) and per stored
    parameter (`params`).

    `companion` is the tighter run itself (checks can be re-run on it: the difference of a
    derived number between the two runs is its error bar). `cost` is (plain + companion
    run wall time) / plain run wall time, compile excluded. When the companion solve
    fails, or its save times differ (a `stop` event), the estimate is missing: the arrays
    are empty and `missing` says why — never zero."""

    factor: float
    observables: dict[str, np.ndarray]
    params: dict[str, np.ndarray]
    companion: Trajectory | None
    cost: float
    missing: str = ""

    def max(self, name: str) -> float:
        """Largest estimate over the save times for observable `name`; NaN when missing."""
        arr = self.observables.get(name)
        return float(np.max(arr)) if arr is not None and np.size(arr) else float("nan")

    def max_param(self, name: str) -> float:
        """Largest estimate over the stored times and entries of parameter `name`; NaN
        when missing."""
        arr = self.params.get(name)
        return float(np.max(arr)) if arr is not None and np.size(arr) else float("nan")

    def summary(self) -> dict:
        """JSON form for `config["global_error"]`: factor, cost, the largest estimate per
        observable and parameter, and `missing`."""
        return {
            "factor": self.factor,
            "cost": self.cost,
            "missing": self.missing,
            "max": {k: float(np.max(v)) for k, v in self.observables.items() if np.size(v)},
            "max_param": {k: float(np.max(v)) for k, v in self.params.items() if np.size(v)},
        }


@dataclasses.dataclass
class Trajectory:
    """A run of gradient flow (or of a discrete baseline) on a `Problem`.

    **Attributes:**
    - `times` (T,): save times. `observables`: name → array with leading axis T
      (always `loss`, `energy` = ∫₀ᵗ‖∇L‖², `energy_residual` = |L(0) − L(t) − energy|).
    - `param_times` (P,), `params`: name → array with leading axis P (θ at chosen times;
      P = 0 when none were stored).
    - `stats`: solver statistics (`flows.SolveStats`: result, steps accepted/rejected,
      vector-field evaluations, compile and run wall time; also readable as a mapping,
      `stats["steps"]`). `config`: problem, solver settings and anything else
      needed to reproduce the run. `param_dims`: dimension names of each parameter.
    """

    times: np.ndarray
    observables: dict[str, np.ndarray]
    param_times: np.ndarray
    params: dict[str, np.ndarray]
    stats: SolveStats | Mapping
    config: dict
    param_dims: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    data: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    #: `simulate(…, global_error=True)`: the estimate of this run's global error
    #: (`GlobalError`); None when not asked for.
    global_error: GlobalError | None = dataclasses.field(default=None, repr=False)

    @property
    def loss(self) -> np.ndarray:
        """The objective L(θ(t)) at the save times `times` (observable `loss`)."""
        return self.observables["loss"]

    def __repr__(self) -> str:
        """One line: the span, the save counts, the loss from first to last save, the
        solver's result and work — not the arrays (`to_dataset()` shows those)."""
        stats = self.stats
        result = getattr(stats, "result", None) or (
            stats.get("result") if isinstance(stats, Mapping) else None
        )
        steps = getattr(stats, "steps", None)
        if steps is None and isinstance(stats, Mapping):
            steps = stats.get("steps")
        method = self.config.get("method", "")
        n = len(self.times)
        span = f"t ∈ [{self.times[0]:.6g}, {self.times[-1]:.6g}]" if n else "no saves"
        loss = (
            f"loss {self.loss[0]:.6g} → {self.loss[-1]:.6g}"
            if n and "loss" in self.observables
            else ""
        )
        parts = [
            p
            for p in (
                str(method),
                span,
                f"{n} saves",
                f"θ at {len(self.param_times)}",
                loss,
                f"{getattr(result, 'name', result)}" if result is not None else "",
                f"{steps} steps" if steps is not None else "",
            )
            if p
        ]
        return f"Trajectory({', '.join(parts)})"

    def at(self, name: str, t: float) -> float:
        """Observable `name` linearly interpolated at time `t` (within the saved range)."""
        if not self.times[0] <= t <= self.times[-1]:
            raise ValueError(
                f"t = {t} lies outside the saved range [{self.times[0]}, {self.times[-1]}]."
            )
        return float(np.interp(t, self.times, self.observables[name]))

    def param(self, name: str, which: int = -1) -> np.ndarray:
        """Parameter `name` (a key of `params`, e.g. 'w', 'layer1.W') at the `which`-th
        time θ was stored (`param_times`; default the last). Raises ValueError when no
        parameters were stored."""
        if self.params == {} or len(self.param_times) == 0:
            raise ValueError("no parameters were stored; rerun with save_params='ends' or 'all'.")
        return self.params[name][which]

    def _variables(self) -> tuple[dict[str, tuple[tuple[str, ...], np.ndarray, dict]], dict]:
        """What `to_dataset` and `save` hold: the data variables `{name: (dims, array,
        attributes)}` in order (the coordinate `time` is `times`), and the file's
        attributes."""
        variables: dict[str, tuple[tuple[str, ...], np.ndarray, dict]] = {}
        param_vars = set(self.params) if len(self.param_times) else set()
        for name, arr in self.observables.items():
            arr = np.asarray(arr)
            var = name if name not in param_vars or name in _CORE else f"obs.{name}"
            dims = ("time",) + tuple(f"{name}_{i}" for i in range(1, arr.ndim))
            variables[var] = (dims, arr, {"observable": name} if var != name else {})
        if len(self.param_times):
            idx = np.array([int(np.argmin(np.abs(self.times - t))) for t in self.param_times])
            if not np.allclose(self.times[idx], self.param_times, rtol=0, atol=1e-12):
                raise ValueError("parameter save times must be among the observable save times")
            saved = np.zeros(len(self.times), dtype=np.int8)
            saved[idx] = 1
            variables["param_saved"] = (("time",), saved, {})
            taken = set(variables) | {"time", "x", "y"}
            for name, arr in self.params.items():
                arr = np.asarray(arr)
                full = np.full((len(self.times),) + arr.shape[1:], np.nan)
                full[idx] = arr
                dims = self.param_dims.get(name) or tuple(
                    f"{name}_dim{i}" for i in range(1, arr.ndim)
                )
                var = name if name not in taken else f"{WHOLE_THETA}.{name}"
                if var in taken:
                    raise ConfigError(
                        f"the parameter {name!r} and an observable both need the variable "
                        f"name {var!r}; rename the observable."
                    )
                # an observable (or the data) holding its own name: say whose it is
                variables[var] = (
                    ("time",) + tuple(dims),
                    full,
                    {"parameter": name} if var != name else {},
                )
        if "x" in self.data:
            variables["x"] = (("sample", "dim"), np.asarray(self.data["x"]), {})
            y = np.asarray(self.data["y"])
            variables["y"] = (("sample",) + tuple(f"y_{i}" for i in range(1, y.ndim)), y, {})
        if "loss" in variables:
            description = str(self.config.get("problem", {}).get("loss", ""))
            variables["loss"][2]["description"] = description
        attrs = {
            "config": json.dumps(self.config, default=str),
            "stats": json.dumps(dict(self.stats), default=float),
            "versions": json.dumps(versions()),
            "machine": json.dumps(machine()),
        }
        for key in ("method", "solver", "rtol", "atol", "learning_rate"):
            if key in self.config:
                attrs[key] = str(self.config[key])
        return variables, attrs

    def to_dataset(self) -> xr.Dataset:
        """Labelled form: coordinate `time`; `loss(time)` and every observable; parameters on
        `time` too (NaN at times where θ was not stored; `param_saved(time)` says where),
        under their names in `params` (θ's pytree paths: `W`, `layer1.W`, `0`; see
        `param_names`: the names the papers' contracts give, e.g. `b(time, class)`). An
        observable named like a saved parameter is saved as `obs.<name>` (its `observable`
        attribute giving the name), a parameter named like the data (`x`, `y`) as
        `theta.<name>` (attribute `parameter`): nothing is overwritten."""
        import xarray as xr

        variables, attrs = self._variables()
        data = {k: (dims, arr) for k, (dims, arr, _) in variables.items()}
        ds = xr.Dataset(data, coords={"time": self.times})
        for var, (_, _, var_attrs) in variables.items():
            ds[var].attrs.update(var_attrs)
        ds.attrs.update(attrs)
        return ds

    def save(self, path: str | os.PathLike) -> Path:
        """Write netCDF (compressed) atomically: a crash never leaves a half-written file.

        The file is what `to_dataset().to_netcdf(engine="h5netcdf")` writes (every data
        variable zlib-compressed at level 4), written without importing xarray
        (`flows._io.write_netcdf_arrays`) when the run holds plain float and integer arrays
        — xarray and what it loads (pandas; Dask's arrays and scheduler when installed)
        cost a short command more than its solve. Anything else goes through xarray."""
        variables, attrs = self._variables()
        # xarray's order: the data variables, then the coordinate (written uncompressed)
        plain = {**variables, "time": (("time",), np.asarray(self.times), {})}
        if "time" not in variables and netcdf_arrays_writable(plain, attrs):
            return write_netcdf_arrays(path, plain, attrs, compress=frozenset(variables))
        ds = self.to_dataset()
        encoding = {v: {"zlib": True, "complevel": 4} for v in ds.data_vars}
        return write_netcdf(path, ds, encoding)


#: Why the observables every run records have no floor of their own.
_NOT_OF_THETA = {
    "energy": "a running integral along the run (∫‖∇L‖² dt), not a function of θ at the save",
    "energy_residual": "the energy identity's residual: an error measure, judged by the "
    "accuracy certificate",
}


def _observable_records(problem, observables_fn, theta_end, t_end, obs, rtol, atol) -> dict:
    """`stats.resolutions`: each observable's record at the last save, from the values as
    saved (`observable_resolutions`), and a record without a floor for `energy` and
    `energy_residual`."""
    from .significance import no_floor, observable_resolutions

    last = {k: np.asarray(v)[-1] for k, v in obs.items() if k != "loss" and len(v)}
    own = {k: v for k, v in last.items() if k not in _NOT_OF_THETA}
    out = observable_resolutions(problem, observables_fn, theta_end, t_end, rtol, atol, values=own)
    for k, why in _NOT_OF_THETA.items():
        if k in last:
            out[k] = no_floor(float(last[k]), why, quantity=k, t=t_end)
    return out


def assemble_trajectory(
    problem,
    *,
    times,
    observables: Mapping[str, np.ndarray],
    param_times,
    params: Mapping[str, np.ndarray],
    stats: SolveStats,
    config: dict,
    loss0: float | None = None,
    certify_rtol: float | None = None,
    certify_atol: float | None = None,
    theta_end=None,
    observables_fn=None,
) -> Trajectory:
    """The one place a run becomes a `Trajectory` (flows, batch members, the loss clock,
    gradient descent).

    Adds the observable `energy_residual` = |L(0) − L(t) − energy| (with `loss0` = L(θ(0))
    computed from `problem` unless given), the flow's accuracy certificate to `stats` when
    `certify_rtol` is given (`flows._solve.stats.certificate`, its round-off floor measured at
    θ(0) and at `theta_end`), and — given `theta_end`, the state at the last save, and
    `certify_atol` — the final loss's `resolution` (`flows._solve.significance`): whether it is
    larger than the error the solve's tolerances leave in it — and, given also
    `observables_fn` (the run's observables function), the same for every observable at
    the last save (`stats.resolutions`, `observable_resolutions`). Then the parameters'
    dimension names and the data.
    """
    obs = {k: np.asarray(v) for k, v in observables.items()}
    if loss0 is None:
        loss0 = float(problem.loss(problem.theta0))
    if "loss" in obs and "energy" in obs:
        obs["energy_residual"] = np.abs(loss0 - obs["loss"] - obs["energy"])
    if certify_rtol is not None and "energy_residual" in obs:
        from .significance import loss_floors, resolution

        atol = 0.0 if certify_atol is None else certify_atol
        roundoff = loss_floors(problem, problem.theta0, certify_rtol, atol)[1]
        if theta_end is not None:
            tol_end, roundoff_end = loss_floors(problem, theta_end, certify_rtol, atol)
            roundoff = float(np.nanmax([roundoff, roundoff_end]))
            if certify_atol is not None and len(obs["loss"]):
                t_end = float(np.asarray(times)[-1])
                value = float(obs["loss"][-1])
                res = resolution(value, tol_end, t=t_end, roundoff_floor=roundoff_end)
                stats = stats.replace(resolution=res)
                if observables_fn is not None:
                    records = _observable_records(
                        problem, observables_fn, theta_end, t_end, obs, certify_rtol, atol
                    )
                    stats = stats.replace(resolutions=records)
        stats = stats.replace(certificate=certificate(obs, certify_rtol, roundoff))
    return Trajectory(
        times=np.asarray(times),
        observables=obs,
        param_times=np.asarray(param_times),
        params={k: np.asarray(v) for k, v in params.items()},
        stats=stats,
        config=config,
        param_dims=problem.model.param_dims(),
        data={"x": np.asarray(problem.x), "y": np.asarray(problem.y)},
    )
