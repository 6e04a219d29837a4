"""Theorem 1's error claim in the paper's words: "for all α ∈ [α₁, α₂], the error remains
at 1 − 1/k" (α₁ = δ/Δ_min, α₂ = (Δ_min/2V_max^r)^{1/(r−1)}), searched over α.

γ_error(α) is a step function: it can change only where some sample's prediction does,
i.e. where that sample's gap between its top logit and the runner-up touches 0. Sampling
α on a grid misses a change narrower than the grid spacing; `search_error` looks for
every such α (`ErrorSearch`), and `check_error_words` judges the claim at every α the
search evaluated: on both sides of every change it located, at every nearest approach
of a sample's gap to 0, and on the grid.

The claim is the error's value, not which class is predicted: predictions may move
between classes and keep the count of misclassified samples (the toolkit's stronger
reading "every sample predicted as k*" is `checks.check_error_interval`).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from flows import Check, ConfigError
from reduced import interpolation as rint

from .config import SOURCE
from .interpolation import logits_at, sample_logits_at

if TYPE_CHECKING:
    from .runs import DeepRun

__all__ = ["ErrorSearch", "search_error", "words_claim", "check_error_words"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
#: Rounds of "bisect every neighbouring pair of evaluated α whose predictions differ";
#: each round resolves the pairs it starts with, so more are needed only where a sample
#: changes several times between two grid points.
_MAX_ROUNDS = 30


def words_claim(label: str) -> str:
    """The row's claim for the run labelled `label`."""
    return (
        f"{label}: error remains at 1 − 1/k for every α ∈ [δ/Δ_min, "
        "(Δ_min/2V_max^r)^(1/(r−1))] (the paper's words)"
    )


@dataclasses.dataclass(frozen=True)
class ErrorSearch:
    """What `search_error` found on [lo, hi].

    **Attributes:** `alphas` (E,): every α evaluated, sorted; `wrong` (E,): the number of
    misclassified samples at each; `top` (E,): the number predicted as class `k_top` (the
    class given to `search_error`, −1 if none); `min_gap` (E,): the smallest over samples
    of (top logit − runner-up) at each; `changes` (C, 2): for each located change of the
    predictions, the neighbouring evaluated α on either side (`changes[:, 1] −
    changes[:, 0]` ≤ `resolution`); `n` samples; `grid` points, `grid_spacing`;
    `resolution` asked for and `reached` (the widest final bracket: located changes and
    narrowed minima); `dips`: minima of a sample's gap where its prediction changes
    although the grid shows no change there; `evaluations`: logit evaluations (one α,
    one sample each for the narrowing, one α for all samples otherwise).
    """

    alphas: np.ndarray
    wrong: np.ndarray
    top: np.ndarray
    min_gap: np.ndarray
    changes: np.ndarray
    n: int
    grid: int
    grid_spacing: float
    resolution: float
    reached: float
    dips: int
    evaluations: int

    @property
    def error(self) -> np.ndarray:
        """γ_error at each evaluated α (the fraction misclassified)."""
        return self.wrong / self.n


def _signed(z: np.ndarray, c: np.ndarray) -> np.ndarray:
    """z[m, c_m] − max_{j ≠ c_m} z[m, j] for each row m of z (M, k): > 0 while class c_m
    is the prediction, ≤ 0 once another class is (continuous in the logits)."""
    m = np.arange(z.shape[0])
    other = z.copy()
    other[m, c] = -np.inf
    return z[m, c] - other.max(axis=1)


def _golden(f: Callable, a: np.ndarray, b: np.ndarray, tol: float, budget: int):
    """Vectorised golden-section search: per bracket [a_m, b_m], the smallest value of
    f(α)_m found (exact for a unimodal f_m, to `tol` in α); (α, f, widths, evaluations)."""
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    best_x, best_f = np.where(fc <= fd, c, d), np.minimum(fc, fd)
    n = 2
    while n < budget and np.max(b - a) > tol:
        left = fc <= fd  # the minimum lies in [a, d]: drop (d, b]
        a, b = np.where(left, a, c), np.where(left, d, b)
        c_new = np.where(left, b - _GOLDEN * (b - a), d)
        d_new = np.where(left, c, a + _GOLDEN * (b - a))
        x = np.where(left, c_new, d_new)
        fx = f(x)
        fc, fd = np.where(left, fx, fd), np.where(left, fc, fx)
        c, d = c_new, d_new
        better = fx < best_f
        best_x, best_f = np.where(better, x, best_x), np.where(better, fx, best_f)
        n += 1
    return best_x, best_f, b - a, n * len(a)


