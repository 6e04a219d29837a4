"""`Bound` (an upper or lower bound), `Near` (equality within a tolerance), `agrees`, and
where a claim's verdict flips in its constant (`Flip`, `flips_at`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

from .._errors import ConfigError
from ._checks import (
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    Check,
    _clean,
)
from ._parts import (
    _INF,
    Constant,
    Critical,
    Hypothesis,
    Measured,
    _check_constants,
    _evaluate_hypotheses,
    _fmt,
    _outside,
    _region,
)


@dataclasses.dataclass(frozen=True)
class Bound:
    """'quantity ≤ bound' (`sense='upper'`) or 'quantity ≥ bound' (`sense='lower'`).

    `bound` is a number, or a callable taking the constants as keyword arguments
    (`lambda C: C * 3.2e-2`). `a_priori` is the range the quantity can take whatever the
    dynamics (a relative W₂ lies in [0, 2]; a loss is ≥ 0): a bound outside it is
    `vacuous`. `over` names the set a universal claim ranges over ('every t ∈ [T_d,
    T_sp]'); `quantity` is then the worst value over it."""

    claim: str
    source: str
    measured: Measured
    bound: float | Callable[..., float]
    sense: str = "upper"
    constants: Sequence[Constant] = ()
    a_priori: tuple[float, float] = (-_INF, _INF)
    hypotheses: Sequence[Hypothesis] = ()
    kind: str = "bound"
    over: str = ""
    predicted: str = ""
    measured_text: str = ""
    assumptions: str = ""
    reason: str = ""
    values: dict = dataclasses.field(default_factory=dict)

    def _b(self, **consts: float) -> float:
        return float(self.bound(**consts)) if callable(self.bound) else float(self.bound)

    def _validate(self) -> None:
        if self.sense not in ("upper", "lower"):
            raise ConfigError(f"claim {self.claim!r}: sense must be 'upper' or 'lower'")
        _check_constants(self.claim, self.constants)
        lo, hi = self.a_priori
        q = self.measured
        e = q.error if q.has_error else 0.0
        if not (lo - e <= q.value <= hi + e) and math.isfinite(q.value):
            raise ConfigError(
                f"claim {self.claim!r}: measured value {q.value:g} lies outside the a-priori "
                f"range [{lo:g}, {hi:g}] the claim states (field a_priori); the claim or the "
                "measurement has a bug"
            )

    def judge(self) -> Check:
        """The verdict, with margin, error bar, critical constants and hypotheses."""
        self._validate()
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        defaults = {c.name: float(c.default) for c in self.constants}
        b = self._b(**defaults)
        q = self.measured
        upper = self.sense == "upper"
        margin = (b - q.value) if upper else (q.value - b)
        lo, hi = self.a_priori
        vacuous = (b >= hi) if upper else (b <= lo)
        rel = "≤" if upper else "≥"
        critical = []
        for c in self.constants:
            lo_c, hi_c = c.admissible  # type: ignore[misc]

            def g(x, c=c):
                bx = self._b(**(defaults | {c.name: x}))
                return (bx - q.value) if upper else (q.value - bx)

            holds_for, x = _region(g, lo_c, hi_c, c.label)
            vac = ""
            if math.isfinite(hi if upper else lo):
                edge = hi if upper else lo

                def gv(x, c=c, edge=edge):
                    bx = self._b(**(defaults | {c.name: x}))
                    return (bx - edge) if upper else (edge - bx)

                vtext, _ = _region(gv, lo_c, hi_c, c.label)
                vac = "" if vtext.startswith("no admissible") else vtext
            critical.append(Critical(c.label, x, holds_for, vac))
        const_text = ", ".join(f"{c.label} = {c.default:g}" for c in self.constants)
        predicted = self.predicted or f"{rel} {_fmt(b, 4)}" + (
            f" ({const_text})" if const_text else ""
        )
        reasons = [self.reason] if self.reason else []
        missing: dict = {}
        outside = _outside(hyps)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
            reasons.insert(0, f"outside the hypothesis: {outside}")
        elif not math.isfinite(q.value) or not math.isfinite(b):
            verdict = FAILS if not math.isfinite(q.value) else VACUOUS
        elif vacuous:
            verdict = VACUOUS
            edge = hi if upper else lo
            reasons.insert(
                0,
                f"vacuous: the bound {_fmt(b)} is {'at or above' if upper else 'at or below'} "
                f"{_fmt(edge)}, the {'largest' if upper else 'smallest'} value the quantity "
                "can take, so the check could not have failed",
            )
        elif q.unbounded:  # not "not estimated": known not to be bounded
            verdict = UNDECIDED
            reasons.insert(
                0,
                f"the quantity's error is unbounded ({q.how or 'no error bar can be given'}): "
                "its last value is not a result",
            )
        elif q.has_error and abs(margin) <= q.error and q.statistical:
            verdict = UNDECIDED_SIZE
            reasons.insert(
                0,
                f"the margin {margin:.2g} is inside the 95 % confidence interval ±{q.error:.2g}"
                f" ({q.how or 'of the fit'}): the interval crosses the bound; more sizes or "
                "seeds would decide",
            )
        elif q.has_error and abs(margin) <= q.error:
            verdict = UNDECIDED
            reasons.insert(
                0,
                f"the margin {margin:.2g} is inside the numerical error ±{q.error:.2g}; "
                f"decide with an error below {abs(margin):.2g} (a tighter rtol)",
            )
        elif not q.has_error:  # "not estimated" is never "holds"
            verdict = UNDECIDED_SIZE if q.statistical else UNDECIDED
            on_value = HOLDS if margin >= 0 else FAILS
            why = _not_estimated(q, margin, on_value)
            missing = {"verdict_on_value": on_value, "error_missing": why}
            reasons.insert(0, why)
        else:
            verdict = HOLDS if margin >= 0 else FAILS
        measured = (self.measured_text or q.text()) + (f" over {self.over}" if self.over else "")
        return Check(
            claim=self.claim,
            source=self.source,
            predicted=predicted,
            measured=measured,
            verdict=verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values=_values(self.values, q, b, margin, defaults) | missing,
            kind=self.kind if self.kind != "bound" else f"{self.sense} bound",
            margin=margin,
            error=q.error,
            critical=tuple(cr.text() for cr in critical),
            hypotheses=tuple(hyps),
        )


