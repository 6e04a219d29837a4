"""A run's global-error estimate from a companion solve of the same problem at tighter
tolerances (`simulate(…, global_error=True)`, `simulate_nonsmooth(…, global_error=True)`):
the two runs' difference at every save, per observable and stored parameter."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

import numpy as np

from .._errors import ConfigError, SolverError
from .significance import resolution
from .stats import SolveStats
from .trajectory import GlobalError, Trajectory

#: `simulate(…, global_error=True)` solves again at tolerances this many times tighter.
GLOBAL_ERROR_FACTOR = 10.0

#: What `global_error=None` means in `simulate` and `simulate_nonsmooth`: off, unless a
#: caller (the command line's `--global-error`) turned it on for the code it runs —
#: including a plug-in paper's own `simulate`, which cannot know the flag.
_BY_DEFAULT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "flows_global_error", default=False
)


@contextlib.contextmanager
def global_error_by_default(on: bool = True):
    """Within the block, `simulate(…)` and `simulate_nonsmooth(…)` called without
    `global_error` estimate it (a companion solve), as if given `global_error=True`."""
    token = _BY_DEFAULT.set(bool(on))
    try:
        yield
    finally:
        _BY_DEFAULT.reset(token)


def global_error_asked(value: bool | None) -> bool:
    """`global_error` as given, or the default in force (`global_error_by_default`)."""
    return _BY_DEFAULT.get() if value is None else bool(value)


def _stopped(traj: Trajectory) -> bool:
    at = getattr(traj.stats, "stopped_at", None)
    return at is not None and np.isfinite(at)


def with_global_error(plain: Trajectory, companion, factor: float) -> Trajectory:
    """`plain` with its `global_error` from `companion()` (a run of the same problem at
    tolerances `factor` times tighter); a failed companion leaves the estimate missing."""

    def missing(why: str) -> Trajectory:
        ge = GlobalError(factor, {}, {}, None, float("nan"), why)
        plain.config["global_error"] = ge.summary()
        return dataclasses.replace(plain, global_error=ge)

    if not plain.stats["result"] == "successful":
        return missing(f"the run itself did not succeed ({plain.stats['result']})")
    try:
        tight = companion()
    except (SolverError, ConfigError) as e:
        return missing(f"the companion solve at tolerances /{factor:g} failed: {e}")
    same = plain.times.shape == tight.times.shape and np.array_equal(
        plain.times[:-1], tight.times[:-1]
    )
    stopped = _stopped(plain) and _stopped(tight)
    if not (same and (stopped or plain.times[-1] == tight.times[-1])):
        return missing(
            "the companion's save times differ from the run's (a stop event "
            "triggered before a different save time)"
        )
    # both stopped by their event between the same saves: the last entries compare the
    # values at the two stop times, so the estimate there includes the error of the stop
    # time itself
    obs = {
        k: np.abs(np.asarray(v, float) - np.asarray(tight.observables[k], float))
        for k, v in plain.observables.items()
        if k in tight.observables and np.issubdtype(np.asarray(v).dtype, np.number)
    }
    par = {
        k: np.abs(np.asarray(v, float) - np.asarray(tight.params[k], float))
        for k, v in plain.params.items()
        if k in tight.params and np.shape(v) == np.shape(tight.params[k])
    }
    w0 = float(plain.stats["wall_s"])
    cost = (w0 + float(tight.stats["wall_s"])) / w0 if w0 > 0 else float("nan")
    ge = GlobalError(factor, obs, par, tight, cost)
    plain.config["global_error"] = ge.summary()
    stats = plain.stats
    res = getattr(stats, "resolution", None)
    if isinstance(stats, SolveStats) and res is not None and np.size(obs.get("loss", [])):
        # the final loss cannot be known better than its estimated global error either
        floor = max(float(res["floor"]), float(obs["loss"][-1]))
        stats = stats.replace(
            resolution=resolution(
                res["value"],
                floor,
                quantity=res["quantity"],
                t=res["t"],
                roundoff_floor=res.get("roundoff_floor"),
            )
        )
    return dataclasses.replace(plain, global_error=ge, stats=stats)