def _bisect(f: Callable, pos: np.ndarray, neg: np.ndarray, tol: float):
    """Vectorised bisection of f_m between `pos` (f > 0) and `neg` (f ≤ 0), until every
    pair is ≤ `tol` apart (or float64 cannot split it); (pos, neg, evaluations).
    `f(alphas, which)` evaluates the brackets selected by the mask `which`."""
    evals = 0
    while True:
        open_ = np.abs(neg - pos) > tol
        mid = 0.5 * (pos + neg)
        open_ &= (mid != pos) & (mid != neg)
        if not open_.any():
            return pos, neg, evals
        fm = f(mid[open_], open_)
        evals += int(open_.sum())
        up = np.zeros_like(open_)
        up[open_] = fm > 0
        down = open_ & ~up
        pos, neg = np.where(up, mid, pos), np.where(down, mid, neg)


def search_error(
    model,
    x,
    y,
    theta_0,
    theta_T,
    over: tuple[float, float],
    *,
    grid: int = 50,
    resolution: float | None = None,
    budget: int = 80,
    k_top: int = -1,
) -> ErrorSearch:
    """Every α on `over` = [lo, hi] where the predictions of θ^[α] change, located to
    `resolution`, with the error on both sides.

    1. A grid of `grid` evenly spaced α: the logits of every sample.
    2. For each sample, every local minimum of its gap g_i(α) = top logit − runner-up on
       the grid (endpoints included) is narrowed by golden-section on the sample's signed
       margin z_c − max_{j≠c} z_j (c its class at the minimum) over the two neighbouring
       grid intervals, to `resolution` (at most `budget` evaluations): a margin ≤ 0 there
       is a change the grid missed (a dip narrower than the spacing).
    3. Every pair of neighbouring evaluated α at which some sample's prediction differs is
       bisected on that sample's signed margin until the pair is ≤ `resolution` apart;
       repeated over the new points until no such pair is wider.

    A change leaves a trace on the grid as a change of prediction or a local minimum of
    the sample's gap; one that leaves neither (two changes of one sample closer together
    than the spacing, with no minimum of its gap near them) is not found: the row states
    the spacing. Default resolution: (hi − lo)·1e-6.

    **Returns:** an `ErrorSearch`.
    """
    lo, hi = (float(v) for v in over)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ConfigError(f"`over` must be a finite interval lo < hi; got {over}.")
    if int(grid) < 3:
        raise ConfigError(f"`grid` must be ≥ 3 points; got {grid}.")
    res = (hi - lo) * 1e-6 if resolution is None else float(resolution)
    floor = 4 * float(np.spacing(max(abs(lo), abs(hi))))
    if not (math.isfinite(res) and res >= floor):
        raise ConfigError(
            f"`resolution` must be ≥ {floor:.2g} (what float64 resolves near {hi:g}); got {res}."
        )
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y)
    evals = 0

    def full(alphas):
        nonlocal evals
        evals += len(alphas)
        z = logits_at(model, x, theta_0, theta_T, alphas)
        srt = np.sort(z, axis=-1)
        return z.argmax(axis=-1), srt[..., -1] - srt[..., -2]

    def margin_of(samples, classes):
        def f(alphas, which=slice(None)):
            nonlocal evals
            evals += len(alphas)
            z = sample_logits_at(model, x[samples[which]], theta_0, theta_T, alphas)
            return _signed(z, classes[which])

        return f

    xs = np.linspace(lo, hi, int(grid))
    pred, gap = full(xs)
    # 2. local minima of each sample's gap on the grid, narrowed by golden-section
    left = np.vstack([np.full((1, gap.shape[1]), np.inf), gap[:-1]])
    right = np.vstack([gap[1:], np.full((1, gap.shape[1]), np.inf)])
    jj, ii = np.nonzero((gap <= left) & (gap <= right))
    cls = pred[jj, ii]
    a, b = xs[np.maximum(jj - 1, 0)], xs[np.minimum(jj + 1, len(xs) - 1)]
    x_min, s_min, widths, _ = _golden(margin_of(ii, cls), a, b, res, int(budget))
    nb_lo, nb_hi = np.maximum(jj - 1, 0), np.minimum(jj + 1, len(xs) - 1)
    same = (pred[nb_lo, ii] == cls) & (pred[nb_hi, ii] == cls)
    dips = int(np.sum((s_min <= 0) & same))
    reached = float(np.max(widths)) if widths.size else 0.0
    # 3. bisect every neighbouring pair whose predictions differ, until resolved
    pts, p_pts, g_pts = xs, pred, gap
    new = np.setdiff1d(x_min, pts)
    for _ in range(_MAX_ROUNDS):
        if new.size:
            p_new, g_new = full(new)
            pts = np.concatenate([pts, new])
            p_pts, g_pts = np.concatenate([p_pts, p_new]), np.concatenate([g_pts, g_new])
            order = np.argsort(pts, kind="stable")
            pts, p_pts, g_pts = pts[order], p_pts[order], g_pts[order]
        wide = np.diff(pts) > res
        jj, ii = np.nonzero((p_pts[:-1] != p_pts[1:]) & wide[:, None])
        if jj.size == 0:
            break
        pos, neg, _ = _bisect(margin_of(ii, p_pts[jj, ii]), pts[jj], pts[jj + 1], res)
        new = np.setdiff1d(np.concatenate([pos, neg]), pts)
    else:
        raise RuntimeError(f"the error search did not resolve every change in {_MAX_ROUNDS} rounds")
    differ = np.any(p_pts[:-1] != p_pts[1:], axis=1)
    changes = np.stack([pts[:-1][differ], pts[1:][differ]], axis=1)
    if changes.size:
        reached = max(reached, float(np.max(changes[:, 1] - changes[:, 0])))
    return ErrorSearch(
        alphas=pts,
        wrong=np.sum(p_pts != y[None, :], axis=1),
        top=np.sum(p_pts == k_top, axis=1),
        min_gap=g_pts.min(axis=1),
        changes=changes,
        n=int(y.shape[0]),
        grid=int(grid),
        grid_spacing=float(xs[1] - xs[0]),
        resolution=res,
        reached=reached,
        dips=dips,
        evaluations=evals,
    )


