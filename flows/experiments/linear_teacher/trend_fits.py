"""Finite-size and in-time trends of the linear-teacher checks: the slack on a fitted
exponent read against a bound's exponent (a named constant of the claim kit), log-log
slopes, and a run's observable sampled over its decades of time for the report's chart."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Check, Trajectory
from flows.claims import Bound, Constant, Measured, Trend, power_law_fit

#: The slack on a fitted exponent read against a bound's exponent ("updates ≲ C/ε²" read
#: as "fitted exponent in 1/ε ≤ 2 + slack", default `Config.sgd_exponent_tol`): a named
#: constant of the claim kit, its critical value reported beside the verdict. The n⁴ row
#: has no slack (as before the kit).
SLACK = Constant(
    "slack",
    0.25,
    (0.0, 2.0),
    "added to the bound's exponent: a fitted log-log slope over finite sizes",
    "s",
)


def _slope_range(x, lo, hi) -> tuple[float, float]:
    """The least-squares log-log slope's a-priori range when each y_i can be anything in
    [lo_i, hi_i]: the slope is linear in log y, so its extremes are at the box's vertices."""
    lx = np.log(np.asarray(x, float))
    dx = lx - lx.mean()
    w = dx / float(dx @ dx)
    ends = [(math.log(a), math.log(b)) for a, b in zip(lo, hi, strict=True)]
    low = sum(w_i * (b if w_i < 0 else a) for w_i, (a, b) in zip(w, ends, strict=True))
    high = sum(w_i * (a if w_i < 0 else b) for w_i, (a, b) in zip(w, ends, strict=True))
    return float(low), float(high)


def _exponent_bound(
    claim: str,
    src: str,
    x,
    updates,
    exponent: float,
    budgets,
    *,
    slack: float | None = None,
    x_name: str,
    assumptions: str = "",
    values: dict | None = None,
    name: str = "exponent",
) -> Check:
    """'updates ≲ C·x^exponent' read as 'the fitted log-log slope ≤ exponent' (+ `slack`,
    the named constant `SLACK`, where given), a `Bound` whose a-priori range is the
    slope's range when every run may take anything from 1 update to its budget (so the
    check could have failed); the slope's 95 % interval is its error bar: a row whose
    interval crosses the bound is `undecided (finite size)`."""
    slope = _loglog_slope(x, updates)
    fit = power_law_fit(x, np.asarray(updates, float))
    lo, hi = _slope_range(x, [1] * len(x), budgets)
    ci = fit["ci"]
    ci_text = f"95 % interval [{ci[0]:.3g}, {ci[1]:.3g}]" if math.isfinite(ci[0]) else ""
    if slack is None:
        constants, bound, predicted = (), exponent, f"fitted exponent in {x_name} ≤ {exponent:g}"
    else:
        constants = (dataclasses.replace(SLACK, default=float(slack)),)
        bound = lambda slack: exponent + slack  # noqa: E731
        predicted = f"fitted exponent in {x_name} ≤ {exponent:g} + s (s = {slack:g})"
    # the slope with its 95 % interval as a statistical error bar: an interval that
    # crosses the bound leaves the row undecided (finite size), whatever the point estimate
    half = max(abs(ci[1] - slope), abs(slope - ci[0])) if math.isfinite(ci[0]) else math.nan
    return Bound(
        claim,
        src,
        Measured(slope, half, "95 % confidence interval of the fitted slope", statistical=True),
        bound,
        constants=constants,
        a_priori=(lo, hi),
        predicted=predicted,
        measured_text=f"fitted exponent {slope:.3g}"
        + (f" ({ci_text})" if ci_text else "")
        + f" over {x_name} = "
        + ", ".join(f"{a:.4g}: {u}" for a, u in zip(x, updates, strict=True)),
        assumptions=assumptions,
        reason=f"a-priori range of the slope, 1 update to the budget per run: [{lo:.3g}, {hi:.3g}]",
        values={name: slope, "exponent_ci": list(ci)} | (values or {}),
    ).judge()


def _loglog_slope(x, y) -> float:
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.shape != y.shape:
        return math.nan
    ok = (x > 0) & (y > 0) & np.isfinite(x) & np.isfinite(y)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _decades(times, values, n: int = 6):
    """(t, value) at about `n` log-spaced saves with t > 0 (for a `Trend`)."""
    t = np.asarray(times, float)
    v = np.asarray(values, float)
    idx = np.flatnonzero(t > 0)
    if len(idx) == 0:
        return (), ()
    pick = np.unique(np.round(np.linspace(idx[0], idx[-1], min(n, len(idx)))).astype(int))
    return tuple(float(x) for x in t[pick]), tuple(float(x) for x in v[pick])


def time_trend(traj: Trajectory, name: str, label: str, note: str = "", *, fn=None) -> Trend | None:
    """A `Trend` of observable `name` (or `fn(observables)`) against t at ~6 saves (None
    for a run without save times)."""
    if getattr(traj, "times", None) is None:
        return None
    o = traj.observables
    vals = fn(o) if fn is not None else o[name]
    x, y = _decades(traj.times, vals)
    return Trend("t", label, x, y, note=note, x_log=True)


def _with_trend(trend: Trend | None, *args, **kwargs) -> Check:
    return dataclasses.replace(Check.compare(*args, **kwargs), trend=trend)
