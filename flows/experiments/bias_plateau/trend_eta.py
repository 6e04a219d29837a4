"""Numerical error bars for the trends measured by gradient descent.

GD at rate η approximates the flow to first order in η. Each trend row is judged on one
number — its end-to-end change (depth, δ: `check_trend`'s `change`) or the drop of the
error plateau without the output bias (with − without) — measured at η, η/2 and η/4.
`flows.claims.richardson` extrapolates it to η → 0 with an error bar; the numerical error
of the value the verdict uses (at η/4) is its distance from the extrapolation plus that
bar. A `holds`/`fails` whose margin (the number against the larger of the seed spread and
the tolerance) lies inside that error is `undecided (numerical)`.

The plateau lengths are read on the interpolation grid (steps of 1/(n_alpha − 1)), so a
change in η moves them in grid steps: the three measurements are often pre-asymptotic,
and `richardson` then takes their whole spread as the bar (it says so).
"""

from __future__ import annotations

import dataclasses
import math

from flows import Check
from flows.claims import FAILS, HOLDS, UNDECIDED, richardson

__all__ = ["eta_error_bars"]


def _number(c: Check) -> tuple[float, float] | None:
    """(the number the row's verdict hinges on — signed, positive the predicted way —,
    the seed spread it is compared with), or None for a row without one."""
    v = c.values
    if "change" in v and "spread" in v:
        return float(v["change"]), float(v["spread"])
    if "with_bias" in v and "without_bias" in v and "spread" in v:
        return float(v["with_bias"]) - float(v["without_bias"]), float(v["spread"])
    return None


def _margin(verdict: str, value: float, spread: float, tol: float) -> float:
    """How far `value` is from flipping the verdict: a `holds` needs value > max(spread,
    tol); a `fails` by a wrong-way change needs value < −spread (a fail by a wrong-way
    step is not this number's: infinite margin); other verdicts: NaN."""
    if verdict == HOLDS:
        return value - max(spread, tol)
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
        nums = [_number(g) if g is not None else None for g in got]
        if any(n is None for n in nums):
            out.append(c)
            continue
        values = [n[0] for n in nums if n is not None]
        spread = nums[-1][1] if nums[-1] is not None else math.nan
        r = richardson(values, etas)
        if not math.isfinite(r.value):
            out.append(c)
            continue
        err = abs(values[-1] - r.value) + r.error
        margin = _margin(c.verdict, values[-1], spread, tol)
        extra = {
            "eta_values": dict(zip((f"{e:g}" for e in etas), values, strict=True)),
            "eta0": r.value,
            "eta0_error": r.error,
            "eta0_how": r.how,
            "numerical_error": err,
        }
        note = (
            f"η → 0: {r.value:.3g} ± {r.error:.2g} ({r.how}); the value judged (η = "
            f"{etas[-1]:g}) {values[-1]:.3g} ± {err:.2g}"
        )
        verdict, reason = c.verdict, c.reason
        if verdict in (HOLDS, FAILS) and margin <= err:
            verdict = UNDECIDED
            reason = (
                f"the margin {margin:.2g} of the change {values[-1]:.3g} (seed spread "
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
