"""Error bars from a companion solve: each check re-judged beside its companion at a
tighter tolerance (`with_error_bars`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

from .._solve.global_error import GLOBAL_ERROR_FACTOR, error_calibration
from ._bound import Flip
from ._checks import (
    FAILS,
    HOLDS,
    UNDECIDED,
    UNDECIDED_SIZE,
    Check,
)


def with_error_bars(
    checks: Sequence[Check],
    companion: Sequence[Check],
    how: str,
    *,
    factor: float = GLOBAL_ERROR_FACTOR,
) -> list[Check]:
    """`checks` with numerical error bars from the same checks run on a companion solve
    (`simulate(…, global_error=True)`'s `global_error.companion`, tolerances 10× tighter).

    Every difference Δ between the two runs is calibrated as the run's own global error is
    (`simulate`'s `global_error`): times `error_calibration(factor)` (Richardson over
    the two tolerances, times a measured safety factor; 2.78 for the companion at
    tolerances `factor` = 10 times tighter), so that it covers the run's true error.

    Rows pair up by claim and source (in order). For a row the kit judged with a margin
    (`Bound`, `Near`, `ForAll`), the error bar is that calibration times |Δ measured| +
    |Δ bound|, added to the row's own error bar where it has one; a row whose error bar
    was missing (`undecided`: not estimated) is judged now; a `holds` or `fails` whose
    margin lies inside the error bar becomes `undecided (numerical)`; a row whose own
    error is unbounded (∞) stays undecided. The error bar is never below the floor of the
    quantity the row reads (`values["floor"]`, `Measured.floor`) where that is known.

    For a row judged with a tolerance the toolkit chose (`Check.compare` with `critical` from
    `flips_at(…, default=…)`), each flip point gets the error bar |Δ flip point| (shown
    as '± …' in the critical text); a row whose default tolerance lies within that error
    of its flip point, or whose verdict differs on the companion, becomes `undecided
    (numerical)`. `how` names the companion ('companion solve at rtol/10'). Other rows
    are returned unchanged."""
    by_key: dict[tuple[str, str], list[Check]] = {}
    for c in companion:  # rows with the same claim pair up in order
        by_key.setdefault((c.claim, c.source), []).append(c)
    cal = error_calibration(factor)
    out = []
    for c in checks:
        twins = by_key.get((c.claim, c.source))
        other = twins.pop(0) if twins else None
        if other is None:
            out.append(c)
        elif c.kind == "limit":
            out.append(_limit_error_bars(c, other, how, cal))
        elif c.margin is None:
            out.append(_tolerance_error_bars(c, other, how, cal))
        else:
            out.append(_margin_error_bars(c, other, how, cal))
    return out


def _margin_error_bars(c: Check, other: Check, how: str, cal: float) -> Check:
    """`with_error_bars` for a row judged with a margin (`Bound`, `Near`, `ForAll`)."""
    try:
        diff = abs(float(c.values["measured"]) - float(other.values["measured"]))
        diff += abs(float(c.values.get("bound", 0.0)) - float(other.values.get("bound", 0.0)))
    except (KeyError, TypeError, ValueError):
        return _same_verdict(c, other, how)
    if not math.isfinite(diff) or c.margin is None:
        return _same_verdict(c, other, how)
    own = math.nan if c.error is None else abs(float(c.error))
    missing = bool(c.values.get("error_missing"))
    if math.isinf(own):  # unbounded (a quantity not converging): no companion bounds it
        values = c.values | {"companion_error": cal * diff, "error_how": how}
        return dataclasses.replace(c, values=values)
    err = cal * diff + (own if math.isfinite(own) and not missing else 0.0)
    # never below what the quantity can be known to where that is known (`Measured.floor`)
    floor = c.values.get("floor")
    if isinstance(floor, int | float) and math.isfinite(floor):
        err = max(err, abs(float(floor)))
    statistical = "error_kind" in c.values and math.isfinite(own) and not missing
    values = {k: v for k, v in c.values.items() if k not in ("error_missing", "verdict_on_value")}
    values |= {"error": err, "error_how": how, "companion_error": cal * diff}
    if statistical:  # a confidence interval, with the numerical error added to it
        values["error_kind"] = "95 % confidence interval + numerical error"
    verdict, reason = c.verdict, c.reason
    if missing and verdict in (UNDECIDED, UNDECIDED_SIZE):
        # judged now that it has an error bar: drop the "not estimated" reason
        verdict = HOLDS if c.margin >= 0 else FAILS
        gone = str(c.values["error_missing"])
        reason = "; ".join(r for r in reason.replace(gone, "").split("; ") if r)
    if verdict in (HOLDS, FAILS) and abs(c.margin) <= err:
        verdict = UNDECIDED
        reason = (
            f"the margin {c.margin:.2g} is inside the numerical error ±{err:.2g} ({how}); "
            f"decide with an error below {abs(c.margin):.2g} (a tighter rtol)"
            + (f"; {reason}" if reason else "")
        )
    return dataclasses.replace(c, verdict=verdict, reason=reason, error=err, values=values)


def _same_verdict(c: Check, other: Check, how: str) -> Check:
    """A row with no number to put an error bar on: its verdict must be the companion's
    (else `undecided (numerical)`); `values` records that it was compared
    (`companion_verdict`, `error_how`)."""
    values = c.values | {"companion_verdict": other.verdict, "error_how": how}
    if c.verdict in (HOLDS, FAILS) and other.verdict != c.verdict:
        reason = (
            f"the verdict is {other.verdict!r} on the companion ({how}): decide with a tighter rtol"
        )
        reason += f"; {c.reason}" if c.reason else ""
        return dataclasses.replace(c, verdict=UNDECIDED, reason=reason, values=values)
    return dataclasses.replace(c, values=values)


def _limit_error_bars(c: Check, other: Check, how: str, cal: float) -> Check:
    """`with_error_bars` for a `Limit` row: the error bar of its fitted rate is the largest
    change of the rate or of an end of its confidence interval on the companion; a `holds`
    or `fails` decided by an end of the interval closer to its threshold than that becomes
    `undecided (numerical)`."""
    p, ci = c.values.get("exponent"), c.values.get("exponent_ci")
    q, cj = other.values.get("exponent"), other.values.get("exponent_ci")
    try:
        ends = [float(p), float(ci[0]), float(ci[1])]  # type: ignore[arg-type,index]
        twin = [float(q), float(cj[0]), float(cj[1])]  # type: ignore[arg-type,index]
    except (TypeError, ValueError, IndexError):
        ends = twin = []
    diffs = [abs(a - b) for a, b in zip(ends, twin, strict=True)]
    if not diffs or not all(math.isfinite(d) for d in diffs):
        return _same_verdict(c, other, how)
    err = cal * max(diffs)
    values = c.values | {"error": err, "error_how": how}
    verdict, reason = c.verdict, c.reason
    # the ends of the CI that decided (see `Limit`): holds needs the upper end below 0 (and,
    # for a claimed rate p*, the lower end at or below p*); fails is the lower end above p*
    # (or at or above 0)
    ps = c.values.get("rate_bound_exponent")
    lo, hi = ends[1], ends[2]
    if verdict == HOLDS:
        gaps = [(hi, 0.0)] + ([(lo, float(ps))] if ps is not None else [])
    else:
        gaps = [(lo, min(0.0, float(ps)) if ps is not None else 0.0)]
    close = [(e, t) for e, t in gaps if abs(e - t) <= err]
    if verdict in (HOLDS, FAILS) and (close or other.verdict != c.verdict):
        why = (
            f"the rate's CI end {close[0][0]:.3g} is within the numerical error ±{err:.2g} "
            f"of {close[0][1]:.3g}"
            if close
            else f"the verdict is {other.verdict!r} on the companion"
        )
        verdict = UNDECIDED
        reason = f"{why} ({how}): decide with a tighter rtol" + (f"; {reason}" if reason else "")
    return dataclasses.replace(c, verdict=verdict, reason=reason, error=err, values=values)


def _tolerance_error_bars(c: Check, other: Check, how: str, cal: float) -> Check:
    """`with_error_bars` for a row judged with the toolkit's tolerances (see there)."""
    twin_flips = {f.name: f for f in other.critical if isinstance(f, Flip)}
    critical, errors, inside = [], {}, []
    for f in c.critical:
        g = twin_flips.get(f.name) if isinstance(f, Flip) else None
        if not isinstance(f, Flip) or g is None or not math.isfinite(f.value + g.value):
            critical.append(f)
            continue
        err = cal * abs(f.value - g.value)
        errors[f.name] = err
        text = f"{f} ± {err:.2g} (numerical)"
        critical.append(Flip(text, f.name, f.value, f.at_least, f.default))
        if f.default is not None and abs(f.default - f.value) <= err:
            inside.append(f"{f.name} = {f.default:g} lies within ±{err:.2g} of the flip point")
    if not errors:
        return _same_verdict(c, other, how)
    verdict, reason = c.verdict, c.reason
    if verdict in (HOLDS, FAILS) and (inside or other.verdict != c.verdict):
        why = "; ".join(inside) or f"the verdict is {other.verdict!r} on the companion"
        verdict = UNDECIDED
        reason = f"{why} ({how}): decide with a tighter rtol" + (f"; {reason}" if reason else "")
    values = c.values | {"flip_errors": errors, "error_how": how}
    return dataclasses.replace(
        c, verdict=verdict, reason=reason, critical=tuple(critical), values=values
    )
