"""A run's global-error estimate from a companion solve of the same problem at tighter
tolerances (`simulate(…, global_error=True)`, `simulate_nonsmooth(…, global_error=True)`):
the two runs' difference at every save, per observable and stored parameter."""

from __future__ import annotations

import dataclasses

import numpy as np

from ._errors import ConfigError, SolverError
from ._trajectory import GlobalError, Trajectory

#: `simulate(…, global_error=True)` solves again at tolerances this many times tighter.
GLOBAL_ERROR_FACTOR = 10.0


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
    same = plain.times.shape == tight.times.shape and np.allclose(
        plain.times, tight.times, rtol=0, atol=0
    )
    if not same:
        return missing(
            "the companion's save times differ from the run's (a stop event "
            "triggered at a different time)"
        )
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
    return dataclasses.replace(plain, global_error=ge)
