"""The multi-stage paper's claims on the plateau, up to T_p: Theorem 1 (the linearized
flow tracks the full flow until T₁ ≥ T_p; the loss barely moves), Proposition 2
(K/K′ → 1/2) and Corollary 2 (Σa²/Σ(w¹)² → 1, no condensation), one function each."""

from __future__ import annotations

import math

import numpy as np

from flows import Check, average_decay_rate, first_crossing
from flows.claims import Bound, Measured, Near
from reduced import multistage as ms

from .config import LESSSIM_C, SOURCE
from .main_run import (
    MainRun,
    cfg_d,
    fmt_reached,
    lesssim_c,
    tolerance,
)

__all__ = [
    "linearization_time",
    "check_linearization",
    "check_plateau_rate",
    "check_noncondensed",
    "check_K_ratio",
    "check_a2_over_u2",
    "check_condensation",
]


def linearization_time(r: MainRun) -> tuple[float, float, float, float]:
    """T₁ (eq. 26: first τ with q̂_max or r̂_max over its threshold), the τ where
    r_max/q_max reaches 0.1, and the two thresholds."""
    m, alpha, lam, tau, o = r.cfg.m, r.cfg.alpha, r.units.lam, r.tau, r.o
    q_thr, r_thr = ms.linearization_thresholds(m, alpha)
    t1_q = first_crossing(tau, o["q_max"] / lam, q_thr, below=False)
    t1_r = first_crossing(tau, o["r_max"] / lam, r_thr, below=False)
    T_1 = np.nanmin([t1_q, t1_r, np.inf])
    breakdown = first_crossing(tau, o["r_max"] / np.maximum(o["q_max"], 1e-300), 0.1, below=False)
    return T_1, breakdown, q_thr, r_thr


def check_linearization(r: MainRun) -> Check:
    """Theorem 1 (27): linearization holds through the plateau, T_p ≤ T₁."""
    T_p, tau = r.st["T_p"], r.tau
    T_1, breakdown, q_thr, r_thr = linearization_time(r)
    if T_p > tau[-1]:
        return Check.not_applicable(
            "T_p ≤ T₁ (linearized flow tracks the full flow)",
            f"{SOURCE} Thm 1 (27)",
            f"the run ends at τ = {tau[-1]:.3g} before T_p = {T_p:.3g}; increase t1",
        )
    return Check.compare(
        "T_p ≤ T₁ (linearized flow tracks the full flow)",
        f"{SOURCE} Thm 1 (27)",
        holds=T_1 >= T_p,
        predicted=f"T₁ ≥ T_p = {T_p:.4g}",
        measured=f"T₁ = {fmt_reached(T_1) if math.isfinite(T_1) else '> end'}; "
        f"r_max/q_max = 0.1 at τ = {fmt_reached(breakdown)}",
        assumptions=r.assumptions,
        values={
            "T_1": T_1,
            "T_p": T_p,
            "q_threshold": q_thr,
            "r_threshold": r_thr,
            "breakdown_tau": breakdown,
        },
        reason=f"T₁ = first τ with q̂_max ≥ {q_thr:.3g} or r̂_max ≥ {r_thr:.3g} (eq. 26)",
    )


def check_plateau_rate(r: MainRun) -> Check:
    """Theorem 1 (29): average loss decay rate on the plateau."""
    m, alpha, units, T_p = r.cfg.m, r.cfg.alpha, r.units, r.st["T_p"]
    rate_p = average_decay_rate(r.tau, r.o["loss"], 0.0, T_p) / (units.rate**2 / units.s2)
    bound = ms.theorem1_loss_rate_bound(m, alpha)
    return Bound(
        "plateau: |R(T_p) − R(0)| / T_p ≲ 1/(m^{2α₁−1} ln m)",
        f"{SOURCE} Thm 1 (29)",
        Measured(rate_p),
        lambda C: C * bound,
        constants=(lesssim_c(),),
        a_priori=(0.0, math.inf),
        predicted=f"≤ C × {bound:.3g} (C = {LESSSIM_C:g})",
        measured_text=f"{rate_p:.3g} (ratio {rate_p / bound:.3g})",
        assumptions=r.assumptions,
        values={"rate": rate_p, "bound": bound},
        reason="loss in units of ‖b‖²/s², time τ",
    ).judge()


