"""The claims of the linear-teacher paper, one function per claim: each confronts a run
(from `runs`) with the paper and returns `Check`s."""

from __future__ import annotations

import math

import numpy as np

from ..._checks import Check
from ..._eta import eta_checked
from ..._trajectory import Trajectory
from .config import RELU_EXAMPLE, SOURCE, Config
from .observables import LOG2
from .runs import property_test, theorem51_violations

# ---------------------------------------------------------------------------------------
# Theorem 5.1


def check_theorem51(cfg: Config) -> tuple[list[Check], dict]:
    src = f"{SOURCE} Thm 5.1"
    claim = "sign N_W(x) = sign((w̄ − ū)·x) wherever |(w̄ − ū)·x| ≥ 2r‖x‖ (leaky α > 0)"
    res = property_test(cfg.prop_networks, cfg.prop_points, None, cfg.seed)
    checks = [
        Check.compare(
            claim,
            src,
            holds=res["violations"] == 0 and res["points_inside"] > 0,
            predicted="0 violations",
            measured=f"{res['violations']} violations in {res['points_inside']} points inside "
            f"the region, {res['networks']} random clustered networks",
            assumptions="0 < α < 1 drawn at random; k, d, v, centres, spreads random",
            values=res,
        )
    ]
    relu = property_test(cfg.prop_networks, cfg.prop_points, 0.0, cfg.seed + 1)
    w, u, x = (np.asarray(RELU_EXAMPLE[k]) for k in ("w", "u", "x"))
    _, explicit = theorem51_violations(w, u, x, 1.0, 0.0)
    _, explicit_leaky = theorem51_violations(w, u, x, 1.0, cfg.slope if cfg.slope > 0 else 0.1)
    checks.append(
        Check.compare(
            "Theorem 5.1 fails for ReLU (α = 0): a counterexample exists",
            f"{SOURCE} Thm 5.1, App. D.1",
            holds=explicit > 0 and relu["violations"] > 0 and explicit_leaky == 0,
            predicted="violations for ReLU, none for the same net with α > 0",
            measured=f"explicit w=e₁, u=e₂, x=(−1,−2): N = 0 ≠ +1 ({explicit} violation; "
            f"leaky: {explicit_leaky}); random ReLU nets: {relu['violations']} violations",
            values={"explicit": explicit, "explicit_leaky": explicit_leaky, **relu},
        )
    )
    return checks, {"leaky": res, "relu": relu}


# ---------------------------------------------------------------------------------------
# Gradient-flow runs


def certificate_checks(traj: Trajectory, label: str, rtol: float) -> list[Check]:
    o = traj.observables
    res = float(np.max(o["energy_residual"]))
    loss0 = float(o["loss"][0])
    tol = 100 * rtol * loss0
    rise = float(np.max(np.diff(o["loss"])))
    return [
        Check.compare(
            f"energy identity L(0) − L(t) = ∫‖∇L‖² ({label})",
            "gradient flow",
            holds=res <= tol,
            predicted=f"residual ≤ 100·rtol·L(0) = {tol:.2e}",
            measured=f"max residual {res:.2e}",
            values={"max_residual": res, "tolerance": tol},
        ),
        Check.compare(
            f"loss non-increasing along the flow ({label})",
            "gradient flow",
            holds=rise <= 1e-9 * loss0,
            predicted="max rise ≤ 1e-9·L(0)",
            measured=f"max rise {rise:.2e}",
            values={"max_rise": rise},
        ),
    ]