def _not_estimated(q: Measured, margin: float, on_value: str) -> str:
    """The reason of a row whose error bar is missing (NaN): judged on its value alone it
    would be `on_value`, which is not a result."""
    what = "95 % confidence interval" if q.statistical else "numerical error"
    fix = (
        "more sizes or seeds would give one"
        if q.statistical
        else "give it one (`simulate(…, global_error=True)` and `with_error_bars`)"
    )
    why = f" ({q.how})" if q.how else ""
    return (
        f"the {what} is not estimated{why}: the margin {margin:.2g} alone would say "
        f"{on_value!r}, which is not a result; {fix}"
    )


def _values(extra: dict, q: Measured, b: float, margin: float, defaults: dict) -> dict:
    out = dict(extra)
    out.setdefault("measured", q.value)
    out.setdefault("bound", b)
    out["margin"] = margin
    out["error"] = q.error
    if q.floor:  # the error bar a companion's may not go below (`with_error_bars`)
        out["floor"] = q.floor
    if q.statistical:  # said as such in the row's note, not as a numerical error
        out["error_kind"] = "95 % confidence interval"
    for k, v in defaults.items():
        out.setdefault(f"constant_{k}", v)
    return _clean(out)


def Near(  # noqa: N802 - a claim kind, read like the others
    claim: str,
    source: str,
    measured: Measured,
    target: float,
    tolerance: Constant,
    **kw: Any,
) -> Bound:
    """'quantity = target within a tolerance': a `Bound` on |quantity − target| ≤ the
    tolerance, a named `Constant` (its critical value is the distance measured)."""
    d = Measured(abs(measured.value - target), measured.error, measured.how, measured.statistical)
    name = tolerance.name
    kw.setdefault("predicted", f"{_fmt(target, 4)} ± {tolerance.default:g} ({tolerance.label})")
    kw.setdefault("measured_text", f"{measured.text(4)} (off by {d.value:.3g})")
    kw.setdefault("a_priori", (0.0, _INF))
    values = {"measured_value": measured.value, "target": target} | kw.pop("values", {})
    return Bound(
        claim,
        source,
        d,
        lambda **c: c[name],
        constants=(tolerance,),
        kind="equality",
        values=values,
        **kw,
    )