def check_noncondensed(r: MainRun) -> Check:
    """Theorem 1 (28): the components orthogonal to E[f x] stay small up to T_p."""
    if r.traj.param_dims and cfg_d(r.traj) == 1:
        return Check.not_applicable(
            "max_{k,i≥2} |w_kⁱ(T_p)| ≲ max{m^{-α} ln m, m^{-3}(ln m)⁶}",
            f"{SOURCE} Thm 1 (28)",
            "d = 1: there are no directions orthogonal to E[f x] (checked on the "
            "d ≥ 2 sweep, row 'Thm 1 (28) … over the sweep')",
        )
    wp = r.at("w_perp_max", r.st["T_p"]) / r.units.lam
    bnd = ms.theorem1_noncondensed_bound(r.cfg.m, r.cfg.alpha)
    return Bound(
        "max_{k,i≥2} |w_kⁱ(T_p)| ≲ max{m^{-α} ln m, m^{-3}(ln m)⁶}",
        f"{SOURCE} Thm 1 (28)",
        Measured(wp),
        lambda C: C * bnd,
        constants=(lesssim_c(),),
        a_priori=(0.0, math.inf),
        predicted=f"≤ C × {bnd:.3g} (C = {LESSSIM_C:g})",
        values={"w_perp": wp, "bound": bnd},
    ).judge()


def check_K_ratio(r: MainRun) -> Check:
    """Proposition 2 at T_p."""
    T_p = r.st["T_p"]
    ratio = r.at("K", T_p) / r.at("Kp", T_p)
    return Near(
        "K/K′ → 1/2 at T_p",
        f"{SOURCE} Prop 2",
        Measured(ratio),
        0.5,
        tolerance(0.05),
        predicted="1/2 ± tol (tol = 0.05, finite-m tolerance)",
        measured_text=f"{ratio:.4f}",
        a_priori=(0.0, 1.0),  # |K| ≤ K′/2, so K/K′ ∈ [−1/2, 1/2]
        values={"K_over_Kp": ratio},
        reason=f"the paper's O(m^{{-(2α₁−1)}}(ln m)⁴) = "
        f"{ms.proposition2_ratio_error(r.cfg.m, r.cfg.alpha):.3g} at this m",
    ).judge()


def check_a2_over_u2(r: MainRun) -> Check:
    """Corollary 2 at T_p: Σa² / Σ(w¹)² → 1."""
    a2u2 = r.at("a2_over_u2", r.st["T_p"])
    return Near(
        "Σa² / Σ(w¹)² → 1 at T_p",
        f"{SOURCE} Cor 2",
        Measured(a2u2),
        1.0,
        tolerance(0.05),
        predicted="1 ± tol (tol = 0.05, finite-m tolerance)",
        measured_text=f"{a2u2:.4f}",
        values={"a2_over_u2": a2u2},
    ).judge()


def check_condensation(r: MainRun) -> Check:
    """Corollary 2 at T_p: condensation onto E[f x]."""
    if cfg_d(r.traj) == 1:
        return Check.not_applicable(
            "condensation Σ(w¹)²/Σ‖w‖² → 1 at T_p",
            f"{SOURCE} Cor 2",
            "d = 1: the ratio is identically 1 (checked on the d ≥ 2 sweep, row "
            "'condensation … over the sweep')",
        )
    cond = r.at("condensation", r.st["T_p"])
    bnd = ms.corollary2_condensation_bound(r.cfg.m, r.cfg.alpha)
    return Bound(
        "condensation Σ(w¹)²/Σ‖w‖² → 1 at T_p",
        f"{SOURCE} Cor 2",
        Measured(1.0 - cond),
        lambda C: C * bnd,
        constants=(lesssim_c(),),
        a_priori=(0.0, 1.0),  # the ratio lies in [0, 1]
        predicted=f"1 − ratio ≤ C × {bnd:.3g} (eq. 43; C = {LESSSIM_C:g})",
        measured_text=f"1 − {cond:.4f} = {1 - cond:.3g}",
        values={"condensation": cond, "bound": bnd},
    ).judge()
