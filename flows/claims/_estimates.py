"""Estimators that return a `Measured` (a value with its numerical error bar): a power
law's exponent with a confidence interval, the η → 0 value of a step-size-dependent
quantity (Richardson), the t → ∞ limit of an observable (Aitken). Public through
`flows.claims`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .._errors import ConfigError
from ._parts import Measured


def power_law_fit(x: Sequence[float], y: np.ndarray, level: float = 0.95) -> dict:
    """Least-squares fit of log y = p·log x + c over every (x, seed) point.

    `y` has shape (len(x), seeds). Returns the exponent `p`, its `level` confidence
    interval `ci` (Student t on the slope's standard error), and `n` points used."""
    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if ys.ndim == 1:
        ys = ys[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        logy = np.where(ys > 0, np.log(np.where(ys > 0, ys, 1.0)), np.nan)
    return linear_fit(np.log(xs), logy, level)


def linear_fit(x: Sequence[float] | np.ndarray, y: np.ndarray, level: float = 0.95) -> dict:
    """Least-squares fit of y = p·x + c over every (x, seed) point (`y` of shape
    (len(x), seeds); non-finite values left out). Returns the slope `p`, its `level`
    confidence interval `ci` (Student t on the slope's standard error; NaN with fewer than
    3 points or one x), and `n` points used."""
    from scipy import stats

    ys = np.asarray(y, dtype=float)
    if ys.ndim == 1:
        ys = ys[:, None]
    xx = np.repeat(np.asarray(x, dtype=float), ys.shape[1])
    yy = ys.reshape(-1)
    ok = np.isfinite(yy)
    xx, yy = xx[ok], yy[ok]
    n = len(xx)
    if n < 3 or np.ptp(xx) == 0:
        return {"p": math.nan, "ci": (math.nan, math.nan), "n": n}
    dx = xx - xx.mean()
    sxx = float(dx @ dx)
    p = float(dx @ (yy - yy.mean())) / sxx
    resid = yy - yy.mean() - p * dx
    stderr = math.sqrt(float(resid @ resid) / (n - 2) / sxx)
    half = float(stats.t.ppf(0.5 + level / 2, n - 2)) * stderr
    return {"p": p, "ci": (p - half, p + half), "n": n}


#: How far the observed order of an η-refinement may stray from the method's order before
#: `richardson` calls the measurements pre-asymptotic (and widens the error bar to their
#: whole spread).
ORDER_SLACK = 0.3


def richardson(values: Sequence[float], etas: Sequence[float], order: int = 1) -> Measured:
    """The η → 0 value of a quantity measured with a step size η, and its error bar.

    `values[i]` is the quantity at `etas[i]`; at least 3 step sizes, each the previous one
    divided by the same ratio r > 1 (e.g. η, η/2, η/4). A method of `order` p (gradient
    descent: 1, as an approximation of the flow) has q(η) = q(0) + c·η^p + O(η^(p+1)), so
    each neighbouring pair gives the extrapolant R = (r^p·q(η/r) − q(η))/(r^p − 1).

    **Returns:** `Measured` with the last extrapolant as the value and, as the error, the
    change between the last two extrapolants (their own error is O(η^(p+1)); the change
    over-estimates it by about r^(p+1) − 1). The observed order log(|Δq₁|/|Δq₂|)/log r is
    compared with p: off by more than `ORDER_SLACK` (or undefined, as when the measurements
    stop changing) the measurements are pre-asymptotic, and the error bar is widened to
    the spread of every measurement and extrapolant. `how` says which, with the observed
    order.
    """
    q = np.asarray(values, dtype=float)
    h = np.asarray(etas, dtype=float)
    if q.ndim != 1 or q.shape != h.shape or len(q) < 3:
        raise ConfigError(
            f"richardson: `values` and `etas` must be two sequences of the same length ≥ 3 "
            f"(got {q.shape} and {h.shape}); measure at η, η/2, η/4 at least"
        )
    if not (np.all(np.isfinite(h)) and np.all(h > 0)):
        raise ConfigError(f"richardson: `etas` must be positive and finite; got {list(h)}")
    ratios = h[:-1] / h[1:]
    r = float(ratios[0])
    if not (r > 1 and np.allclose(ratios, r, rtol=1e-9)):
        raise ConfigError(
            f"richardson: `etas` must decrease by one ratio r > 1 (e.g. η, η/2, η/4); got {list(h)}"
        )
    etas_text = ", ".join(f"{e:.3g}" for e in h)
    if not np.all(np.isfinite(q)):
        return Measured(
            math.nan, math.nan, f"Richardson over η = {etas_text}: a value is not finite"
        )
    rp = r**order
    ext = (rp * q[1:] - q[:-1]) / (rp - 1)
    d1, d2 = abs(q[-3] - q[-2]), abs(q[-2] - q[-1])
    observed = math.log(d1 / d2) / math.log(r) if d1 > 0 and d2 > 0 else math.nan
    same_sign = (q[-3] - q[-2]) * (q[-2] - q[-1]) > 0
    value = float(ext[-1])
    base = f"Richardson (order {order}) over η = {etas_text}"
    if same_sign and math.isfinite(observed) and abs(observed - order) <= ORDER_SLACK:
        err = abs(float(ext[-1] - ext[-2]))
        return Measured(value, err, f"{base}: observed order {observed:.2f}")
    spread = np.concatenate([q, ext])
    err = float(spread.max() - spread.min())
    obs = f"observed order {observed:.2f}" if math.isfinite(observed) else "no observed order"
    return Measured(
        value, err, f"{base}: pre-asymptotic ({obs}, expected {order}); error = the spread"
    )


def limit_in_time(
    times: Sequence[float], values: Sequence[float], numerical_error: float = 0.0
) -> Measured:
    """The t → ∞ limit of an observable q(t), with an error bar, from its last log-spaced
    saves (`flows.log_save_times`; e.g. a run ended by `flows.stop_when_converged`).

    For a tail q(t) = q(∞) + c·t^(−p) the differences of three saves t, r·t, r²·t shrink by
    ρ = r^(−p), and q(∞) = q(r²t) + Δ₂·ρ/(1 − ρ) (Aitken's Δ²; exact for a power-law tail).
    The error bar is the change of that estimate from the previous three saves, plus
    `numerical_error` (the solver's error on q at the end, e.g. `traj.global_error.max(…)`:
    an observable such as w = u⊙u − v⊙v can carry far more than the parameters'). Where
    the differences do not shrink (ρ ≥ 1) or change sign, q is not converging on these
    saves: the last value is returned with an infinite error bar, and `how` says so.
    """
    t = np.asarray(times, dtype=float)
    q = np.asarray(values, dtype=float)
    if t.ndim != 1 or t.shape != q.shape or len(t) < 4:
        raise ConfigError(
            "limit_in_time: `times` and `values` must be two sequences of the same length ≥ 4 "
            f"(got {t.shape} and {q.shape})"
        )
    tail_t = t[-4:]
    ratios = tail_t[1:] / tail_t[:-1] if np.all(tail_t > 0) else np.array([math.nan])
    if not (np.all(np.isfinite(ratios)) and ratios[0] > 1 and np.allclose(ratios, ratios[0], 1e-6)):
        raise ConfigError(
            "limit_in_time: the last 4 save times must be log-spaced (a constant ratio > 1, "
            f"got {list(tail_t)}); save with flows.log_save_times"
        )
    if not np.all(np.isfinite(q[-4:])):
        return Measured(math.nan, math.nan, "limit in time: a value is not finite")
    r = float(ratios[0])
    floor = 10 * np.finfo(float).eps * float(np.max(np.abs(q[-4:])))

    def aitken(a, b, c):
        d1, d2 = b - a, c - b
        if d1 == 0 and d2 == 0:
            return c, 0.0
        if d1 == 0 or d1 * d2 < 0 or abs(d2) >= abs(d1):
            return None, math.nan
        rho = d2 / d1
        return c + d2 * rho / (1 - rho), rho

    value, rho = aitken(*q[-3:])
    last = float(q[-1])
    if value is None:
        return Measured(
            last,
            math.inf,
            f"limit in time: not converging on the last saves (t ≤ {t[-1]:.3g}: the "
            "differences do not shrink); run longer",
        )
    prev, _ = aitken(*q[-4:-1])
    err = abs(value - prev) if prev is not None else abs(value - last)
    err = max(err, floor) + abs(numerical_error)
    order = f"tail ∝ t^−{-math.log(rho) / math.log(r):.2f}" if rho > 0 else "constant"
    return Measured(
        float(value),
        float(err),
        f"limit in time (Aitken over saves at t = {t[-3]:.3g}, {t[-2]:.3g}, {t[-1]:.3g}; {order})",
    )
