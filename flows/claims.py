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
a confidence interval, over ≥ 4 widths × ≥ 3 seeds), `Existential` ("can happen").
A universal claim ("for every t") is a `Bound` on the worst value over the set, with
`over` naming the set.

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
from ._errors import ConfigError

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
    "power_law_fit",
    "richardson",
    "agrees",
    "limit_in_time",
    "ORDER_SLACK",
    "with_error_bars",
    "MIN_WIDTHS",
    "MIN_SEEDS",
    "Reference",
    "Trend",
    "annotate",
]

_INF = math.inf


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


@dataclasses.dataclass(frozen=True)
class Measured:
    """A measured number with its numerical error bar.

    `error` is an estimate of |measured − exact| (the flow's global error carried to this
    quantity, or the Richardson error of an η → 0 extrapolation); NaN when not estimated,
    which the verdict then says. `how` names where the error bar comes from."""

    value: float
    error: float = math.nan
    how: str = ""

    def __post_init__(self):
        object.__setattr__(self, "value", float(self.value))
        object.__setattr__(self, "error", abs(float(self.error)))

    @property
    def has_error(self) -> bool:
        return math.isfinite(self.error)

    def text(self, digits: int = 3) -> str:
        if not self.has_error:
            return _fmt(self.value, digits)
        return f"{_fmt(self.value, digits)} ± {self.error:.2g}"


@dataclasses.dataclass(frozen=True)
class Constant:
    """An unspecified constant of a claim ('≲' hides a C; a δ′; a β): its documented
    `default` and the `admissible` range [lo, hi] the paper allows (hi may be inf).

    `name` is the keyword the claim's bound callable takes (a Python identifier:
    'C', 'delta_prime'); `symbol` how the paper writes it ('δ′'; default: `name`)."""

    name: str
    default: float
    admissible: tuple[float, float] | None = None
    meaning: str = ""
    symbol: str = ""

    @property
    def label(self) -> str:
        return self.symbol or self.name


@dataclasses.dataclass(frozen=True)
class Hypothesis:
    """A hypothesis of the theorem, evaluated on the run: `holds` is a bool or a
    zero-argument callable returning one; `detail` says the measured value ('α = 0.4,
    needs α > 1/2'), shown when it fails."""

    name: str
    holds: bool | Callable[[], bool]
    detail: str = ""


@dataclasses.dataclass(frozen=True)
class Critical:
    """Where the verdict of a claim flips in one constant (the others at their defaults).

    `holds_for`: the admissible values where the claim holds, as text ('C ≥ 0.79',
    'every admissible δ′', 'no admissible C'); `value` the flip point (NaN when none);
    `vacuous_for`: where the bound becomes vacuous ('C ≥ 11.4'), '' when nowhere."""

    name: str
    value: float
    holds_for: str
    vacuous_for: str = ""

    def text(self) -> str:
        out = f"holds for {self.holds_for}"
        return out + (f"; vacuous for {self.vacuous_for}" if self.vacuous_for else "")


def _grid(lo: float, hi: float, n: int = 241) -> np.ndarray:
    """Points spanning [lo, hi]: log-spaced over positive ranges wider than two decades
    (an infinite end is cut at 1e12, a zero end at 1e-12), else linear."""
    a = lo if lo > 0 else 1e-12
    b = hi if math.isfinite(hi) else 1e12
    if lo >= 0 and b / a > 100:
        pts = np.geomspace(a, b, n)
        return np.unique(np.concatenate([[lo], pts] if lo == 0 else [pts]))
    lo_ = lo if math.isfinite(lo) else -1e12
    return np.linspace(lo_, b, n)


def _sign_changes(f: Callable[[float], float], lo: float, hi: float) -> list[float]:
    """The points in [lo, hi] where f changes sign (grid, then bisection)."""
    xs = _grid(lo, hi)
    vals = np.array([f(float(x)) for x in xs])
    ok = np.isfinite(vals)
    xs, vals = xs[ok], vals[ok]
    out = []
    for i in range(len(xs) - 1):
        if (vals[i] >= 0) != (vals[i + 1] >= 0):
            a, b = float(xs[i]), float(xs[i + 1])
            fa = vals[i] >= 0
            for _ in range(80):
                mid = 0.5 * (a + b)
                if (f(mid) >= 0) == fa:
                    a = mid
                else:
                    b = mid
            out.append(0.5 * (a + b))
    return out