def _measured(s: ErrorSearch, dev: np.ndarray, w: int, chance: str, grid_off: int, kept: int):
    """The row's measured text: the worst α and the error there (or the error at every α),
    and what the search evaluated."""
    searched = f"{len(s.alphas)} α evaluated: {s.grid}-point grid (spacing {s.grid_spacing:.2g}), "
    if len(s.changes):
        searched += (
            f"{len(s.changes)} change point(s) of the predictions located to "
            f"{s.reached:.2g} with the error on both sides ({kept} keep the error, "
            f"{s.dips} missed by the grid)"
        )
    else:
        searched += f"no prediction changes (each sample's gap narrowed to {s.reached:.2g})"
    off = np.flatnonzero(dev)
    if off.size:
        return (
            f"error {s.error[w]:.4g} ({s.wrong[w]}/{s.n}) at α = {s.alphas[w]:.6g}, "
            f"{dev[w]} sample(s) from 1 − 1/k; off at {off.size} of the {len(s.alphas)} "
            f"evaluated α, in [{s.alphas[off[0]]:.6g}, {s.alphas[off[-1]]:.6g}] "
            f"({grid_off} on the grid); {searched}"
        )
    where = (
        f"changes at α ∈ [{s.changes[0, 0]:.6g}, {s.changes[-1, 1]:.6g}]"
        if len(s.changes)
        else f"nearest approach to a change at α = {s.alphas[w]:.6g} (gap {s.min_gap[w]:.2g})"
    )
    return f"error {chance} at every α evaluated; {searched}; {where}"


