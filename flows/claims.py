"""The claim kit: a paper's claim stated as data, its verdict computed.

A claim names the measured quantity (with its numerical error bar), the paper's
expression with its unspecified constants (each with a documented default and an
admissible range), the theorem's hypotheses as predicates evaluated on the run, and the
quantity's a-priori range. `judge()` turns it into a `flows.Check` whose verdict is one of
`VERDICTS`:

- `holds` / `fails`: the comparison at the constants' defaults, with a margin larger than
  the numerical error;
- `vacuous`: the claim could not have failed (an upper bound at or above the largest
  value the quantity can take, a lower bound at or below its smallest) — counted
  separately, never "holds";
- `outside hypothesis`: the run does not meet a hypothesis of the theorem (named, with
  by how much); the comparison is still shown;
- `undecided (numerical)`: the margin is inside the numerical error bar;
- `undecided (finite size)`: a limit claim whose fitted rate's confidence interval
  contains 0;
- `holds (transient)` / `holds (persistent)` / `not observed`: an existential claim
  ("can happen") searched over whole trajectories and a family of runs;
- `not applicable`: the quantity was not reached (set by the paper's code, with why).

Beside the verdict, every unspecified constant gets its *critical value*: where, with the
other constants at their defaults, the verdict flips ("holds for C ≥ 0.79"), and where
the bound becomes vacuous.

Kinds: `Bound` (upper/lower bound, ordering), `Near` (equality within a tolerance),
`Limit` ("→ L as m → ∞": the literal value at the largest width and the fitted rate with
a confidence interval, over ≥ 4 widths × ≥ 3 seeds), `Existential` ("can happen"),
`ForAll` ("for every α in [a, b]": the margin minimised by an adaptive search — a grid,
then golden-section around every local minimum — and judged at the worst point found).
A universal claim over a set already sampled (save times) is a `Bound` on the worst value
over it, with `over` naming the set.

Bad claims raise `flows.ConfigError` naming the claim and the field: a constant with no
admissible range, a default outside its range, a hypothesis predicate that raises, a
measured value outside the a-priori range the claim itself states.

A check carries where its claim stands in the paper (`Reference`, filled in from the
check's `source` by `annotate`) and, for a finite-size claim, the trend it measured
(`Trend`), which the report draws.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._checks import (
    FAILS,
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_APPLICABLE,
    NOT_OBSERVED,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    VERDICTS,
    Check,
    Reference,
    Trend,
    _clean,
    annotate,
)
from ._claim_parts import (
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
from ._errors import ConfigError
from ._estimates import ORDER_SLACK, limit_in_time, power_law_fit, richardson
from ._forall import ForAll
from ._window import Extension, Part, Window, edge_trend, extend

__all__ = [
    "VERDICTS",
    "HOLDS",
    "FAILS",
    "VACUOUS",
    "OUTSIDE_HYPOTHESIS",
    "UNDECIDED",
    "UNDECIDED_SIZE",
    "HOLDS_TRANSIENT",
    "HOLDS_PERSISTENT",
    "NOT_OBSERVED",
    "NOT_APPLICABLE",
    "Measured",
    "Constant",
    "Hypothesis",
    "Critical",
    "Bound",
    "Near",
    "Limit",
    "Existential",
    "ForAll",
    "Window",
    "Part",
    "edge_trend",
    "extend",
    "Extension",
    "power_law_fit",
    "richardson",
    "agrees",
    "limit_in_time",
    "ORDER_SLACK",
    "with_error_bars",
    "flips_at",
    "Flip",
    "MIN_WIDTHS",
    "MIN_SEEDS",
    "Reference",
    "Trend",
    "annotate",
]


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
            values=_values(self.values, q, b, margin, defaults),
            kind=self.kind if self.kind != "bound" else f"{self.sense} bound",
            margin=margin,
            error=q.error,
            critical=tuple(cr.text() for cr in critical),
            hypotheses=tuple(hyps),
        )


def _values(extra: dict, q: Measured, b: float, margin: float, defaults: dict) -> dict:
    out = dict(extra)
    out.setdefault("measured", q.value)
    out.setdefault("bound", b)
    out["margin"] = margin
    out["error"] = q.error
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


#: A limit claim needs at least this many widths and seeds per width.
MIN_WIDTHS, MIN_SEEDS = 4, 3


@dataclasses.dataclass(frozen=True)
class Limit:
    """'quantity → `limit` as m → ∞', read one way for every such claim.

    `values[i, j]` is the quantity at width `widths[i]` and seed j. Shown: the literal
    distance |q − limit| at the largest width (seed mean ± sd, and whether it is within
    `tolerance` there), and the fitted rate |q − limit| ∝ m^p with a confidence
    interval. **Rule:** holds when the whole interval of p lies below 0 (the distance
    decays), fails when it lies at or above 0, `undecided (finite size)` when it contains
    0; with fewer than `MIN_WIDTHS` widths × `MIN_SEEDS` seeds the claim is not
    applicable. The literal value does not decide (the statement is about m → ∞), but it
    is reported."""

    claim: str
    source: str
    widths: Sequence[float]
    values: np.ndarray
    limit: float = 0.0
    tolerance: float | None = None
    predicted_exponent: float | None = None
    rate_bound: bool = False
    hypotheses: Sequence[Hypothesis] = ()
    assumptions: str = ""
    reason: str = ""

    def judge(self) -> Check:
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        if self.rate_bound and self.predicted_exponent is None:
            raise ConfigError(
                f"claim {self.claim!r}: rate_bound needs predicted_exponent (the paper's p* in "
                "|q − L| ≤ C m^p*)"
            )
        v = np.asarray(self.values, dtype=float)
        if v.ndim == 1:
            v = v[:, None]
        widths = [float(m) for m in self.widths]
        if v.shape[0] != len(widths):
            raise ConfigError(
                f"claim {self.claim!r}: values has {v.shape[0]} rows for {len(widths)} widths"
            )
        dist = np.abs(v - self.limit)
        top = int(np.argmax(widths))
        lit, sd = float(np.nanmean(dist[top])), float(np.nanstd(dist[top]))
        pred = "|q − L| decays in m" + (
            f" (paper: ∝ m^{self.predicted_exponent:.3g})"
            if self.predicted_exponent is not None
            else ""
        )
        base = {
            "widths": widths,
            "means": [float(x) for x in dist.mean(axis=1)],
            "literal_largest_m": lit,
            "literal_sd": sd,
            "limit": self.limit,
        }

        def not_applicable(why: str) -> Check:
            shape = f"{len(widths)} widths × {v.shape[1]} seeds"
            return Check(self.claim, self.source, pred, shape, NOT_APPLICABLE, reason=why,
                         values=base, kind="limit", hypotheses=tuple(hyps))  # fmt: skip

        if len(widths) < MIN_WIDTHS or v.shape[1] < MIN_SEEDS:
            return not_applicable(
                f"a limit claim needs ≥ {MIN_WIDTHS} widths × ≥ {MIN_SEEDS} seeds for a rate "
                "with a confidence interval"
            )
        if not np.all(np.isfinite(dist)):
            return not_applicable("a run did not reach the time the quantity is taken at")
        fit = power_law_fit(widths, dist)
        p, (plo, phi) = fit["p"], fit["ci"]
        within = (
            ""
            if self.tolerance is None
            else (
                f"; within the tolerance {self.tolerance:g} there"
                if lit <= self.tolerance
                else f"; outside the tolerance {self.tolerance:g} there"
            )
        )
        measured = (
            f"|q − L| = {lit:.3g} ± {sd:.2g} at m = {widths[top]:g}{within}; "
            f"∝ m^{p:.3g} (95% CI [{plo:.3g}, {phi:.3g}])"
        )
        reasons = []
        outside = _outside(hyps)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
            reasons.append(f"outside the hypothesis: {outside}")
        elif not np.any(dist > 0):
            verdict = HOLDS
            measured = f"|q − L| = 0 at every width and seed (m = {widths[0]:g} … {widths[top]:g})"
            reasons.append("at the limit at every width")
        elif not math.isfinite(p):
            verdict = NOT_APPLICABLE
            reasons.append("too few nonzero distances to fit a rate")
        elif self.rate_bound:
            ps = float(self.predicted_exponent)  # type: ignore[arg-type]
            if plo > ps or plo >= 0:
                verdict = FAILS
                reasons.append(
                    f"the distance decays slower than the claimed m^{ps:.3g} (the whole 95% CI "
                    "lies above it)"
                    if plo > ps
                    else "the distance does not decay"
                )
            elif phi < 0:
                verdict = HOLDS
            else:
                verdict = UNDECIDED_SIZE
                reasons.append("the rate's confidence interval contains 0")
        elif phi < 0:
            verdict = HOLDS
        elif plo >= 0:
            verdict = FAILS
        else:
            verdict = UNDECIDED_SIZE
            reasons.append(
                "the rate's confidence interval contains 0: more or larger widths would decide"
            )
        reasons.append(
            "rule: a limit m → ∞ holds when the fitted rate's 95% CI lies below 0"
            + (
                f" and reaches the claimed rate m^{self.predicted_exponent:.3g} (fails when the "
                "whole CI lies above it)"
                if self.rate_bound
                else ""
            )
            + "; the literal value at the largest m is shown, not judged"
        )
        if self.reason:
            reasons.append(self.reason)
        return Check(
            self.claim,
            self.source,
            pred,
            measured,
            verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values=base
            | {"exponent": p, "exponent_ci": [plo, phi]}
            | ({"rate_bound_exponent": float(self.predicted_exponent)} if self.rate_bound else {}),  # type: ignore[arg-type]
            kind="limit",
            margin=-phi,
            hypotheses=tuple(hyps),
        )


@dataclasses.dataclass(frozen=True)
class Existential:
    """'X can happen': searched over whole trajectories of a family of runs.

    `occurs[k]` is a boolean array over `times[k]` (run k of the family, labelled
    `members[k]`), True where X is the case. Verdict: `holds (persistent)` when X holds
    at the end of some run, `holds (transient)` when it occurs but at no run's end,
    `not observed` when it never occurs; `family` describes what was searched. The
    measured text gives where (the run) and when (first interval, its length)."""

    claim: str
    source: str
    times: Sequence[np.ndarray]
    occurs: Sequence[np.ndarray]
    members: Sequence[str]
    family: str
    hypotheses: Sequence[Hypothesis] = ()
    assumptions: str = ""
    reason: str = ""

    def judge(self) -> Check:
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        if not (len(self.times) == len(self.occurs) == len(self.members)):
            raise ConfigError(f"claim {self.claim!r}: times, occurs and members differ in length")
        found, persistent = [], []
        for t, occ, name in zip(self.times, self.occurs, self.members, strict=True):
            t, occ = np.asarray(t, float), np.asarray(occ, bool)
            if not occ.any():
                continue
            i0 = int(np.argmax(occ))
            i1 = i0 + int(np.argmax(~occ[i0:])) if not occ[i0:].all() else len(occ)
            end = float(t[i1 - 1])
            found.append(
                {
                    "member": name,
                    "t_first": float(t[i0]),
                    "t_last": end,
                    "fraction": float(occ.mean()),
                    "at_end": bool(occ[-1]),
                }
            )
            if occ[-1]:
                persistent.append(name)
        n = len(self.members)
        outside = _outside(hyps)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
        elif persistent:
            verdict = HOLDS_PERSISTENT
        elif found:
            verdict = HOLDS_TRANSIENT
        else:
            verdict = NOT_OBSERVED
        if found:
            f = found[0]
            measured = (
                f"in {len(found)} of {n} runs; first: {f['member']}, t ≈ "
                f"{f['t_first']:.3g}–{f['t_last']:.3g} (save resolution)"
                + (", to the end of the run" if f["at_end"] else "")
            )
        else:
            measured = f"in 0 of {n} runs"
        reasons = [f"searched: {self.family}"]
        if outside:
            reasons.insert(0, f"outside the hypothesis: {outside}")
        if self.reason:
            reasons.append(self.reason)
        return Check(
            self.claim,
            self.source,
            "can happen",
            measured,
            verdict,
            reason="; ".join(reasons),
            assumptions=self.assumptions,
            values={"occurrences": found, "searched": n},
            kind="existential",
            hypotheses=tuple(hyps),
        )


def with_error_bars(checks: Sequence[Check], companion: Sequence[Check], how: str) -> list[Check]:
    """`checks` with numerical error bars from the same checks run on a companion solve
    (`simulate(…, global_error=True)`'s `global_error.companion`, tolerances 10× tighter).

    Rows pair up by claim and source (in order). For a row the kit judged with a margin
    (`Bound`, `Near`), the error bar is |Δ measured| + |Δ bound| between the two runs; a
    `holds` or `fails` whose margin lies inside it becomes `undecided (numerical)`. For a
    row judged with a tolerance the toolkit chose (`Check.compare` with `critical` from
    `flips_at(…, default=…)`), each flip point gets the error bar |Δ flip point| (shown
    as '± …' in the critical text); a row whose default tolerance lies within that error
    of its flip point, or whose verdict differs on the companion, becomes `undecided
    (numerical)`. `how` names the companion ('companion solve at rtol/10'). Other rows
    are returned unchanged."""
    by_key: dict[tuple[str, str], list[Check]] = {}
    for c in companion:  # rows with the same claim pair up in order
        by_key.setdefault((c.claim, c.source), []).append(c)
    out = []
    for c in checks:
        twins = by_key.get((c.claim, c.source))
        other = twins.pop(0) if twins else None
        if other is None:
            out.append(c)
        elif c.kind == "limit":
            out.append(_limit_error_bars(c, other, how))
        elif c.margin is None:
            out.append(_tolerance_error_bars(c, other, how))
        else:
            out.append(_margin_error_bars(c, other, how))
    return out


def _margin_error_bars(c: Check, other: Check, how: str) -> Check:
    """`with_error_bars` for a row judged with a margin (`Bound`, `Near`)."""
    try:
        err = abs(float(c.values["measured"]) - float(other.values["measured"]))
        err += abs(float(c.values.get("bound", 0.0)) - float(other.values.get("bound", 0.0)))
    except (KeyError, TypeError, ValueError):
        return _same_verdict(c, other, how)
    if not math.isfinite(err) or c.margin is None:
        return _same_verdict(c, other, how)
    values = c.values | {"error": err, "error_how": how}
    verdict, reason = c.verdict, c.reason
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


def _limit_error_bars(c: Check, other: Check, how: str) -> Check:
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
    err = max(diffs)
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


def _tolerance_error_bars(c: Check, other: Check, how: str) -> Check:
    """`with_error_bars` for a row judged with the toolkit's tolerances (see there)."""
    twin_flips = {f.name: f for f in other.critical if isinstance(f, Flip)}
    critical, errors, inside = [], {}, []
    for f in c.critical:
        g = twin_flips.get(f.name) if isinstance(f, Flip) else None
        if not isinstance(f, Flip) or g is None or not math.isfinite(f.value + g.value):
            critical.append(f)
            continue
        err = abs(f.value - g.value)
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