def check_smoothed_margin(times, l_sum, gamma, tol: float, label: str) -> Check:
    """γ̃ non-decreasing once L_sum < log 2 (Lyu & Li 2020, via §6)."""
    claim = f"smoothed margin γ̃ non-decreasing once Σℓ < log 2 ({label})"
    src = f"{SOURCE} §6 (Lyu & Li)"
    l_sum, gamma = np.asarray(l_sum), np.asarray(gamma)
    after = np.flatnonzero(l_sum < LOG2)
    if len(after) < 2:
        return Check.not_applicable(
            claim, src, "Σℓ never fell below log 2 on the saved times (Assumption 6.1 unmet)"
        )
    g = gamma[after[0] :]
    drops = -np.diff(g) / np.maximum(np.abs(g[1:]), 1e-300)
    worst = float(np.max(drops)) if len(drops) else 0.0
    return Check.compare(
        claim,
        src,
        holds=worst <= tol,
        predicted=f"relative drop between saves ≤ {tol:g} (solver tolerance)",
        measured=f"largest drop {worst:.2e} over {len(g)} saves from t₀ = "
        f"{float(times[after[0]]):.3g}; γ̃: {g[0]:.3g} → {g[-1]:.3g}",
        assumptions="Assumption 6.1: Σℓ < log 2 from t₀ on",
        values={"worst_relative_drop": worst, "t0": float(times[after[0]])},
    )


