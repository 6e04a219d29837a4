"""The claims of the linear-teacher paper, one function per claim: each confronts a run
(from `runs`) with the paper and returns `Check`s. Theorem 6.1 and App. I's
high-dimensional runs are in `theorem61_checks`, App. J's outlier in `outlier_checks`."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import Check, Trajectory
from flows.claims import Trend, flips_at

from .config import RELU_EXAMPLE, SOURCE, Config
from .observables import LOG2
from .runs import property_test, theorem51_violations
from .trend_fits import (
    _exponent_bound,
    _loglog_slope,
    _with_trend,
    time_trend,
)

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
    c = Check.compare(
        claim,
        src,
        holds=worst <= tol,
        predicted=f"relative drop between saves ≤ {tol:g} (solver tolerance)",
        measured=f"largest drop {worst:.2e} over {len(g)} saves from t₀ = "
        f"{float(times[after[0]]):.3g}; γ̃: {g[0]:.3g} → {g[-1]:.3g}",
        assumptions="Assumption 6.1: Σℓ < log 2 from t₀ on",
        values={"worst_relative_drop": worst, "t0": float(times[after[0]])},
    )
    return dataclasses.replace(
        c, critical=(flips_at("margin_drop_tol", max(worst, 0.0), at_least=True, default=tol),)
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
    checks[0] = dataclasses.replace(
        checks[0],
        critical=(
            flips_at(
                "r_rel_tol",
                r_end,
                at_least=True,
                others_hold=bool(r_end < r_mid and frac_end <= cfg.frac_tol),
                default=cfg.r_rel_tol,
            ),
            flips_at(
                "frac_tol",
                frac_end,
                at_least=True,
                others_hold=bool(r_end < r_mid and r_end <= cfg.r_rel_tol),
                default=cfg.frac_tol,
            ),
        ),
        trend=time_trend(
            small,
            "r_rel",
            "r/‖w̄ − ū‖ (small init)",
            "claimed → 0; fitted log-log slope "
            f"{_loglog_slope(getattr(small, 'times', []), os_['r_rel']):.3g}",
        ),
    )
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
    checks[1] = dataclasses.replace(
        checks[1],
        critical=(
            flips_at(
                "large_factor", rl / max(r_end, 1e-300), at_least=False, default=cfg.large_factor
            ),
        ),
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

    def one_minus_cos(ob):
        w_hat = sol.w / np.linalg.norm(sol.w)
        wb = np.asarray(ob["w_bar"], float)
        return 1 - wb @ w_hat / np.maximum(np.linalg.norm(wb, axis=1), 1e-300)

    trend = (
        time_trend(
            traj,
            "",
            "1 − cos(w̄, ŵ_PAR)",
            "claimed → 0 (directional convergence, logarithmic in t)",
            fn=one_minus_cos,
        )
        if "w_bar" in o
        else None
    )
    cos_min = min(agree["cos_w"], agree["cos_u"])
    angle = agree["boundary_angle_deg"]
    critical = (
        flips_at(
            "cos_tol",
            cos_min,
            at_least=False,
            others_hold=angle <= cfg.angle_tol_deg,
            default=cfg.cos_tol,
        ),
        flips_at(
            "angle_tol_deg",
            angle,
            at_least=True,
            others_hold=cos_min >= cfg.cos_tol,
            default=cfg.angle_tol_deg,
        ),
    )
    c = _with_trend(
        trend,
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
    return dataclasses.replace(c, critical=critical)


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
# App. I's smoothing cross-check, SGD (Thm 4.1), the decision boundary (Fig. 1), digits (Fig. 2)


SMOOTHING_CLAIM = "the exact flow through the kinks is the ε → 0 limit of the smoothed flows"


def check_smoothing(cc: dict) -> Check:
    """The exact flow is the ε → 0 limit of the smoothed flows: the error falls like ε in
    the last decade of ε measured (σ_ε − σ = O(ε); larger ε may be pre-asymptotic)."""
    eps = sorted(cc["errors"], reverse=True)
    errs = [cc["errors"][e] for e in eps]
    ratios = [a / b if b > 0 else math.inf for a, b in zip(errs, errs[1:], strict=False)]
    holds = ratios[-1] >= 3 and errs[-1] <= 1e-3
    return _with_trend(
        Trend(
            "ε",
            "max|θ_ε − θ|/max|θ| at t",
            tuple(eps),
            tuple(errs),
            note=f"claimed → 0 like ε; fitted exponent {_loglog_slope(eps, errs):.3g}",
            x_log=True,
        ),
        SMOOTHING_CLAIM,
        "gradient flow (Filippov solutions of piecewise-smooth ODEs)",
        holds=holds,
        predicted="max|θ_ε − θ|/max|θ| → 0 like ε: ≥ 3× smaller over the last decade, "
        "≤ 1e-3 at the smallest ε",
        measured=", ".join(f"ε={e:g}: {v:.2g}" for e, v in zip(eps, errs, strict=True))
        + f" (t = {cc['t1']:g}, {cc['crossings']} crossings, "
        f"{cc['sliding_entries']} sliding entries)",
        values={**cc, "ratios_per_decade": ratios},
    )


def smoothing_skipped() -> Check:
    """The ε → 0 cross-check's row when it is off (`--quick`)."""
    return Check.not_applicable(
        SMOOTHING_CLAIM,
        "gradient flow (Filippov solutions of piecewise-smooth ODEs)",
        "--quick skips this toolkit cross-check (four compilations: the exact flow at "
        "rtol 1e-10 and three smoothed flows); the default check runs it",
    )