def agrees(
    claim: str,
    source: str,
    measured: Measured,
    reference: Measured,
    *,
    predicted: str = "",
    reason: str = "",
    values: dict | None = None,
) -> Check:
    """'`measured` and `reference` are two estimates of one number' (e.g. gradient
    descent's η → 0 extrapolation and the exact flow), judged against their error bars.

    **holds** when |measured − reference| ≤ the combined error bar (the two errors added;
    a reference without an error bar counts as exact, which the reason says), **fails**
    when the difference exceeds it, **vacuous** when the bar is at least |reference| (any
    estimate of the right sign would have agreed), **not applicable** when `measured`
    carries no error bar. `margin` is the bar minus the difference."""
    if not measured.has_error:
        return Check.not_applicable(
            claim, source, "the measurement carries no error bar to judge agreement by"
        )
    err = measured.error + (reference.error if reference.has_error else 0.0)
    diff = abs(measured.value - reference.value)
    margin = err - diff
    if not math.isfinite(diff):
        verdict = NOT_APPLICABLE
    elif err >= abs(reference.value):
        verdict = VACUOUS
    else:
        verdict = HOLDS if diff <= err else FAILS
    notes = [
        f"error bar: {measured.how}" if measured.how else "",
        (f"reference: {reference.how}" if reference.how else "")
        if reference.has_error
        else "the reference's error is not estimated (taken as exact)",
        "the error bar is as wide as the quantity: nothing could have disagreed"
        if verdict == VACUOUS
        else "",
        reason,
    ]
    return Check(
        claim=claim,
        source=source,
        predicted=predicted or f"{reference.text(4)} within the combined error bar ±{err:.2g}",
        measured=f"{measured.text(4)} (off by {diff:.2g})",
        verdict=verdict,
        reason="; ".join(n for n in notes if n),
        values=_clean(
            {
                "measured": measured.value,
                "error": measured.error,
                "reference": reference.value,
                "reference_error": reference.error,
                "difference": diff,
            }
            | (values or {})
        ),
        kind="agreement",
        margin=margin,
        error=err,
    )


class Flip(str):
    """The text `flips_at` returns ('holds for tol ≥ 0.0123'), carrying its numbers:
    `name` (the tolerance), `value` (the flip point, NaN when the row holds for no value),
    `at_least` (holds above the flip point, else below) and `default` (the tolerance the
    toolkit judged with; None when not given). A `str`, so it goes wherever the critical
    text goes (`Check.critical`, the tables, JSON); `with_error_bars` reads the numbers."""

    name: str
    value: float
    at_least: bool
    default: float | None

    def __new__(cls, text: str, name: str, value: float, at_least: bool, default=None):
        out = super().__new__(cls, text)
        out.name, out.value, out.at_least = name, float(value), bool(at_least)
        out.default = None if default is None else float(default)
        return out

    def __getnewargs__(self):  # copies and pickles keep the numbers
        return (str(self), self.name, self.value, self.at_least, self.default)


def flips_at(
    name: str,
    value: float,
    *,
    at_least: bool,
    others_hold: bool = True,
    default: float | None = None,
) -> Flip:
    """The critical-value text of a row judged with a tolerance the toolkit (not the paper)
    chose, for `Check.critical`: the row holds for `name` ≥ `value` (`at_least`, e.g. a
    measured error against an allowed error) or `name` ≤ `value` (e.g. a measured cosine
    against a required one), the row's other conditions as measured; 'holds for no
    `name`' when one of those fails (`others_hold` False) or `value` is not finite.
    E.g. a row `Check.compare(..., holds=err <= cfg.tol)` gets
    `critical=(flips_at("tol", err, at_least=True, default=cfg.tol),)`.

    The text is a `Flip` (a `str` with the numbers): given `default`, the tolerance the row
    was judged with, `with_error_bars` can tell whether the flip point's numerical error
    reaches the default (then the row is `undecided (numerical)`).
    """
    if not others_hold or not math.isfinite(value):
        text = f"holds for no {name} (another condition of the row fails)"
        return Flip(text, name, math.nan, at_least, default)
    text = f"holds for {name} {'≥' if at_least else '≤'} {value:.4g}"
    return Flip(text, name, value, at_least, default)
