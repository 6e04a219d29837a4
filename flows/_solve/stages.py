"""Stage detection: crossing times of observables, and stages from the loss curve alone."""

from __future__ import annotations

import numpy as np

__all__ = ["first_crossing", "detect_stages_from_loss", "average_decay_rate"]


def first_crossing(times, values, threshold: float, *, after: float = -np.inf, below: bool = True):
    """First time t ≥ `after` at which `values` crosses `threshold` (≤ when `below`, else ≥).

    Linear interpolation between save times; NaN when it never happens on the saved range.
    """
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    sign = 1.0 if below else -1.0
    hit = sign * (v - threshold) <= 0
    idx = np.flatnonzero(hit & (t >= after))
    if idx.size == 0:
        return float("nan")
    i = int(idx[0])
    if i == 0 or t[i - 1] < after:
        return float(max(t[i], after)) if t[i] >= after else float("nan")
    v0, v1 = v[i - 1], v[i]
    if v1 == v0:
        return float(t[i])
    frac = (threshold - v0) / (v1 - v0)
    return float(t[i - 1] + np.clip(frac, 0.0, 1.0) * (t[i] - t[i - 1]))


def average_decay_rate(times, loss, t_start: float, t_end: float) -> float:
    """|L(t_end) − L(t_start)| / (t_end − t_start), the papers' average decay rate."""
    if not t_end > t_start:
        return float("nan")
    l0 = np.interp(t_start, times, loss)
    l1 = np.interp(t_end, times, loss)
    return float(abs(l1 - l0) / (t_end - t_start))


def detect_stages_from_loss(times, loss, *, rel_threshold: float = 0.1, smooth: int = 5) -> dict:
    """Plateaus and descents from the loss curve alone, for data outside the theorems.

    The decay rate r(t) = −dL/dt is estimated by finite differences (moving average over
    `smooth` save intervals). A plateau is where r < rel_threshold · max r. Returns
    `plateau_end` (first t with r ≥ threshold; the end of the initial plateau),
    `descent_end` (first t after the steepest point with r < threshold), and
    `next_descent` (first later t with r ≥ threshold again: the end of the secondary
    plateau), each NaN when not reached (all NaN for a curve that does not decay beyond
    rounding), plus `peak_rate` and `threshold`.
    """
    t = np.asarray(times, dtype=float)
    L = np.asarray(loss, dtype=float)
    if t.ndim != 1 or t.shape != L.shape or t.size < 3:
        raise ValueError("`times` and `loss` must be 1-D arrays of equal length ≥ 3.")
    rate = -np.gradient(L, t)
    if smooth > 1:
        kernel = np.ones(smooth) / smooth
        rate = np.convolve(np.pad(rate, smooth // 2, mode="edge"), kernel, mode="valid")[: t.size]
    peak = float(np.max(rate))
    thr = rel_threshold * peak
    out: dict[str, float | np.ndarray] = {
        "plateau_end": np.nan,
        "descent_end": np.nan,
        "next_descent": np.nan,
    }
    out.update(peak_rate=peak, threshold=thr, rate=rate)
    # a curve that never decays by more than rounding has no stages
    if not peak * (t[-1] - t[0]) > 1e-9 * max(float(np.max(np.abs(L))), 1e-300):
        return out
    above = rate >= thr
    i_peak = int(np.argmax(rate))
    start = np.flatnonzero(above[: i_peak + 1])
    out["plateau_end"] = float(t[start[0]])
    after = np.flatnonzero(~above[i_peak:])
    if after.size:
        i_end = i_peak + int(after[0])
        out["descent_end"] = float(t[i_end])
        again = np.flatnonzero(above[i_end:])
        if again.size:
            out["next_descent"] = float(t[i_end + int(again[0])])
    return out