def check_error_words(
    run: DeepRun,
    th: rint.Theorem1,
    *,
    grid: int = 50,
    resolution: float | None = None,
    not_applicable: str = "",
    context: str = "",
    source: str = f"{SOURCE} Thm 1",
) -> Check:
    """ "For all α ∈ [α₁, α₂], the error remains at 1 − 1/k" (Theorem 1, the paper's
    words), judged at every α `search_error` evaluates on [δ/Δ_min, α₂].

    The error is a fraction of samples, so 1 − 1/k is read exactly: one sample off is a
    failure. `not_applicable`: the reason when the paper's hypotheses fail (depth,
    activation, output bias, balanced classes, a bias gap); `context`: said in the reason
    (the reconstructed hypothesis "initial logits within δ" is not the paper's, and
    does not decide this row).

    **Returns:** a `Check`: holds when the error is 1 − 1/k at every evaluated α; fails
    with the α where it is farthest from it (the first such) and the error there."""
    claim = words_claim(run.label)
    if not_applicable:
        return Check.not_applicable(claim, source, not_applicable)
    lo, hi = float(th.alpha_1), min(float(th.alpha_2), 1.0)
    if not lo < hi:
        return Check.not_applicable(
            claim,
            source,
            f"the interval is empty: δ/Δ_min = {lo:.3g} ≥ α₂ = {th.alpha_2:.3g} (bias gap "
            "too small)",
            values=th.to_dict(),
        )
    s = search_error(
        run.model,
        run.data.x,
        run.data.y,
        run.theta_0,
        run.theta_T,
        (lo, hi),
        grid=grid,
        resolution=resolution,
        k_top=th.k_star,
    )
    k = run.model.k
    target = s.n - s.n // k  # balanced classes: n/k samples are right by chance
    dev = np.abs(s.wrong - target)
    # the worst α: farthest from 1 − 1/k (the first such); with the error at 1 − 1/k
    # everywhere, the first change of a prediction, else the smallest gap (nearest approach)
    if np.any(dev) or not len(s.changes):
        w = int(np.lexsort((s.min_gap, -dev))[0])
    else:
        w = int(np.searchsorted(s.alphas, s.changes[0, 0]))
    off = np.flatnonzero(dev)
    on_grid = np.isin(s.alphas, np.linspace(lo, hi, grid))
    grid_off = int(np.sum(on_grid & (dev > 0)))
    at = np.searchsorted(s.alphas, s.changes[:, 0]) if len(s.changes) else np.zeros(0, int)
    kept = int(np.sum(s.wrong[at] == s.wrong[at + 1])) if at.size else 0
    chance = 1.0 - 1.0 / k
    frac = s.top / s.n
    measured = _measured(s, dev, w, f"{target}/{s.n} = {chance:.4g}", grid_off, kept)
    reason = [
        "the error is a fraction of samples, read exactly (one sample off fails)",
        "searched, not sampled: each sample's gap (top logit − runner-up) narrowed by "
        "golden-section around its local minima on the grid, and every change of a "
        "prediction bisected to the resolution",
        f"fraction predicted k* = {th.k_star}: {frac.min():.3g}–{frac.max():.3g} (the "
        "words need not every sample predicted k*; the stronger reading is its own row)",
    ]
    if hi < th.alpha_2:
        reason.append(f"α₂ = {th.alpha_2:.3g} > 1 read as 1 (the interpolation's end)")
    if context:
        reason.append(context)
    return Check.compare(
        claim,
        source,
        holds=off.size == 0,
        predicted=f"error = 1 − 1/k = {chance:.4g} ({target}/{s.n}) for every α ∈ "
        f"[{lo:.3g}, {hi:.3g}]",
        measured=measured,
        values={
            **th.to_dict(),
            "worst_alpha": float(s.alphas[w]),
            "error_at_worst": float(s.error[w]),
            "n_off": int(off.size),
            "grid_off": grid_off,
            "evaluated": len(s.alphas),
            "change_points": len(s.changes),
            "changes_keeping_error": kept,
            "dips": s.dips,
            "grid_spacing": s.grid_spacing,
            "resolution": s.reached,
            "evaluations": s.evaluations,
            "min_fraction_k_star": float(frac.min()),
        },
        reason="; ".join(reason),
    )
