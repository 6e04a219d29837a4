"""A run's global-error estimate from a companion solve of the same problem at tighter
tolerances (`simulate(…, global_error=True)`, `simulate_nonsmooth(…, global_error=True)`):
the two runs' difference at every save, per observable and stored parameter, calibrated
(`error_calibration`) so that it covers the true error."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses

import numpy as np

from .._errors import ConfigError, SolverError
from .significance import raise_floors, resolution
from .stats import SolveStats
from .trajectory import GlobalError, Trajectory

#: `simulate(…, global_error=True)` solves again at tolerances this many times tighter.
GLOBAL_ERROR_FACTOR = 10.0

#: The safety factor on the Richardson-corrected companion difference (`error_calibration`).
#: Measured (`benchmarks/results/global_error_coverage.md`: the four papers' models, Tsit5
#: and ROCK4, rtol 1e-6 and 1e-8, and a difference of two large nearly equal terms): the
#: raw difference |run − companion| is 0.87–0.94× the true error in the median over the
#: saves, as tolerance proportionality of order 1 predicts (1 − 1/10 = 0.9), but its 5th
#: percentile falls to 0.36–0.92×: the Richardson correction alone (×10/9) covers about
#: half of the saves. ×2.5 on top covers ≥ 96 % of the saves of every run, with a median
#: over-estimate ≤ 2.65×.
GLOBAL_ERROR_SAFETY = 2.5


def error_calibration(factor: float = GLOBAL_ERROR_FACTOR) -> float:
    """What the difference between a run and its companion at tolerances `factor` times
    tighter is multiplied by to estimate the run's global error: Richardson for a global
    error proportional to the tolerance (e ≈ diff / (1 − 1/factor): the companion's own
    error is 1/factor of the run's), times the measured safety factor
    `GLOBAL_ERROR_SAFETY` for the spread of that proportionality over the saves. 2.78 at
    the default factor 10."""
    f = float(factor)
    if not f > 1:
        raise ConfigError(f"the companion's tolerance factor must be > 1; got {factor!r}")
    return GLOBAL_ERROR_SAFETY / (1.0 - 1.0 / f)


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
    tolerances `factor` times tighter): the two runs' difference times
    `error_calibration(factor)` at every save; a failed companion leaves the estimate
    missing."""

    def missing(why: str) -> Trajectory:
        ge = GlobalError(factor, {}, {}, None, float("nan"), why)
        plain.config["global_error"] = ge.summary() | {"calibration": error_calibration(factor)}
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
    cal = error_calibration(factor)
    obs = {
        k: cal * np.abs(np.asarray(v, float) - np.asarray(tight.observables[k], float))
        for k, v in plain.observables.items()
        if k in tight.observables and np.issubdtype(np.asarray(v).dtype, np.number)
    }
    par = {
        k: cal * np.abs(np.asarray(v, float) - np.asarray(tight.params[k], float))
        for k, v in plain.params.items()
        if k in tight.params and np.shape(v) == np.shape(tight.params[k])
    }
    w0 = float(plain.stats["wall_s"])
    cost = (w0 + float(tight.stats["wall_s"])) / w0 if w0 > 0 else float("nan")
    ge = GlobalError(factor, obs, par, tight, cost)
    plain.config["global_error"] = ge.summary() | {"calibration": cal}
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
    if isinstance(stats, SolveStats) and stats.resolutions is not None:
        # nor an observable better than its own estimate
        stats = stats.replace(resolutions=raise_floors(stats.resolutions, obs))
    return dataclasses.replace(plain, global_error=ge, stats=stats)