def check_sgd(rows: list[dict], cfg: Config, grid: list[dict] | None = None) -> list[Check]:
    """Theorem 4.1: SGD reaches ε for every n and ε; the updates it needs against 1/ε (≤ 2)
    and against n (≤ 4, the bound's M(n, ε) = C n⁴/ε²), each with its Trend; and, if
    `grid` is given, "any η, any init" over a small grid."""
    src = f"{SOURCE} Thm 4.1"
    reached = [r for r in rows if r["updates"] is not None]
    budget = {r["n"]: r["n"] * cfg.sgd_max_epochs for r in rows}
    eps_min = min(cfg.sgd_eps)
    by_n = sorted((r["n"], r["updates"]) for r in rows if r["epsilon"] == eps_min and r["updates"])
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
        inv = [1 / r["epsilon"] for r in top]
        ups = [r["updates"] for r in top]
        checks.append(
            dataclasses.replace(
                _exponent_bound(
                    claim,
                    src,
                    inv,
                    ups,
                    2.0,
                    [budget[n_top]] * len(top),
                    slack=cfg.sgd_exponent_tol,
                    x_name="1/ε",
                ),
                trend=Trend(
                    "1/ε",
                    f"SGD updates to loss ε (n = {n_top})",
                    tuple(1 / r["epsilon"] for r in top),
                    tuple(float(r["updates"]) for r in top),
                    predicted=tuple(
                        top[0]["updates"] * (top[0]["epsilon"] / r["epsilon"]) ** 2 for r in top
                    ),
                    note="predicted: the bound's 1/ε² shape through the first point",
                    x_log=True,
                ),
            )
        )
    claim = f"updates to ε grow at most like n⁴ (ε = {eps_min:g})"
    if len(by_n) < 3:
        checks.append(
            Check.not_applicable(claim, src, f"needs ≥ 3 sizes n reaching ε; got {len(by_n)}")
        )
    else:
        ns, ups = [b[0] for b in by_n], [b[1] for b in by_n]
        checks.append(
            dataclasses.replace(
                _exponent_bound(
                    claim,
                    src,
                    ns,
                    ups,
                    4.0,
                    [budget[n] for n in ns],
                    x_name="n",
                    assumptions="one data distribution (symmetric Gaussians, mean "
                    f"{cfg.mean:g}) at every n; the bound's constant C depends on R_x and "
                    "‖w*‖ of each sample",
                    values={"n": ns, "updates": ups},
                    name="exponent_n",
                ),
                trend=Trend(
                    "n",
                    f"SGD updates to loss ε = {eps_min:g}",
                    tuple(float(n) for n in ns),
                    tuple(float(u) for u in ups),
                    predicted=tuple(ups[0] * (n / ns[0]) ** 4 for n in ns),
                    note="predicted: the bound's n⁴ shape through the first point",
                    x_log=True,
                ),
            )
        )
    if grid:
        ok = [g for g in grid if g["updates"] is not None]
        checks.append(
            Check.compare(
                f"SGD reaches ε = {cfg.sgd_grid_eps:g} for any η and any init scale "
                f"(n = {cfg.sgd_grid_n})",
                src,
                holds=len(ok) == len(grid)
                and all(g.get("loss_start", math.inf) > cfg.sgd_grid_eps for g in grid),
                predicted="every (η, init) of the grid reaches ε within the budget, from a "
                "start above ε",
                measured="; ".join(
                    f"η={g['learning_rate']:g}, init={g['init']:g} (L₀ "
                    f"{g.get('loss_start', math.nan):.3g}): "
                    + (f"{g['updates']}" if g["updates"] is not None else "not reached")
                    for g in grid
                ),
                assumptions="start: θ(0) or θ(0) with w and u swapped (N → −N), whichever "
                "has the larger loss",
                values={"grid": grid},
            )
        )
    return checks