def check_clustering(small: Trajectory, large: Trajectory, cfg: Config) -> list[Check]:
    os_, ol = small.observables, large.observables
    src = f"{SOURCE} Thm 5.1, §5.1, App. D.3"
    r_end, r_mid = float(os_["r_rel"][-1]), float(os_["r_rel"][len(os_["r_rel"]) // 2])
    frac_end = float(os_["frac_outside"][-1])
    checks = [
        Check.compare(
            f"small init ({cfg.small_init:g}): r/‖w̄ − ū‖ → 0 and linear-region share → 1",
            src,
            holds=(r_end <= cfg.r_rel_tol) and (r_end < r_mid) and (frac_end <= cfg.frac_tol),
            predicted=f"r/‖w̄−ū‖ decreasing, ≤ {cfg.r_rel_tol:g} at t1; share outside "
            f"≤ {cfg.frac_tol:g}",
            measured=f"r/‖w̄−ū‖ {r_mid:.2e} (mid) → {r_end:.2e}; outside {frac_end:.3g}",
            values={"r_rel_end": r_end, "r_rel_mid": r_mid, "frac_outside_end": frac_end},
        )
    ]
    rl = float(ol["r_rel"][-1])
    checks.append(
        Check.compare(
            f"large init ({cfg.large_init:g}): visibly less clustering",
            f"{SOURCE} §5.1 (small init needed)",
            holds=rl >= cfg.large_factor * r_end,
            predicted=f"r/‖w̄−ū‖ ≥ {cfg.large_factor:g} × small-init value",
            measured=f"{rl:.3g} vs {r_end:.2e} (×{rl / max(r_end, 1e-300):.3g}); outside "
            f"{float(ol['frac_outside'][-1]):.3g}",
            values={"r_rel_large": rl, "r_rel_small": r_end},
        )
    )
    return checks


def check_theorem51_runs(trajs: dict[str, Trajectory], slope: float) -> Check:
    claim = "Theorem 5.1 holds on the learned networks at every save and training point"
    src = f"{SOURCE} Thm 5.1"
    if slope <= 0:
        return Check.not_applicable(claim, src, "α = 0 (ReLU): Theorem 5.1 needs α > 0")
    total = {k: float(np.sum(t.observables["thm51_violations"])) for k, t in trajs.items()}
    return Check.compare(
        claim,
        src,
        holds=sum(total.values()) == 0,
        predicted="0 violations",
        measured=", ".join(f"{k}: {int(v)}" for k, v in total.items()),
        values=total,
    )


def check_par_prediction(traj: Trajectory, sol, agree: dict, cfg: Config, symmetric: bool):
    claim = "learned directions (ŵ, û) and boundary match the PAR max-margin solution"
    src = f"{SOURCE} Thm 6.2 (eq. 8)"
    o = traj.observables
    reasons = []
    if cfg.slope <= 0:
        reasons.append("α = 0: the PAR analysis needs a leaky slope α > 0")
    if not o["in_par"][-1] > 0:
        reasons.append("the run is not in the PAR at t1 (assumption of Theorem 6.2)")
    if not symmetric:
        reasons.append("data not closed under (x, y) → (−x, −y) (Lemma 6.1)")
    if not sol.success:
        reasons.append(f"the PAR problem was not solved: {sol.message}")
    if reasons:
        return Check.not_applicable(claim, src, "; ".join(reasons), values=agree)
    return Check.compare(
        claim,
        src,
        holds=agree["cos_w"] >= cfg.cos_tol
        and agree["cos_u"] >= cfg.cos_tol
        and agree["boundary_angle_deg"] <= cfg.angle_tol_deg,
        predicted=f"cos ≥ {cfg.cos_tol:g}, boundary angle ≤ {cfg.angle_tol_deg:g}°",
        measured=f"cos(ŵ) {agree['cos_w']:.4f}, cos(û) {agree['cos_u']:.4f}, angle "
        f"{agree['boundary_angle_deg']:.2f}°",
        assumptions="in the PAR at t1; symmetric data (Lemma 6.1); directional convergence "
        "is only logarithmic in t, hence the tolerance",
        values={**agree, "t1": float(traj.times[-1])},
    )


def check_par_share(traj: Trajectory) -> Check:
    share = float(traj.observables["par_share"][-1])
    return Check.compare(
        "symmetric Gaussians: every neuron enters the PAR",
        f"{SOURCE} App. I, Lemma 6.1",
        holds=share == 1.0,
        predicted="PAR share = 1 at t1",
        measured=f"PAR share {share:.3g}",
        values={"par_share_end": share},
    )


# ---------------------------------------------------------------------------------------
# Outlier (App. J), SGD (Thm 4.1), digits (Fig. 2)


OUTLIER_CLAIM = "outlier data: neurons of each type agree (NAR) but do not all enter the PAR"


def outlier_verdict(o: dict, kink_cos: float) -> tuple[bool, str, dict]:
    """App. J's claim read at the last save: an NAR with a margin beyond the kink tolerance
    (β* > kink_cos), PAR share < 1, accuracy 1; on-kink pairs reported apart."""
    beta = float(o["nar_margin"][-1])
    dis = float(o["max_disagree"][-1])
    share, share_k = float(o["par_share"][-1]), float(o["par_share_kink"][-1])
    kw, ku = float(o["on_kink_w"][-1]), float(o["on_kink_u"][-1])
    acc = float(o["accuracy"][-1])
    holds = beta > kink_cos and share < 1 and acc == 1
    text = (
        f"NAR margin β* = {beta:.3g}, max disagreement {dis:.0f} (off-kink), on-kink pairs "
        f"w {kw:.0f} / u {ku:.0f}, PAR share {share:.3g} (+{share_k:.3g} but for on-kink "
        f"points), accuracy {acc:.3g}"
    )
    values = {
        "nar_margin": beta,
        "max_disagree": dis,
        "par_share": share,
        "par_share_kink": share_k,
        "on_kink_w": kw,
        "on_kink_u": ku,
        "acc": acc,
    }
    return holds, text, values


def check_outlier(traj: Trajectory, data, kink_cos: float) -> Check:
    """App. J on the exact (Filippov) flow."""
    src = f"{SOURCE} App. J"
    if not data.separability.separable:
        return Check.not_applicable(OUTLIER_CLAIM, src, data.separability.message)
    holds, text, values = outlier_verdict(traj.observables, kink_cos)
    sl = traj.observables.get("sliding_pairs")
    if sl is not None:
        values["sliding_pairs_end"] = float(sl[-1])
        text += f"; sliding pairs at t1: {sl[-1]:.0f}"
    return Check.compare(
        OUTLIER_CLAIM,
        src,
        holds=holds,
        predicted=f"in an NAR (β* > {kink_cos:g}), PAR share < 1, accuracy 1",
        measured=text,
        assumptions="exact piecewise-smooth flow (Filippov sliding on kinks), "
        f"on the kink: |ŵ·x̂| ≤ {kink_cos:g}",
        values=values,
        reason=""
        if holds
        else "β* ≤ the kink tolerance: neurons sit on a point's kink "
        "(sliding), so no NAR with β > 0 is entered"
        if values["nar_margin"] <= kink_cos
        else "",
    )


def check_outlier_gd(cfg: Config, run_gd, kink_cos: float) -> Check:
    """App. J by gradient descent (the paper's method), at η and η/4."""

    def measure(eta):
        return outlier_verdict(run_gd(eta).observables, kink_cos)

    return eta_checked(
        OUTLIER_CLAIM + " (GD)",
        f"{SOURCE} App. J",
        eta=cfg.outlier_lr,
        measure=measure,
        predicted=f"in an NAR (β* > {kink_cos:g}), PAR share < 1, accuracy 1",
        assumptions="gradient descent, the paper's stand-in for the flow",
    )


def check_smoothing(cc: dict) -> Check:
    """The exact flow is the ε → 0 limit of the smoothed flows: the error falls like ε in
    the last decade of ε measured (σ_ε − σ = O(ε); larger ε may be pre-asymptotic)."""
    eps = sorted(cc["errors"], reverse=True)
    errs = [cc["errors"][e] for e in eps]
    ratios = [a / b if b > 0 else math.inf for a, b in zip(errs, errs[1:], strict=False)]
    holds = ratios[-1] >= 3 and errs[-1] <= 1e-3
    return Check.compare(
        "the exact flow through the kinks is the ε → 0 limit of the smoothed flows",
        "gradient flow (Filippov solutions of piecewise-smooth ODEs)",
        holds=holds,
        predicted="max|θ_ε − θ|/max|θ| → 0 like ε: ≥ 3× smaller over the last decade, "
        "≤ 1e-3 at the smallest ε",
        measured=", ".join(f"ε={e:g}: {v:.2g}" for e, v in zip(eps, errs, strict=True))
        + f" (t = {cc['t1']:g}, {cc['crossings']} crossings, "
        f"{cc['sliding_entries']} sliding entries)",
        values={**cc, "ratios_per_decade": ratios},
    )


def check_sgd(rows: list[dict], cfg: Config) -> list[Check]:
    src = f"{SOURCE} Thm 4.1"
    reached = [r for r in rows if r["updates"] is not None]
    budget = {r["n"]: r["n"] * cfg.sgd_max_epochs for r in rows}
    checks = [
        Check.compare(
            "SGD (epochs without replacement) reaches loss ε for every n and ε",
            src,
            holds=len(reached) == len(rows),
            predicted=f"within M(n, ε) = C n⁴/ε² updates (budget {cfg.sgd_max_epochs} epochs)",
            measured="; ".join(
                f"n={r['n']}, ε={r['epsilon']:g}: "
                + (f"{r['updates']}" if r["updates"] is not None else "not reached")
                for r in rows
            ),
            assumptions="separable data: " + str(all(r["separable"] for r in rows)),
            values={"rows": len(rows), "reached": len(reached), "budget": budget},
        )
    ]
    n_top = max(cfg.sgd_n)
    top = [r for r in rows if r["n"] == n_top and r["updates"]]
    claim = f"updates to ε grow at most like 1/ε² (n = {n_top})"
    if len(top) < 2:
        checks.append(Check.not_applicable(claim, src, "needs ≥ 2 values of ε reached"))
    else:
        slope = float(
            np.polyfit(
                np.log([1 / r["epsilon"] for r in top]), np.log([r["updates"] for r in top]), 1
            )[0]
        )
        checks.append(
            Check.compare(
                claim,
                src,
                holds=slope <= 2 + cfg.sgd_exponent_tol,
                predicted=f"exponent ≤ 2 (+{cfg.sgd_exponent_tol:g})",
                measured=f"fitted exponent {slope:.3g}",
                values={"exponent": slope},
            )
        )
    return checks


def check_digits(name: str, traj: Trajectory, cfg: Config) -> Check:
    o = traj.observables
    ftr, fte = float(o["frac_outside"][-1]), float(o["frac_outside_test"][-1])
    return Check.compare(
        f"digits {name}: share of train/test points outside the linear region → 0",
        f"{SOURCE} §5.1, Fig. 2",
        holds=ftr <= cfg.digits_frac_tol and fte <= cfg.digits_frac_tol,
        predicted=f"≤ {cfg.digits_frac_tol:g} at t = {cfg.digits_t1:g}",
        measured=f"train {ftr:.3g}, test {fte:.3g}; r/‖w̄−ū‖ {float(o['r_rel'][-1]):.3g}",
        assumptions=f"small init {cfg.digits_init:g}",
        values={"frac_train": ftr, "frac_test": fte, "r_rel": float(o["r_rel"][-1])},
    )
