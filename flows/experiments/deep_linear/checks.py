"""The claims of Saxe, McClelland & Ganguli (2014) confronted with runs, one function each.

Every function returns a `Check` (claim, source, predicted, measured, verdict). Tolerances
are derived from the solve's rtol with one stated factor (`Config.tol_factor`, default
100 — the factor of the engine's own accuracy certificate): the exact flow's relative
error stays a few rtol here (measured 3–5·rtol for rtol from 1e-10 to 1e-6), since a
relative perturbation of a mode strength does not grow along u̇ = 2u(s − u)
(d/dt (δu/u) = −2u·δu/u).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Check, Trajectory
from flows.claims import Flip, flips_at

from .observables import Theory, crossing_times, mode_strengths

__all__ = [
    "SOURCE",
    "LOSS_FLOOR",
    "check_certificate",
    "check_closed_form",
    "check_half_times",
    "check_balancedness",
    "check_mode_order",
    "check_random_init",
    "half_time_tolerance",
]

SOURCE = "Saxe et al. 2014"
#: Claim (a) compares the loss relative to max(L̂(t), LOSS_FLOOR·L̂(0)): pointwise relative
#: error wherever the loss curve carries its shape, not a ratio of two round-offs once a
#: noiseless run has fitted everything (L̂ → 0).
LOSS_FLOOR = 1e-3
#: The accuracy certificate's bound, as a multiple of rtol·L(0) (as in `flows.simulate`).
CERTIFICATE_FACTOR = 100.0
#: Σ_xx may differ from I by this much (entrywise) for the closed forms to apply.
WHITENING_TOL = 1e-10


def _fmt(values, digits: int = 5) -> str:
    return "[" + ", ".join(f"{v:.{digits}g}" if math.isfinite(v) else "—" for v in values) + "]"


def _whitened(theory: Theory) -> str | None:
    if theory.whitening_error > WHITENING_TOL:
        return (
            f"inputs are not whitened: max |Σ_xx − I| = {theory.whitening_error:.2g} > "
            f"{WHITENING_TOL:g} (the closed forms assume Σ_xx = I)"
        )
    return None


def check_certificate(traj: Trajectory, rtol: float, label: str) -> Check:
    """Accuracy certificate of a run: the energy identity L(0) − L(t) = ∫‖∇L‖² (observable
    `energy_residual`) and a non-increasing loss, both within `CERTIFICATE_FACTOR`·rtol·L(0)
    (the bound of `flows.simulate`'s own certificate)."""
    loss = np.asarray(traj.loss, float)
    residual = float(np.max(traj.observables["energy_residual"]))
    rise = max(float(np.max(np.diff(loss))), 0.0) if len(loss) > 1 else 0.0
    bound = CERTIFICATE_FACTOR * rtol * abs(float(loss[0]))
    return Check.compare(
        f"{label}: energy identity L(0) − L(t) = ∫‖∇L‖², loss non-increasing",
        "gradient flow",
        holds=residual <= bound and rise <= bound,
        predicted=f"residual, rise ≤ {CERTIFICATE_FACTOR:g}·rtol·L(0) = {bound:.2e}",
        measured=f"residual {residual:.2e}, rise {rise:.2e}",
        values={"max_residual": residual, "max_rise": rise, "bound": bound},
    )


def check_closed_form(traj: Trajectory, theory: Theory, rtol: float, tol_factor: float) -> Check:
    """(a) From the balanced, aligned init the exact flow *is* the closed form: W₂W₁(t),
    W₁(t), W₂(t) and L(t) agree with `reduced.deep_linear` at every save time.

    Measured: max over save times of ‖W₂W₁ − Ŵ‖_F/‖Ŵ‖_F, of the same for W₁ and W₂ (hidden
    basis R = I), and of |L − L̂|/max(L̂, `LOSS_FLOOR`·L̂(0)). Holds when all are
    ≤ `tol_factor`·rtol.
    """
    claim = "balanced aligned init: W₂W₁(t), W₁(t), W₂(t), L(t) = closed form"
    source = f"{SOURCE}, exact solution"
    tol = tol_factor * rtol
    why = _whitened(theory)
    if why:
        return Check.not_applicable(claim, source, why)
    if len(traj.param_times) < 2:
        return Check.not_applicable(
            claim, source, "θ was not saved along the run (save_params='all' is needed)"
        )
    pt = np.asarray(traj.param_times)
    w1, w2 = np.asarray(traj.params["W1"]), np.asarray(traj.params["W2"])
    p1, p2 = theory.weights(pt)
    prod, pred = np.einsum("toh,thi->toi", w2, w1), theory.product(pt)

    def rel(a, b):
        return float(np.max(np.linalg.norm(a - b, axis=(1, 2)) / np.linalg.norm(b, axis=(1, 2))))

    e_prod, e_w1, e_w2 = rel(prod, pred), rel(w1, p1), rel(w2, p2)
    loss_hat = theory.loss(traj.times)
    denom = np.maximum(loss_hat, LOSS_FLOOR * loss_hat[0])
    e_loss = float(np.max(np.abs(np.asarray(traj.loss) - loss_hat) / denom))
    worst = max(e_prod, e_w1, e_w2, e_loss)
    check = Check.compare(
        claim,
        source,
        holds=worst <= tol,
        predicted=f"max relative error ≤ {tol_factor:g}·rtol = {tol:.2g}",
        measured=f"W₂W₁ {e_prod:.2g}, W₁ {e_w1:.2g}, W₂ {e_w2:.2g}, L {e_loss:.2g}",
        assumptions=f"whitened inputs (max |Σ_xx − I| = {theory.whitening_error:.1g}); "
        f"u₀ = {_fmt(theory.u0, 3)}; {len(pt)} save times",
        values={
            "product_error": e_prod,
            "W1_error": e_w1,
            "W2_error": e_w2,
            "loss_error": e_loss,
            "tolerance": tol,
        },
        reason=f"loss error relative to max(L̂(t), {LOSS_FLOOR:g}·L̂(0)); the flow's "
        "measured error is a few rtol, the tolerance allows tol_factor·rtol",
    )
    flip = flips_at("tol_factor", worst / rtol, at_least=True, default=tol_factor)
    return dataclasses.replace(check, critical=(flip,))


def half_time_tolerance(s, rtol: float, tol_factor: float, spacing: float) -> np.ndarray:
    """Allowed |t½ measured − t½ predicted| per mode: a relative error ε = `tol_factor`·rtol
    of u at u = s/2 shifts the crossing by ε·u/u̇ = ε/s; linear interpolation between saves
    `spacing` apart misplaces the crossing of a logistic by at most s²·spacing³/3 (its
    inflection point; measured worst case over grid offsets ≈ s²·spacing³/31)."""
    s = np.asarray(s, float)
    return tol_factor * rtol / s + s**2 * spacing**3 / 3


def check_half_times(traj: Trajectory, theory: Theory, rtol: float, tol_factor: float) -> Check:
    """(b) Each mode reaches half its singular value at t(½) = (1/2s) ln((s − u₀)/u₀)
    (`reduced.deep_linear.mode_time`), within `half_time_tolerance`."""
    claim = "mode α reaches s_α/2 at t½ = (1/2s_α) ln((s_α − u₀)/u₀)"
    source = f"{SOURCE}, mode learning time"
    why = _whitened(theory)
    if why:
        return Check.not_applicable(claim, source, why)
    s, pred = theory.s, theory.half_times()
    meas = crossing_times(traj.times, mode_strengths(traj), s / 2)
    spacing = float(np.max(np.diff(traj.times)))
    tol = half_time_tolerance(s, rtol, tol_factor, spacing)
    t_end = float(traj.times[-1])
    usable = np.isfinite(pred) & (pred + tol < t_end)
    if not usable.any():
        reason = (
            f"no mode has u₀ < s/2 and a predicted t½ before the end of the run (t = {t_end:g})"
        )
        return Check.not_applicable(claim, source, reason, predicted=f"t½ = {_fmt(pred)}")
    dev = np.abs(meas - pred)
    ratio = np.where(usable, dev / tol, 0.0)
    worst = float(np.max(np.where(np.isfinite(ratio), ratio, np.inf)))
    skipped = [str(a + 1) for a in np.flatnonzero(~usable)]
    check = Check.compare(
        claim,
        source,
        holds=worst <= 1.0,
        predicted=f"t½ = {_fmt(pred)} ± {_fmt(tol, 2)}",
        measured=f"t½ = {_fmt(meas)}; max |Δt|/tol = {worst:.2g}",
        assumptions=f"balanced aligned init, u₀ = {_fmt(theory.u0, 3)}",
        values={
            "predicted": pred.tolist(),
            "measured": meas.tolist(),
            "tolerance": tol.tolist(),
            "max_dev_over_tol": worst,
        },
        reason=(
            "tolerance: tol_factor·rtol/s (solver) + s²Δ³/3 (linear interpolation between "
            f"saves Δ = {spacing:.3g} apart)"
            + (f"; modes {', '.join(skipped)} not judged (not reached by t1)" if skipped else "")
        ),
    )
    # the solver part of the tolerance scales with tol_factor; the interpolation part not
    interp = tol - tol_factor * rtol / s
    need = np.where(usable, (dev - interp) * s / rtol, -np.inf)
    flip = flips_at("tol_factor", max(float(np.max(need)), 0.0), at_least=True, default=tol_factor)
    return dataclasses.replace(check, critical=(flip,))


def check_balancedness(runs: dict[str, Trajectory], rtol: float, tol_factor: float) -> Check:
    """(c) W₁W₁ᵀ − W₂ᵀW₂ is conserved by the flow from any init.

    Measured per run: max_t ‖B(t) − B(0)‖_max (observable `balance_drift`). A relative
    weight error ε changes the quadratic B by at most 2ε‖θ‖², so with ε =
    `tol_factor`·rtol the bound is 2·`tol_factor`·rtol·max_t ‖θ(t)‖²_F. The balanced run
    keeps B = 0 almost exactly (its RK stages stay in the balanced family); the random run,
    with B(0) ≠ 0, is the informative one.
    """
    claim = "W₁W₁ᵀ − W₂ᵀW₂ conserved along the flow (any init)"
    source = f"{SOURCE}, conservation law"
    parts, values, ok, need = [], {}, True, 0.0
    for label, traj in runs.items():
        drift = float(np.max(traj.observables["balance_drift"]))
        scale = float(np.max(traj.observables["weight_norm_sq"]))
        tol = 2 * tol_factor * rtol * scale
        ok &= drift <= tol
        need = max(need, drift / (2 * rtol * scale))
        parts.append(f"{label} {drift:.2g} (tol {tol:.2g})")
        values[f"{label}_drift"] = drift
        values[f"{label}_tolerance"] = tol
    return Check.compare(
        claim,
        source,
        holds=ok,
        predicted=f"max |ΔB| ≤ 2·{tol_factor:g}·rtol·max‖θ‖²",
        measured="; ".join(parts),
        values=values,
        reason="entrywise drift of B = W₁W₁ᵀ − W₂ᵀW₂ from its initial value",
        critical=(flips_at("tol_factor", need, at_least=True, default=tol_factor),),
    )


def check_mode_order(s, t_half, u0) -> Check:
    """(d) Stage-like learning: with equal initial strengths, modes are learned one after
    another in order of decreasing singular value (t½ increasing as s decreases).

    Modes not reached (NaN) count as learned after every reached one; at least two modes
    must be reached.
    """
    claim = "stage-like learning: modes learned in order of decreasing s_α"
    source = f"{SOURCE}, stage-like transitions"
    s, t, u0 = (np.asarray(v, float) for v in (s, t_half, u0))
    u0 = np.broadcast_to(u0, s.shape)
    if not np.allclose(u0, u0[0], rtol=1e-12, atol=0):
        return Check.not_applicable(
            claim, source, "modes start at unequal strengths u₀ (the order then also depends on u₀)"
        )
    if np.sum(np.isfinite(t)) < 2:
        return Check.not_applicable(claim, source, "fewer than two modes reached s/2 in the run")
    order = np.argsort(-s)  # decreasing s
    reached = np.isfinite(t[order])
    fin = t[order][reached]
    # the reached modes are the largest ones, and their t½ increase strictly
    holds = bool(np.all(reached[: len(fin)]) and np.all(np.diff(fin) > 0))
    learned = np.argsort(np.where(np.isfinite(t), t, np.inf), kind="stable") + 1
    gaps = np.diff(fin)
    return Check.compare(
        claim,
        source,
        holds=holds,
        predicted=f"order {[int(a) + 1 for a in order]} (by s = {_fmt(s[order], 3)})",
        measured=f"order {learned.tolist()}; t½ = {_fmt(t)}",
        assumptions=f"equal initial strengths u₀ = {u0[0]:.3g}",
        values={"t_half": t.tolist(), "min_gap": float(np.min(gaps)) if len(gaps) else "nan"},
    )


def check_random_init(
    traj: Trajectory,
    theory: Theory,
    u0: float,
    factor: float,
    small_init: float,
    u_eff=None,
) -> Check:
    """(e) From a small random (unbalanced, unaligned) init the modes go through the same
    sigmoidal transitions, each reaching s_α/2 within a factor `factor` of the balanced
    prediction t½(s_α, u0) (u0: the init's expected effective strength).

    Applies when the init is small, u0 ≤ `small_init`·min s_α; a mode whose factor·t½ lies
    beyond the run is not judged. `u_eff` (`observables.effective_strength`), if given,
    adds the sharper prediction t½(s_α, u_eff,α) to the measured column.
    """
    claim = f"small random init: same sigmoidal transitions, t½ within ×{factor:g} of t½(s, u₀)"
    source = f"{SOURCE}, random initial conditions"
    s = theory.s
    why = _whitened(theory)
    if why:
        return Check.not_applicable(claim, source, why)
    if u0 > small_init * float(np.min(s)):
        return Check.not_applicable(
            claim,
            source,
            f"the init is not small: u₀ = {u0:.3g} > {small_init:g}·min s = "
            f"{small_init * float(np.min(s)):.3g}",
        )
    pred = theory.half_times(np.full(theory.k, u0))
    meas = crossing_times(traj.times, mode_strengths(traj), s / 2)
    t_end = float(traj.times[-1])
    usable = np.isfinite(pred) & (factor * pred <= t_end)
    if not usable.any():
        return Check.not_applicable(
            claim, source, f"the run ends (t = {t_end:g}) before ×{factor:g} every predicted t½"
        )
    ratio = meas / pred
    inside = (ratio >= 1 / factor) & (ratio <= factor)  # NaN (not reached) → False
    holds = bool(np.all(inside[usable]))
    sharp = ""
    values = {"predicted": pred.tolist(), "measured": meas.tolist(), "ratio": ratio.tolist()}
    if u_eff is not None:
        pred_eff = theory.half_times(np.asarray(u_eff, float))
        values["predicted_from_u_eff"] = pred_eff.tolist()
        sharp = f"; vs t½(s, u_eff): {_fmt(meas / pred_eff, 3)}"
    final = mode_strengths(traj)[-1] / s
    values["final_strength_over_s"] = final.tolist()
    # where the verdict flips in the toolkit's factor f: mode i is checked while
    # f ≤ t_end/t½_i and inside while f ≥ max(ratio_i, 1/ratio_i), so the verdict only
    # gets easier as f grows (monotone) until no mode is checked (not applicable)
    reach_i = np.where(np.isfinite(pred) & (pred > 0), t_end / pred, -np.inf)
    with np.errstate(divide="ignore", invalid="ignore"):
        need_i = np.where(ratio > 0, np.maximum(ratio, 1 / ratio), np.inf)

    def holds_at(f: float) -> bool:
        checked = f <= reach_i
        return bool(checked.any() and np.all(need_i[checked] <= f))

    candidates = sorted(x for x in np.r_[need_i, reach_i * (1 + 1e-12)] if math.isfinite(x))
    flip = next((f for f in candidates if f >= 1 and holds_at(f)), math.inf)
    reach = float(np.max(reach_i))
    critical = (
        Flip(
            f"holds for {flip:.4g} ≤ factor ≤ {reach:.4g} (above: not applicable, the run "
            "ends before factor·t½ of every mode)",
            "factor",
            flip,
            True,
            factor,
        )
        if flip <= reach
        else "holds for no factor",
    )
    return Check.compare(
        claim,
        source,
        holds=holds,
        predicted=f"t½ = {_fmt(pred, 4)}, ratio in [{1 / factor:.3g}, {factor:g}]",
        measured=f"ratio {_fmt(ratio, 3)}{sharp}; u(t1)/s = {_fmt(final, 3)}",
        assumptions=f"weights i.i.d. N(0, 2u₀/h), u₀ = {u0:.3g} (unbalanced, unaligned)",
        values=values,
        reason=(
            "the factor covers the spread of a random init's effective strength "
            "u_eff = ¼‖W₁v + W₂ᵀu‖² (a χ² with h degrees of freedom, mean u₀) through "
            "t½ ∝ ln(s/u_eff), and the coupling of modes the balanced solution does not have"
        ),
        critical=critical,
    )