def boundary_nonlinearity(w, u, x, v: float, slope: float, n_grid: int = 201) -> float:
    """Share of a square grid over the data (|coordinate| ≤ max|x|) on which the network's
    sign differs from the sign of its linear predictor (w̄ − ū)·p (2-D data)."""
    from .runs import network_np

    lim = float(np.max(np.abs(x)))
    g = np.linspace(-lim, lim, n_grid)
    p = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    lin = p @ (np.mean(w, 0) - np.mean(u, 0))
    return float(np.mean(np.sign(network_np(w, u, p, v, slope)) != np.sign(lin)))


def check_boundary(small: Trajectory, large: Trajectory, data, cfg: Config) -> Check:
    """§1, Fig. 1: the small-init boundary is (nearly) linear; from a large init the
    network can learn a non-linear one (boundary.png, panels a and b)."""
    x = data.train.x
    s = boundary_nonlinearity(small.param("w"), small.param("u"), x, cfg.v, cfg.slope)
    lg = boundary_nonlinearity(large.param("w"), large.param("u"), x, cfg.v, cfg.slope)
    c = Check.compare(
        f"decision boundary: linear from small init ({cfg.small_init:g}), not from large "
        f"init ({cfg.large_init:g})",
        f"{SOURCE} §1, Fig. 1",
        holds=s <= cfg.frac_tol and lg > s,
        predicted=f"share of the data square where sign N ≠ sign((w̄−ū)·x): small ≤ "
        f"{cfg.frac_tol:g}, large > small",
        measured=f"small {s:.3g}, large {lg:.3g}",
        assumptions="2-D symmetric Gaussians; a 201×201 grid over the data's square",
        values={"nonlinear_share_small": s, "nonlinear_share_large": lg},
    )
    return dataclasses.replace(
        c,
        critical=(
            flips_at("frac_tol", s, at_least=True, others_hold=lg > s, default=cfg.frac_tol),
        ),
    )


def check_digits(name: str, traj: Trajectory, cfg: Config) -> Check:
    o = traj.observables
    ftr, fte = float(o["frac_outside"][-1]), float(o["frac_outside_test"][-1])
    c = Check.compare(
        f"digits {name}: share of train/test points outside the linear region → 0",
        f"{SOURCE} §5.1, Fig. 2",
        holds=ftr <= cfg.digits_frac_tol and fte <= cfg.digits_frac_tol,
        predicted=f"≤ {cfg.digits_frac_tol:g} at t = {cfg.digits_t1:g}",
        measured=f"train {ftr:.3g}, test {fte:.3g}; r/‖w̄−ū‖ {float(o['r_rel'][-1]):.3g}",
        assumptions=f"small init {cfg.digits_init:g}",
        values={"frac_train": ftr, "frac_test": fte, "r_rel": float(o["r_rel"][-1])},
    )
    return dataclasses.replace(
        c,
        critical=(
            flips_at("digits_frac_tol", max(ftr, fte), at_least=True, default=cfg.digits_frac_tol),
        ),
    )
