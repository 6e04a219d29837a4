"""`Limit`: "→ L as m → ∞", judged on the literal value at the largest size and on the
fitted rate with its confidence interval."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from .._errors import ConfigError
from ._checks import (
    FAILS,
    HOLDS,
    NOT_APPLICABLE,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    Check,
)
from ._estimates import power_law_fit
from ._parts import (
    Hypothesis,
    _evaluate_hypotheses,
    _outside,
)

#: A limit claim needs at least this many widths and seeds per width.
MIN_WIDTHS, MIN_SEEDS = 4, 3


@dataclasses.dataclass(frozen=True)
class Limit:
    """'quantity → `limit` as m → ∞', read one way for every such claim.

    `values[i, j]` is the quantity at width `widths[i]` and seed j — or, 1-D, one run per
    width (no seeds: the interval then rests on the scatter about the fit alone).
    `variable` names the asymptotic variable (m, 1/α, t, 1/η, …: `widths` are its values,
    each > 0, growing toward the limit).

    Shown: the literal distance |q − limit| at the largest value (seed mean ± sd, and
    whether it is within `tolerance` there), and the fitted rate |q − limit| ∝ m^p with a
    confidence interval.

    **Rule:** holds when the whole interval of p lies below 0 (the distance decays), fails
    when it lies at or above 0, `undecided (finite size)` when it contains 0; with fewer
    than `MIN_WIDTHS` values (× `MIN_SEEDS` seeds, when there are seeds) the claim is not
    applicable. The literal value does not decide (the statement is about m → ∞), but it
    is reported.

    `errors` (optional, shaped like `values`): each value's numerical error bar. A
    distance not larger than its error bar, or an error not estimated (NaN), makes the row
    `undecided (numerical)`: a rate fitted through numbers smaller than their error is no
    result."""

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
    variable: str = "m"
    errors: np.ndarray | None = None

    def _rate_verdict(self, hyps, dist, p: float, plo: float, phi: float):
        """(verdict, reasons) from the fitted rate m^p and its 95 % CI [plo, phi]: outside
        the hypothesis first, then at the limit everywhere, no rate, the rate bound's rule
        or the plain limit's (holds when the CI lies below 0)."""
        reasons = []
        outside = _outside(hyps)
        if outside:
            verdict = OUTSIDE_HYPOTHESIS
            reasons.append(f"outside the hypothesis: {outside}")
        elif not np.any(dist > 0):
            verdict = HOLDS
            reasons.append("at the limit at every width")
        elif not math.isfinite(p):
            verdict = NOT_APPLICABLE
            reasons.append("too few nonzero distances to fit a rate")
        elif self.rate_bound:
            ps = float(self.predicted_exponent)  # type: ignore[arg-type]
            if plo > ps or plo >= 0:
                verdict = FAILS
                reasons.append(
                    f"the distance decays slower than the claimed {self.variable}^{ps:.3g} (the "
                    "whole 95% CI "
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
            more = "widths" if self.variable == "m" else f"values of {self.variable}"
            reasons.append(
                f"the rate's confidence interval contains 0: more or larger {more} would decide"
            )
        return verdict, reasons

    def judge(self) -> Check:
        hyps = _evaluate_hypotheses(self.claim, self.hypotheses)
        if self.rate_bound and self.predicted_exponent is None:
            raise ConfigError(
                f"claim {self.claim!r}: rate_bound needs predicted_exponent (the paper's p* in "
                "|q − L| ≤ C m^p*)"
            )
        x = self.variable
        v = np.asarray(self.values, dtype=float)
        seeded = v.ndim > 1
        if not seeded:
            v = v[:, None]
        widths = [float(m) for m in self.widths]
        if v.shape[0] != len(widths):
            raise ConfigError(
                f"claim {self.claim!r}: values has {v.shape[0]} rows for {len(widths)} widths"
            )
        if not all(w > 0 and math.isfinite(w) for w in widths):
            raise ConfigError(
                f"claim {self.claim!r}: field 'widths': the values of {x} must be finite and "
                f"> 0 (a power law in {x} is fitted); got {widths}"
            )
        err = None
        if self.errors is not None:
            err = np.asarray(self.errors, dtype=float).reshape(v.shape)
        dist = np.abs(v - self.limit)
        top = int(np.argmax(widths))
        lit, sd = float(np.nanmean(dist[top])), float(np.nanstd(dist[top]))
        pred = f"|q − L| decays in {x}" + (
            f" (paper: ∝ {x}^{self.predicted_exponent:.3g})"
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

        sizes = "widths" if x == "m" else f"values of {x}"

        def not_applicable(why: str) -> Check:
            shape = f"{len(widths)} {sizes}" + (f" × {v.shape[1]} seeds" if seeded else "")
            return Check(self.claim, self.source, pred, shape, NOT_APPLICABLE, reason=why,
                         values=base, kind="limit", hypotheses=tuple(hyps))  # fmt: skip

        if len(widths) < MIN_WIDTHS or (seeded and v.shape[1] < MIN_SEEDS):
            return not_applicable(
                f"a limit claim needs ≥ {MIN_WIDTHS} {sizes}"
                + (f" × ≥ {MIN_SEEDS} seeds" if seeded else "")
                + " for a rate with a confidence interval"
            )
        if not np.all(np.isfinite(dist)):
            return not_applicable("a run did not reach the time the quantity is taken at")
        if err is not None and not _outside(hyps):  # outside the hypothesis says so first
            unresolved = ~(dist > err)  # NaN errors (not estimated) count as unresolved
            if np.any(unresolved):
                i, j = (int(k) for k in np.argwhere(unresolved)[0])
                return Check(
                    self.claim, self.source, pred,
                    f"|q − L| = {dist[i, j]:.3g} ± {err[i, j]:.2g} at {x} = {widths[i]:g}",
                    UNDECIDED,
                    reason=f"{int(unresolved.sum())} of {unresolved.size} distances are not "
                    f"larger than their numerical error bar (first at {x} = {widths[i]:g}): a "
                    "rate fitted through them is no result; decide with smaller errors "
                    "(a tighter rtol)",
                    values=base | {"unresolved_points": int(unresolved.sum())},
                    kind="limit", hypotheses=tuple(hyps),
                )  # fmt: skip
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
            f"|q − L| = {lit:.3g} ± {sd:.2g} at {x} = {widths[top]:g}{within}; "
            f"∝ {x}^{p:.3g} (95% CI [{plo:.3g}, {phi:.3g}])"
        )
        verdict, reasons = self._rate_verdict(hyps, dist, p, plo, phi)
        if not _outside(hyps) and not np.any(dist > 0):
            every = "every width and seed" if x == "m" else f"every value of {x}"
            measured = f"|q − L| = 0 at {every} ({x} = {widths[0]:g} … {widths[top]:g})"
        reasons.append(
            f"rule: a limit {x} → ∞ holds when the fitted rate's 95% CI lies below 0"
            + (
                f" and reaches the claimed rate {x}^{self.predicted_exponent:.3g} (fails when "
                "the whole CI lies above it)"
                if self.rate_bound
                else ""
            )
            + f"; the literal value at the largest {x} is shown, not judged"
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
