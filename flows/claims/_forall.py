"""`ForAll`: a universal claim ("for every α in [a, b]") judged on the worst point a search
finds, not on a fixed grid.

A grid of `grid` points finds where the margin is low; around every local minimum of the
grid (endpoints included) a bounded golden-section search narrows the bracket between its
neighbours to `resolution`; the verdict is read at the lowest margin found anywhere. A dip
that leaves some trace on the grid (a local minimum there) is found to `resolution`; a dip
narrower than the grid spacing that leaves none cannot be — the row states the spacing, so
a referee knows what was searched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

import numpy as np

from .._errors import ConfigError
from ._checks import FAILS, HOLDS, OUTSIDE_HYPOTHESIS, UNDECIDED, Check
from ._parts import Hypothesis, _evaluate_hypotheses, _outside

__all__ = ["ForAll"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


def _golden_min(f: Callable[[float], float], lo: float, hi: float, tol: float, budget: int):
    """(x, f(x), evaluations) of the smallest value a golden-section search finds on
    [lo, hi] (exact for a unimodal f, to `tol` in x), at most `budget` evaluations."""
    a, b = lo, hi
    c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
    fc, fd = f(c), f(d)
    best = (c, fc) if fc <= fd else (d, fd)
    n = 2
    while b - a > tol and n < budget:
        if fc <= fd:
            b, d, fd = d, c, fc
            c = b - _GOLDEN * (b - a)
            fc = f(c)
            if fc < best[1]:
                best = (c, fc)
        else:
            a, c, fc = c, d, fd
            d = a + _GOLDEN * (b - a)
            fd = f(d)
            if fd < best[1]:
                best = (d, fd)
        n += 1
    return best[0], best[1], n, b - a


@dataclasses.dataclass(frozen=True)
class ForAll:
    """'`margin(x)` ≥ 0 for every x in `over`' (a bound, written as its margin: ≥ 0 where
    the claim holds at x), judged on the worst point an adaptive search finds.

    **Fields:** `margin`, a function of one float; `over` = (lo, hi); `name` of the
    variable (for the row); `grid` start points (≥ 3; log-spaced when `log`); `resolution`,
    the width in x to which each local minimum is narrowed (default (hi − lo)·1e-6, at
    most the grid spacing); `error`, the numerical error bar of the margin (a worst margin
    inside it is `undecided (numerical)`); `budget`, evaluations per local minimum.

    **Verdict:** `holds` when the smallest margin found is ≥ 0 (beyond its error bar),
    `fails` when it is < 0, with the point where it was found; `undecided (numerical)`
    when `error` is not given (NaN: "not estimated" is never "holds" — `with_error_bars`
    gives it one from a companion solve and judges it then); the row says the grid
    spacing, the resolution reached and how many evaluations the search took. A NaN
    margin anywhere fails the claim there (the quantity is not defined)."""

    claim: str
    source: str
    margin: Callable[[float], float]
    over: tuple[float, float]
    name: str = "x"
    grid: int = 50
    resolution: float | None = None
    error: float = math.nan
    log: bool = False
    budget: int = 80
    predicted: str = ""
    hypotheses: Sequence[Hypothesis] = ()
    assumptions: str = ""
    reason: str = ""

    def _validate(self) -> tuple[float, float, float]:
        lo, hi = (float(v) for v in self.over)
        where = f"claim {self.claim!r}"
        if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
            raise ConfigError(f"{where}: `over` must be a finite interval lo < hi; got {self.over}")
        if self.log and lo <= 0:
            raise ConfigError(f"{where}: a log-spaced search needs lo > 0; got over = {self.over}")
        if int(self.grid) < 3:
            raise ConfigError(f"{where}: `grid` must be ≥ 3 start points; got {self.grid}")
        if int(self.budget) < 4:
            raise ConfigError(f"{where}: `budget` must be ≥ 4 evaluations; got {self.budget}")
        res = (hi - lo) * 1e-6 if self.resolution is None else float(self.resolution)
        # below the float spacing at the interval's end no search can narrow a bracket
        floor = 4 * np.spacing(max(abs(lo), abs(hi)))
        if not (math.isfinite(res) and res > 0):
            raise ConfigError(f"{where}: `resolution` must be > 0; got {self.resolution}")
        if res < floor:
            raise ConfigError(
                f"{where}: `resolution` {res:g} is below what float64 can resolve near "
                f"{max(abs(lo), abs(hi)):g} ({floor:.2g}); ask for at least that"
            )
        return lo, hi, res

    def judge(self) -> Check:
        lo, hi, res = self._validate()
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        space = np.geomspace if self.log else np.linspace
        xs = space(lo, hi, int(self.grid))
        evals = 0

        def f(x: float) -> float:
            nonlocal evals
            evals += 1
            v = float(self.margin(float(x)))
            return -math.inf if math.isnan(v) else v  # undefined counts as the worst

        ms = np.array([f(x) for x in xs])
        spacing = float(np.max(np.diff(xs)))
        worst_x, worst = float(xs[int(np.argmin(ms))]), float(np.min(ms))
        reached = 0.0
        n = len(xs)
        for i in range(n):  # every local minimum of the grid, endpoints included
            left = ms[i - 1] if i > 0 else math.inf
            right = ms[i + 1] if i < n - 1 else math.inf
            if not (ms[i] <= left and ms[i] <= right) or not math.isfinite(ms[i]):
                continue
            a, b = float(xs[max(i - 1, 0)]), float(xs[min(i + 1, n - 1)])
            x, v, _, width = _golden_min(f, a, b, res, int(self.budget))
            reached = max(reached, width)
            if v < worst:
                worst_x, worst = x, v
        var = self.name
        measured = (
            f"min margin {worst:.3g} at {var} = {worst_x:.6g} (searched {var} ∈ [{lo:.4g}, "
            f"{hi:.4g}]: {n}-point grid, spacing {spacing:.2g}, each local minimum narrowed to "
            f"{max(reached, 0.0):.2g}; {evals} evaluations)"
        )
        reasons = []
        missing = ""
        outside = _outside(hyps)
        has_error = math.isfinite(self.error)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
            reasons.append(f"outside the hypothesis: {outside}")
        elif has_error and abs(worst) <= abs(self.error):
            verdict = UNDECIDED
            reasons.append(
                f"the worst margin {worst:.2g} is inside the numerical error ±{abs(self.error):.2g}"
            )
        elif not has_error and math.isfinite(worst):  # "not estimated" is never "holds"
            verdict = UNDECIDED
            missing = (
                f"the numerical error of the margin is not estimated: the worst margin "
                f"{worst:.2g} alone would say {HOLDS if worst >= 0 else FAILS!r}, which is not "
                "a result; give it one (`error=`, or `with_error_bars` with a companion solve)"
            )
            reasons.append(missing)
        else:
            verdict = HOLDS if worst >= 0 else FAILS
        reasons.append(
            "universal claim: judged at the lowest margin an adaptive search found (grid, then "
            "golden-section around every local minimum), not on the grid alone"
        )
        if self.reason:
            reasons.append(self.reason)
        return Check(
            self.claim,
            self.source,
            self.predicted or f"margin ≥ 0 for every {var} in [{lo:.4g}, {hi:.4g}]",
            measured,
            verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values={
                # as a Bound's: the margin is `measured − bound`, so `with_error_bars` puts
                # the companion's change of the worst margin on it
                "measured": worst,
                "bound": 0.0,
                "worst_margin": worst,
                f"worst_{var}": worst_x,
                "grid_min_margin": float(np.min(ms)),
                "grid_spacing": spacing,
                "resolution": max(reached, 0.0),
                "evaluations": evals,
            }
            | (
                {"verdict_on_value": HOLDS if worst >= 0 else FAILS, "error_missing": missing}
                if missing
                else {}
            ),
            kind="universal",
            margin=worst,
            error=abs(self.error) if has_error else None,
            hypotheses=tuple(hyps),
        )