def _region(f: Callable[[float], float], lo: float, hi: float, name: str) -> tuple[str, float]:
    """Where f ≥ 0 on [lo, hi], as text, and the first flip point (NaN when none)."""
    cuts = _sign_changes(f, lo, hi)
    xs = _grid(lo, hi)
    if not cuts:
        probe = float(xs[len(xs) // 2])
        return ("every admissible " + name if f(probe) >= 0 else "no admissible " + name), math.nan
    if len(cuts) == 1:
        x = cuts[0]
        above = f(float(xs[-1])) >= 0
        return (f"{name} ≥ {_fmt(x)}" if above else f"{name} ≤ {_fmt(x)}"), x
    return f"{name} in {len(cuts) + 1} pieces split at " + ", ".join(_fmt(x) for x in cuts), cuts[0]


def _check_constants(claim: str, constants: Sequence[Constant]) -> None:
    for c in constants:
        if not c.name.isidentifier():
            raise ConfigError(
                f"claim {claim!r}: constant name {c.name!r} is not a Python identifier (the "
                "bound is called with it as a keyword); name it e.g. 'delta_prime' and give "
                f"symbol={c.name!r}"
            )
        if c.admissible is None:
            raise ConfigError(
                f"claim {claim!r}: constant {c.name!r} has no admissible range; give "
                f"Constant({c.name!r}, default={c.default}, admissible=(lo, hi)) with the "
                "values the paper allows (hi may be math.inf)"
            )
        lo, hi = c.admissible
        if not lo <= c.default <= hi:
            raise ConfigError(
                f"claim {claim!r}: constant {c.name!r} default {c.default} is outside its "
                f"admissible range [{lo}, {hi}]"
            )


def _evaluate_hypotheses(claim: str, hypotheses: Sequence[Hypothesis]) -> list[dict]:
    out = []
    for h in hypotheses:
        try:
            ok = h.holds() if callable(h.holds) else h.holds
        except Exception as e:  # noqa: BLE001 - a bug in the claim, reported as such
            raise ConfigError(
                f"claim {claim!r}: hypothesis {h.name!r} raised {type(e).__name__}: {e}; "
                "a hypothesis predicate must return True or False"
            ) from e
        out.append({"name": h.name, "holds": bool(ok), "detail": h.detail})
    return out


def _outside(hyps: list[dict]) -> str:
    bad = [h for h in hyps if not h["holds"]]
    return "; ".join(f"{h['name']}" + (f" ({h['detail']})" if h["detail"] else "") for h in bad)


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
    d = Measured(abs(measured.value - target), measured.error, measured.how)
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


def power_law_fit(x: Sequence[float], y: np.ndarray, level: float = 0.95) -> dict:
    """Least-squares fit of log y = p·log x + c over every (x, seed) point.

    `y` has shape (len(x), seeds). Returns the exponent `p`, its `level` confidence
    interval `ci` (Student t on the slope's standard error), and `n` points used."""
    from scipy import stats

    xs = np.asarray(x, dtype=float)
    ys = np.asarray(y, dtype=float)
    if ys.ndim == 1:
        ys = ys[:, None]
    xx = np.repeat(np.log(xs), ys.shape[1])
    yy = ys.reshape(-1)
    ok = np.isfinite(yy) & (yy > 0)
    xx, yy = xx[ok], np.log(yy[ok])
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
            values=base | {"exponent": p, "exponent_ci": [plo, phi]},
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

    For every check the kit judged with a margin (`Bound`, `Near`) and that the companion
    has too (same claim and source), the error bar is |Δ measured| + |Δ bound| between
    the two runs; a `holds` or `fails` whose margin lies inside it becomes `undecided
    (numerical)`. `how` names the companion ('companion solve at rtol/10'). Other checks
    are returned unchanged."""
    by_key: dict[tuple[str, str], list[Check]] = {}
    for c in companion:  # rows with the same claim pair up in order
        by_key.setdefault((c.claim, c.source), []).append(c)
    out = []
    for c in checks:
        twins = by_key.get((c.claim, c.source))
        other = twins.pop(0) if twins else None
        if c.margin is None or other is None or "measured" not in c.values:
            out.append(c)
            continue
        try:
            err = abs(float(c.values["measured"]) - float(other.values["measured"]))
            err += abs(float(c.values.get("bound", 0.0)) - float(other.values.get("bound", 0.0)))
        except (TypeError, ValueError):
            out.append(c)
            continue
        if not math.isfinite(err):
            out.append(c)
            continue
        values = c.values | {"error": err, "error_how": how}
        verdict, reason = c.verdict, c.reason
        if verdict in (HOLDS, FAILS) and abs(c.margin) <= err:
            verdict = UNDECIDED
            reason = (
                f"the margin {c.margin:.2g} is inside the numerical error ±{err:.2g} ({how}); "
                f"decide with an error below {abs(c.margin):.2g} (a tighter rtol)"
                + (f"; {reason}" if reason else "")
            )
        out.append(dataclasses.replace(c, verdict=verdict, reason=reason, error=err, values=values))
    return out
