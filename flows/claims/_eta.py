"""Claims measured on gradient descent or SGD, checked for convergence in the step size.

GD with rate η stands in for the flow only where its answer no longer depends on η: every
such claim is measured at η and at η/4, and its verdict is `holds` or `fails` only when the
two agree; otherwise it is `not applicable` with the reason "not converged in η" and both
measurements.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from ._checks import Check

__all__ = ["ETA_FACTOR", "eta_checked", "merge_eta"]

#: The refinement: every GD/SGD claim is rerun at η / ETA_FACTOR.
ETA_FACTOR = 4.0


def eta_checked(
    claim: str,
    source: str,
    *,
    eta: float,
    measure: Callable[[float], tuple[bool, str, dict[str, Any]]],
    predicted: str,
    assumptions: str = "",
) -> Check:
    """A GD/SGD claim measured at `eta` and `eta / ETA_FACTOR`.

    **Arguments:** `measure(η)` runs the method at rate η and returns (whether the claim
    holds, the measured value in words, numbers for the results file).

    **Returns:** a `Check` whose verdict is the common one when both rates agree, and
    `not applicable` ("not converged in η", with both measurements) when they do not.
    """
    fine = eta / ETA_FACTOR
    h1, m1, v1 = measure(eta)
    h2, m2, v2 = measure(fine)
    values = {"eta": eta, "eta_fine": fine, "at_eta": v1, "at_eta_fine": v2}
    measured = f"η = {eta:g}: {m1}; η = {fine:g}: {m2}"
    if bool(h1) != bool(h2):
        return Check.not_applicable(
            claim,
            source,
            f"not converged in η: {'holds' if h1 else 'fails'} at η = {eta:g} but "
            f"{'holds' if h2 else 'fails'} at η = {fine:g} ({measured}); refine η further or "
            "use the exact flow",
            predicted=predicted,
            measured=measured,
            values=values,
        )
    return Check.compare(
        claim,
        source,
        holds=bool(h2),
        predicted=predicted,
        measured=measured,
        assumptions=(assumptions + "; " if assumptions else "")
        + f"same verdict at η and η/{ETA_FACTOR:g}",
        values=values,
    )


def merge_eta(coarse: list[Check], fine: list[Check], eta: float) -> list[Check]:
    """Checks of the same claims measured on a GD/SGD run at `eta` (`coarse`) and at
    `eta / ETA_FACTOR` (`fine`), merged claim by claim: the verdict stands where both agree
    (measured values of both shown), and is `not applicable` ("not converged in η") where
    they differ. Claims found in only one list keep that list's check, marked as such."""
    by_claim = {c.claim: c for c in fine}
    out = []
    eta_fine = eta / ETA_FACTOR
    for c in coarse:
        f = by_claim.pop(c.claim, None)
        if f is None:
            out.append(dataclasses.replace(c, reason=_join(c.reason, f"η = {eta:g} only")))
            continue
        measured = f"η = {eta:g}: {c.measured}; η = {eta_fine:g}: {f.measured}"
        values = {"at_eta": c.values, "at_eta_fine": f.values, "eta": eta}
        if c.verdict == f.verdict:
            out.append(
                dataclasses.replace(
                    f,
                    measured=measured,
                    values=values,
                    assumptions=_join(f.assumptions, f"same verdict at η and η/{ETA_FACTOR:g}"),
                )
            )
        else:
            out.append(
                Check.not_applicable(
                    c.claim,
                    c.source,
                    f"not converged in η: {c.verdict} at η = {eta:g} but {f.verdict} at "
                    f"η = {eta_fine:g}; refine η further or use the exact flow",
                    predicted=f.predicted,
                    measured=measured,
                    values=values,
                )
            )
    for f in by_claim.values():
        out.append(dataclasses.replace(f, reason=_join(f.reason, f"η = {eta_fine:g} only")))
    return out


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b
