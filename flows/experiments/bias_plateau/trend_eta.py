"""Numerical error bars for the trends measured by gradient descent.

GD at rate η approximates the flow to first order in η. Each trend row is judged on one
number — its end-to-end change (depth, δ: `check_trend`'s `change`) or the drop of the
error plateau without the output bias (with − without) — measured at η, η/2 and η/4.
`flows.claims.richardson` extrapolates it to η → 0 with an error bar; the numerical error
of the value the verdict uses (at η/4) is its distance from the extrapolation plus that
bar. A `holds`/`fails` whose margin (the number against the larger of the seed spread and
the tolerance) lies inside that error is `undecided (numerical)`.

The plateau lengths are read on the trend runs' interpolation grid (`trend_n_alpha`,
steps of 1/(trend_n_alpha − 1)), so a change in η moves them in grid steps: the three
measurements are often pre-asymptotic, and `richardson` then takes their whole spread as
the bar (it says so). On the paper's 50-point grid that bar was one grid step (1/49 ≈
0.02), larger than the margins it judged; 491 points make it ≈ 0.002.
"""

from __future__ import annotations

import dataclasses
import math

from flows import Check
from flows.claims import FAILS, HOLDS, UNDECIDED, richardson

__all__ = ["eta_error_bars"]


def _conditions(c: Check, tol: float) -> list[tuple[str, float, float]] | None:
    """The conditions the row's verdict hinges on, each (name, number, threshold): the
    number is signed, positive the predicted way, and the condition holds when it exceeds
    its threshold; None for a row without them. A trend row has one (its change against
    the larger of the seed spread and `tol`); the bias row two (the drop with − without
    against the same, and half the plateau with bias minus the plateau without, ≥ 0)."""
    v = c.values
    if "change" in v and "spread" in v:
        return [("change", float(v["change"]), max(float(v["spread"]), tol))]
    if "with_bias" in v and "without_bias" in v and "spread" in v:
        w, wo = float(v["with_bias"]), float(v["without_bias"])
        return [
            ("drop with − without", w - wo, max(float(v["spread"]), tol)),
            ("with/2 − without", 0.5 * w - wo, 0.0),
        ]
    return None


def _margin(verdict: str, conds: list[tuple[str, float, float]], spread: float) -> float:
    """How far a trend row (one condition) is from flipping its verdict: a `holds` needs
    the change above its threshold; a `fails` is a change the wrong way beyond the seed
    spread (a fail by a wrong-way step is not this number's: infinite margin); other
    verdicts: NaN."""
    (_, value, thr) = conds[0]
    if verdict == HOLDS:
        return value - thr
    if verdict == FAILS:
        return -spread - value if value < -spread else math.inf
    return math.nan


def eta_error_bars(
    merged: list[Check], runs: list[list[Check]], etas: list[float], tol: float
) -> list[Check]:
    """`merged` (the trend rows after the η rule) with error bars from the same rows
    measured at each of `etas` (`runs[i]` at `etas[i]`, decreasing by one ratio, the
    last the one the verdicts use); `tol` is the trend tolerance (`trend_tol`)."""
    if len(runs) != len(etas):
        raise ValueError(f"one list of rows per η: {len(runs)} lists for {len(etas)} rates")
    by_eta = [{c.claim: c for c in rows} for rows in runs]
    out = []
    for c in merged:
        got = [rows.get(c.claim) for rows in by_eta]
        conds = [_conditions(g, tol) if g is not None else None for g in got]
        if any(n is None for n in conds):
            out.append(c)
            continue
        per_eta = [n for n in conds if n is not None]
        spread = float(got[-1].values["spread"])  # type: ignore[union-attr]
        # each condition's number at the three rates, extrapolated to η → 0
        fits = [richardson([n[i][1] for n in per_eta], etas) for i in range(len(per_eta[0]))]
        if not all(math.isfinite(r.value) for r in fits):
            out.append(c)
            continue
        errs = [abs(per_eta[-1][i][1] - r.value) + r.error for i, r in enumerate(fits)]
        last = per_eta[-1]
        excess = [value - thr for _, value, thr in last]
        if len(last) == 1:  # a trend row: as `_margin` reads it
            i, margin = 0, _margin(c.verdict, last, spread)
            undecided = c.verdict in (HOLDS, FAILS) and margin <= errs[0]
        elif c.verdict == HOLDS:  # every condition must clear its threshold beyond its error
            i = min(range(len(last)), key=lambda j: excess[j] - errs[j])
            margin = excess[i]
            undecided = margin <= errs[i]
        else:  # fails: decided when a failing condition falls short by more than its error
            failing = [j for j in range(len(last)) if excess[j] <= 0] or [0]
            i = max(failing, key=lambda j: -excess[j] - errs[j])
            margin = -excess[i]
            undecided = c.verdict == FAILS and margin <= errs[i]
        r, err, values = fits[i], errs[i], [n[i][1] for n in per_eta]
        extra = {
            "eta_values": dict(zip((f"{e:g}" for e in etas), values, strict=True)),
            "eta0": r.value,
            "eta0_error": r.error,
            "eta0_how": r.how,
            "numerical_error": err,
        }
        if len(fits) > 1:
            extra["conditions"] = {
                name: {
                    "value": per_eta[-1][j][1],
                    "threshold": thr,
                    "error": errs[j],
                    "eta0": fits[j].value,
                }  # fmt: skip
                for j, (name, _, thr) in enumerate(per_eta[-1])
            }
        what = per_eta[-1][i][0]
        note = (
            f"η → 0: {r.value:.3g} ± {r.error:.2g} ({r.how}); the value judged (η = "
            f"{etas[-1]:g}) {values[-1]:.3g} ± {err:.2g}"
        )
        if len(fits) > 1:
            note = f"closest to flipping of its {len(fits)} conditions: {what}; " + note
        verdict, reason = c.verdict, c.reason
        if undecided:
            verdict = UNDECIDED
            reason = (
                f"the margin {margin:.2g} of the {what} {values[-1]:.3g} (seed spread "
                f"{spread:.3g}, tolerance {tol:g}) is inside GD's numerical error ±{err:.2g}: "
                f"decide with smaller η or the exact flow; {note}"
                + (f"; {reason}" if reason else "")
            )
        else:
            reason = f"{note}; {reason}" if reason else note
        out.append(
            dataclasses.replace(
                c, verdict=verdict, reason=reason, error=err, values=c.values | extra
            )
        )
    return out
