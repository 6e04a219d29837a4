"""Experiment: leaky-ReLU ±v networks learning linear teachers (THEORY.md §C).

Runs, each confronted with a claim of the linear-teacher paper:

- a property test of Theorem 5.1 over random clustered networks, and a ReLU counterexample;
- exact gradient flow (loss clock, to t1 = 10⁸) on 2-D symmetric Gaussian classes from a
  small and a large initialization: clustering r/‖w̄ − ū‖, the linear-region fraction,
  the smoothed margin (Lyu & Li), the PAR share, and the PAR prediction of Theorem 6.2;
- antipodal Gaussians plus one positive outlier (App. J), trained with gradient descent
  (the exact flow slides along a leaky-ReLU kink there and is too stiff for explicit
  solvers): all neurons of one type agree (an NAR) but the PAR share stays < 1;
- SGD with epochs without replacement (Theorem 4.1) for several n and ε;
- (full mode) digit pairs 0/1 and 3/5 of scikit-learn's digits: r and the fraction of
  train/test points outside the linear region over training (Fig. 2).
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path

import numpy as np

from reduced import max_margin as mm
from reduced.linear_teacher import leaky_relu

from ... import _flags as fl
from ..._baselines import gradient_descent, sgd_to_epsilon
from ..._checks import Check
from ..._clocks import log_save_times
from ..._errors import ConfigError
from ..._flags import Flag
from ..._losses import logistic
from ..._problem import make_problem
from ..._simulate import simulate
from ..._sweep import grid_type
from ..._trajectory import Trajectory
from ...models.leaky import LeakyReLUNet
from ..base import AbstractExperiment, OutputDir, Report, Simulated, new_figure, write_results_json
from .data import antipodal_with_outlier, digits_pair, symmetric_gaussians
from .observables import LOG2, teacher_observables

NAME = "linear-teacher"
#: The files `run` writes into `out/NAME/` (nothing else there is touched).
FILES = (
    "boundary.png",
    "clustering.png",
    "par.png",
    "outlier.png",
    "sgd.png",
    "trajectory.nc",
    "results.json",
)
SOURCE = "linear teachers"


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of `flows check linear-teacher` (frozen; saved with the results).

    Network: `k` neurons per type, leaky `slope` α, output weight `v`. Main data: `n`
    points of 2-D symmetric Gaussians (`mean`·e₁, unit std, `seed`). Flow: loss clock to
    `t1`, `n_save` log-spaced saves, `rtol`/`atol`; inits `small_init` and `large_init`.
    Tolerances: `r_rel_tol` (small init: r/‖w̄ − ū‖ at t1 ≤), `frac_tol` (small init: share
    of points outside the linear region at t1 ≤), `large_factor` (large init: r/‖w̄ − ū‖ ≥
    factor × the small-init value), `margin_drop_tol` (relative drop of the smoothed margin
    allowed between saves, for solver error), `cos_tol`, `angle_tol_deg` (PAR prediction).
    `beta`: β of the NAR/PAR tests. Property test: `prop_networks` networks ×
    `prop_points` points. Outlier run: `outlier` point, `outlier_n`, gradient descent with
    `outlier_lr` to `outlier_t1`. SGD: sizes `sgd_n`, targets `sgd_eps`, step `sgd_lr`,
    `sgd_max_epochs`, `sgd_exponent_tol`. Digits: pairs `digits`, e.g. ((0, 1), (3, 5))
    (default empty: skipped, they take minutes),
    `digits_t1`, `digits_frac_tol`.
    """

    k: int = 10
    slope: float = 0.1
    v: float = 1.0
    n: int = 100
    mean: float = 3.0
    seed: int = 0
    t1: float = 1e8
    n_save: int = 61
    rtol: float = 1e-6
    atol: float = 1e-9
    small_init: float = 1e-4
    large_init: float = 1.0
    beta: float = 0.0
    r_rel_tol: float = 0.01
    frac_tol: float = 0.02
    large_factor: float = 10.0
    margin_drop_tol: float = 1e-5
    cos_tol: float = 0.99
    angle_tol_deg: float = 5.0
    prop_networks: int = 300
    prop_points: int = 200
    outlier: tuple[float, float] = (-1.0, 3.0)
    outlier_n: int = 60
    outlier_lr: float = 0.2
    outlier_t1: float = 1e5
    sgd_n: tuple[int, ...] = (20, 40, 80)
    sgd_eps: tuple[float, ...] = (0.1, 0.03, 0.01)
    sgd_lr: float = 0.1
    sgd_max_epochs: int = 20_000
    sgd_exponent_tol: float = 0.25
    digits: tuple[tuple[int, int], ...] = ()
    digits_t1: float = 1e4
    digits_init: float = 1e-3
    digits_frac_tol: float = 0.05

    def __post_init__(self):
        if not (isinstance(self.k, int) and self.k >= 1):
            raise ConfigError(f"`k` must be an integer ≥ 1; got {self.k!r}.")
        if not 0 <= self.slope < 1:
            raise ConfigError(f"`slope` (leaky α) must lie in [0, 1); got {self.slope!r}.")
        if not self.v > 0:
            raise ConfigError(f"`v` must be > 0; got {self.v!r}.")
        if not (isinstance(self.n, int) and self.n >= 4 and self.n % 2 == 0):
            raise ConfigError(f"`n` must be an even integer ≥ 4; got {self.n!r}.")
        if not (math.isfinite(self.t1) and self.t1 > 1):
            raise ConfigError(f"`t1` must be > 1; got {self.t1!r}.")
        for name in ("rtol", "atol", "small_init", "large_init", "outlier_lr", "sgd_lr"):
            val = getattr(self, name)
            if not (math.isfinite(val) and val > 0):
                raise ConfigError(f"`{name}` must be > 0; got {val!r}.")
        if not self.small_init < self.large_init:
            raise ConfigError("`small_init` must be smaller than `large_init`.")
        if not self.beta >= 0:
            raise ConfigError(f"`beta` must be ≥ 0; got {self.beta!r}.")
        if any(e <= 0 for e in self.sgd_eps) or any(n < 2 for n in self.sgd_n):
            raise ConfigError("`sgd_eps` must be > 0 and `sgd_n` ≥ 2.")
        if not 0 < self.cos_tol <= 1:
            raise ConfigError(f"`cos_tol` must lie in (0, 1]; got {self.cos_tol!r}.")


def default_config(quick: bool = False) -> Config:
    """The built-in default; `quick`: t1 = 10⁶, fewer property-test networks and SGD
    cases, no digits."""
    if quick:
        return Config(
            t1=1e6,
            n_save=41,
            prop_networks=100,
            outlier_t1=2e4,
            sgd_n=(20, 40),
            sgd_eps=(0.1, 0.03),
            digits=(),
        )
    return Config()


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if np.isfinite(x) else "n/a"


# ---------------------------------------------------------------------------------------
# Theorem 5.1: property test and the ReLU counterexample


def network_np(w, u, x, v: float, slope: float):
    """N_W(x) in NumPy (eq. 1), for the property test."""
    return v * (leaky_relu(x @ w.T, slope).sum(-1) - leaky_relu(x @ u.T, slope).sum(-1))


def theorem51_violations(w, u, x, v: float, slope: float) -> tuple[int, int]:
    """(points inside Theorem 5.1's linear region, of which sign N ≠ sign((w̄ − ū)·x)).

    Points with |(w̄ − ū)·x| ≤ 1e-12 ‖w̄ − ū‖‖x‖ are not tested: there the sign of
    (w̄ − ū)·x is rounding noise (r itself is ~1e-16 for identical neurons).
    """
    w_bar, u_bar = w.mean(0), u.mean(0)
    r = max(np.linalg.norm(w - w_bar, axis=1).max(), np.linalg.norm(u - u_bar, axis=1).max())
    lin = x @ (w_bar - u_bar)
    xn = np.linalg.norm(x, axis=1)
    floor = 1e-12 * np.linalg.norm(w_bar - u_bar) * xn
    inside = (np.abs(lin) >= 2 * r * xn) & (np.abs(lin) > floor)
    out = np.sign(np.asarray(network_np(w, u, x, v, slope)))
    return int(inside.sum()), int((inside & (out != np.sign(lin))).sum())


def property_test(n_networks: int, n_points: int, slope: float | None, seed: int) -> dict:
    """Random clustered networks (k, d, α, centres, spreads random; α fixed if given) and
    random points, half of them placed just inside the linear region's edge."""
    rng = np.random.default_rng(seed)
    inside = bad = 0
    worst = None
    for _ in range(n_networks):
        d = int(rng.integers(2, 9))
        k = int(rng.integers(1, 9))
        a = float(rng.uniform(0.01, 0.99)) if slope is None else slope
        v = float(rng.uniform(0.1, 3))
        cw, cu = rng.standard_normal(d), rng.standard_normal(d)
        spread = float(rng.choice([0.0, 0.01, 0.1, 0.5, 2.0]))
        w = cw + spread * rng.standard_normal((k, d)) / math.sqrt(d)
        u = cu + spread * rng.standard_normal((k, d)) / math.sqrt(d)
        x = rng.standard_normal((n_points, d))
        # push half the points to the edge |(w̄ − ū)·x| = 2r‖x‖ (·(1 + 1e-9)): the hard case
        w_bar, u_bar = w.mean(0), u.mean(0)
        r = max(np.linalg.norm(w - w_bar, axis=1).max(), np.linalg.norm(u - u_bar, axis=1).max())
        sep = w_bar - u_bar
        sn = np.linalg.norm(sep)
        c = min(2 * r / sn, 1.0) * (1 + 1e-9) if sn > 0 else 0.0
        if 1e-8 < c < 1:
            h = x[: n_points // 2]
            perp = h - np.outer(h @ sep / sn**2, sep)
            perp /= np.maximum(np.linalg.norm(perp, axis=1, keepdims=True), 1e-300)
            sgn = np.where(rng.random(len(h)) < 0.5, -1.0, 1.0)[:, None]
            x[: n_points // 2] = sgn * c * sep / sn + math.sqrt(1 - c**2) * perp
        i, b = theorem51_violations(w, u, x, v, a)
        inside += i
        bad += b
        if b and worst is None:
            worst = {"k": k, "d": d, "slope": a, "spread": spread}
    return {"networks": n_networks, "points_inside": inside, "violations": bad, "example": worst}


#: Explicit ReLU counterexample (k = 1, r = 0, so every x is in the "linear region"):
#: w = e₁, u = e₂, x = (−1, −2): (w − u)·x = 1 > 0, but N(x) = relu(−1) − relu(−2) = 0.
RELU_EXAMPLE = {"w": [[1.0, 0.0]], "u": [[0.0, 1.0]], "x": [[-1.0, -2.0]]}


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


def _model(cfg: Config, d: int, init: float) -> LeakyReLUNet:
    return LeakyReLUNet(k=cfg.k, d=d, slope=cfg.slope, v=cfg.v, init_scale=init)


#: Largest init scale `run_flow` accepts: 10⁶ × the paper's large init (1.0). The loss
#: clock's range s = ∫L dt grows with L(0) ∝ init: measured (t1 = 100) init 1e12 ran in 28 s,
#: init 1e50 had not finished after 60 s (1e200 ran 4 minutes into a max-steps failure).
MAX_INIT = 1e6


def run_flow(cfg: Config, data, init: float, obs, *, t1: float | None = None) -> Trajectory:
    if not 0 < init <= MAX_INIT:
        raise ConfigError(
            f"the init scale (`init`) must lie in (0, {MAX_INIT:g}]; got {init!r}. The "
            "paper's regimes are small init (1e-4) and large init (1.0)."
        )
    problem = make_problem(
        _model(cfg, data.train.d, init), data.train, key=cfg.seed, loss_fn=logistic
    )
    t1 = cfg.t1 if t1 is None else t1
    traj = simulate(
        problem,
        t1=t1,
        ts=log_save_times(t1, cfg.n_save, first=0.1),
        clock="loss",
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=obs,
        save_params="ends",
    )
    traj.config["experiment"] = {"name": NAME, "init_scale": init, "data": data.name}
    return traj


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


def par_prediction(traj: Trajectory, data, cfg: Config) -> tuple[mm.ParSolution, dict]:
    model = _model(cfg, data.train.d, cfg.small_init)
    z = np.asarray(model.features(data.train.x))
    sol = mm.solve_par(z, data.train.y, v=cfg.v, k=cfg.k, slope=cfg.slope)
    o = traj.observables
    agree = mm.direction_agreement(sol.w, sol.u, o["w_bar"][-1], o["u_bar"][-1])
    return sol, agree


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


def run_outlier(cfg: Config, obs_kwargs: dict) -> tuple[Trajectory, object]:
    data = antipodal_with_outlier(cfg.outlier_n, 2, outlier=np.asarray(cfg.outlier))
    problem = make_problem(
        _model(cfg, 2, cfg.small_init), data.train, key=cfg.seed, loss_fn=logistic
    )
    traj = gradient_descent(
        problem,
        learning_rate=cfg.outlier_lr,
        t1=cfg.outlier_t1,
        n_save=41,
        observables=teacher_observables(**obs_kwargs),
        save_params="ends",
    )
    return traj, data


def check_outlier(traj: Trajectory, data) -> Check:
    o = traj.observables
    dis = float(o["max_disagree"][-1])
    share_w, share = float(o["par_share_w"][-1]), float(o["par_share"][-1])
    acc = float(o["accuracy"][-1])
    claim = "outlier data: neurons of each type agree (NAR) but do not all enter the PAR"
    src = f"{SOURCE} App. J"
    if not data.separability.separable:
        return Check.not_applicable(claim, src, data.separability.message)
    return Check.compare(
        claim,
        src,
        holds=dis == 0 and share < 1 and acc == 1,
        predicted="max disagreement → 0, PAR share < 1, accuracy 1",
        measured=f"max disagreement {dis:.0f}, PAR share {share:.3g} (w: {share_w:.3g}), "
        f"accuracy {acc:.3g}",
        assumptions="gradient descent (η = lr), the paper's stand-in for the flow",
        values={"max_disagree": dis, "par_share": share, "par_share_w": share_w, "acc": acc},
    )


def run_sgd(cfg: Config) -> list[dict]:
    rows = []
    for n in cfg.sgd_n:
        data = symmetric_gaussians(n, 2, mean=cfg.mean, seed=cfg.seed + 7)
        problem = make_problem(
            _model(cfg, 2, cfg.small_init), data.train, key=cfg.seed, loss_fn=logistic
        )
        for eps in cfg.sgd_eps:
            res = sgd_to_epsilon(
                problem,
                epsilon=eps,
                learning_rate=cfg.sgd_lr,
                key=cfg.seed,
                max_epochs=cfg.sgd_max_epochs,
            )
            rows.append({**res.to_dict(), "separable": data.separability.separable})
    return rows


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


def run_digits(cfg: Config, pair) -> tuple[Trajectory, object]:
    data = digits_pair(*pair, seed=cfg.seed)
    obs = teacher_observables(beta=cfg.beta, x_test=data.test.x, y_test=data.test.y)
    problem = make_problem(
        _model(cfg, data.train.d, cfg.digits_init), data.train, key=cfg.seed, loss_fn=logistic
    )
    traj = simulate(
        problem,
        t1=cfg.digits_t1,
        ts=log_save_times(cfg.digits_t1, 31, first=0.1),
        clock="loss",
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=obs,
        save_params="ends",
    )
    return traj, data


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


# ---------------------------------------------------------------------------------------
# Figures


def _boundary(ax, fn, lim, title):
    g = np.linspace(-lim, lim, 301)
    xx, yy = np.meshgrid(g, g)
    z = np.asarray(fn(np.stack([xx.ravel(), yy.ravel()], 1))).reshape(xx.shape)
    ax.contourf(
        xx, yy, np.sign(z), levels=[-1.5, -0.5, 0.5, 1.5], colors=["#c6dbef", "#f0f0f0", "#fdd0a2"]
    )
    ax.contour(xx, yy, z, levels=[0], colors="k", linewidths=1)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", title=title)


def plot_boundaries(small: Trajectory, data, sol, cfg: Config, path: Path) -> None:
    """(a) learned boundary, neurons and PAR prediction; (b) leaky vs (c) ReLU clustered."""
    fig, axes = new_figure(1, 3, figsize=(15, 5))
    w, u = small.param("w"), small.param("u")
    x, y = data.train.x, data.train.y
    lim = float(np.max(np.abs(x))) * 1.1
    ax = axes[0]
    _boundary(
        ax,
        lambda p: network_np(w, u, p, cfg.v, cfg.slope),
        lim,
        "(a) learned (small init) and PAR prediction",
    )
    ax.scatter(*x[y > 0].T, s=8, c="tab:orange")
    ax.scatter(*x[y < 0].T, s=8, c="tab:blue")
    sc = 0.8 * lim
    for wi in w:
        ax.arrow(0, 0, *(sc * wi / np.linalg.norm(wi)), color="k", width=0.02)
    for ui in u:
        ax.arrow(0, 0, *(sc * ui / np.linalg.norm(ui)), color="gold", width=0.02)
    nrm = np.array([-sol.boundary[1], sol.boundary[0]])
    ax.plot(*np.outer([-lim, lim], nrm).T, "r--", label="PAR boundary")
    ax.plot(*np.stack([[0, 0], sc * sol.w_hat]).T, "m:", lw=2, label="PAR ŵ, û")
    ax.plot(*np.stack([[0, 0], sc * sol.u_hat]).T, "m:", lw=2)
    ax.legend(loc="lower right", fontsize=8)
    wc, uc = np.array([[1.0, 0.6]]), np.array([[-0.4, 1.0]])
    for ax, a, t in (
        (axes[1], 0.3, "(b) leaky ReLU α = 0.3, k = 1"),
        (axes[2], 0.0, "(c) ReLU, k = 1 (grey: N = 0)"),
    ):
        _boundary(ax, lambda p, a=a: network_np(wc, uc, p, 1.0, a), 3.0, t)
        ax.plot(
            *np.outer([-3, 3], [1.0 + 0.4, 0.6 - 1.0][::-1] * np.array([-1, 1])).T, "r--", lw=0.8
        )
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_clustering(trajs: dict[str, Trajectory], path: Path) -> None:
    fig, axes = new_figure(1, 4, figsize=(18, 4))
    for label, tr in trajs.items():
        o, t = tr.observables, tr.times
        sel = t > 0
        axes[0].plot(t[sel], o["r_rel"][sel], label=label)
        axes[1].plot(t[sel], o["frac_outside"][sel], label=f"{label} train")
        if "frac_outside_test" in o:
            axes[1].plot(t[sel], o["frac_outside_test"][sel], ls="--", label=f"{label} test")
        axes[2].plot(
            t[sel], np.degrees(np.maximum(o["max_angle_w"], o["max_angle_u"]))[sel], label=label
        )
        axes[3].plot(t[sel], o["smoothed_margin"][sel], label=f"{label} γ̃")
        axes[3].plot(t[sel], o["margin"][sel], ls=":", label=f"{label} γ")
    axes[0].set(xscale="log", yscale="log", xlabel="t", title="r / ‖w̄ − ū‖")
    axes[1].set(xscale="log", xlabel="t", title="share of points outside the linear region")
    axes[2].set(xscale="log", yscale="log", xlabel="t", title="largest angle within a type (°)")
    axes[3].set(xscale="log", xlabel="t", title="smoothed γ̃ and normalized γ margins")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_par(trajs: dict[str, Trajectory], sol, small: Trajectory, path: Path) -> None:
    fig, axes = new_figure(1, 2, figsize=(11, 4.5))
    ax = axes[0]
    for label, tr in trajs.items():
        sel = tr.times > 0
        ax.plot(tr.times[sel], tr.observables["par_share"][sel], label=label)
    ax.set(xscale="log", xlabel="t", ylim=(-0.05, 1.05), title="share of neurons in the PAR")
    ax.legend(fontsize=8)
    ax = axes[1]
    w, u = small.param("w"), small.param("u")
    for vec, c in ((w, "k"), (u, "gold")):
        for vi in vec:
            d = vi / np.linalg.norm(vi)
            ax.plot([0, d[0]], [0, d[1]], color=c, lw=1)
    ax.plot([0, sol.w_hat[0]], [0, sol.w_hat[1]], "r--", lw=2, label="PAR ŵ")
    ax.plot([0, sol.u_hat[0]], [0, sol.u_hat[1]], "b--", lw=2, label="PAR û")
    ax.set(
        aspect="equal",
        xlim=(-1.1, 1.1),
        ylim=(-1.1, 1.1),
        title="learned neuron directions (black w, gold u) vs PAR",
    )
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_outlier(traj: Trajectory, data, cfg: Config, path: Path) -> None:
    fig, axes = new_figure(1, 3, figsize=(15, 4.5))
    w, u = traj.param("w"), traj.param("u")
    x, y = data.train.x, data.train.y
    lim = float(np.max(np.abs(x))) * 1.1
    _boundary(
        axes[0], lambda p: network_np(w, u, p, cfg.v, cfg.slope), lim, "(a) boundary and neurons"
    )
    axes[0].scatter(*x[y > 0].T, s=8, c="tab:orange")
    axes[0].scatter(*x[y < 0].T, s=8, c="tab:blue")
    axes[0].scatter(*x[-1], s=80, marker="*", c="red", label="outlier (+)")
    for vec, c in ((w, "k"), (u, "gold")):
        for vi in vec:
            d = 0.8 * lim * vi / np.linalg.norm(vi)
            axes[0].plot([0, d[0]], [0, d[1]], color=c, lw=1)
    axes[0].legend(fontsize=8)
    o, t = traj.observables, traj.times
    sel = t > 0
    axes[1].plot(t[sel], o["max_disagree"][sel])
    axes[1].set(xscale="log", xlabel="t", title="(b) max #points two same-type neurons disagree")
    axes[2].plot(t[sel], o["par_share_w"][sel], label="w neurons")
    axes[2].plot(t[sel], o["par_share_u"][sel], label="u neurons")
    axes[2].set(xscale="log", xlabel="t", ylim=(-0.05, 1.05), title="(c) share in the PAR")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def plot_sgd(rows: list[dict], path: Path) -> None:
    fig, ax = new_figure(figsize=(5.5, 4))
    for n in sorted({r["n"] for r in rows}):
        rr = [r for r in rows if r["n"] == n and r["updates"]]
        ax.plot([1 / r["epsilon"] for r in rr], [r["updates"] for r in rr], "o-", label=f"n={n}")
    ax.set(
        xscale="log",
        yscale="log",
        xlabel="1/ε",
        ylabel="updates to loss ε",
        title="SGD (Theorem 4.1)",
    )
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)


# ---------------------------------------------------------------------------------------
# Entry point of `flows check linear-teacher`


def run(cfg: Config, out: Path, *, progress: bool = True) -> Report:
    """All runs and checks; figures, `trajectory.nc` (small-init run) and `results.json`,
    written atomically into `out/linear-teacher/`."""
    start = time.perf_counter()

    def say(msg):
        if progress:
            print(f"[{NAME}] {msg} ({time.perf_counter() - start:.0f}s)", flush=True)

    checks, extra = [], {}
    c, prop = check_theorem51(cfg)
    checks += c
    extra["property_test"] = prop
    say("Theorem 5.1 property test done")

    data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
    obs_kwargs = {"beta": cfg.beta}
    obs = teacher_observables(teacher=data.teacher, **obs_kwargs)
    small = run_flow(cfg, data, cfg.small_init, obs)
    say(f"small-init flow to t = {cfg.t1:g}: {small.stats['steps']} steps")
    large = run_flow(cfg, data, cfg.large_init, obs)
    say(f"large-init flow: {large.stats['steps']} steps")
    checks += certificate_checks(small, "small init", cfg.rtol)
    checks += certificate_checks(large, "large init", cfg.rtol)
    for label, tr in (("small init", small), ("large init", large)):
        o = tr.observables
        checks.append(
            check_smoothed_margin(
                tr.times, o["l_sum"], o["smoothed_margin"], cfg.margin_drop_tol, label
            )
        )
    checks += check_clustering(small, large, cfg)
    sol, agree = par_prediction(small, data, cfg)
    checks.append(check_par_prediction(small, sol, agree, cfg, symmetric=True))
    checks.append(check_par_share(small))
    extra["par"] = {
        "prediction": {
            "w": sol.w,
            "u": sol.u,
            "in_par": sol.in_par,
            "kkt_residual": sol.kkt_residual,
        },
        "agreement": agree,
    }

    outlier, odata = run_outlier(cfg, obs_kwargs)
    say("outlier run (gradient descent) done")
    checks.append(check_outlier(outlier, odata))

    rows = run_sgd(cfg)
    checks += check_sgd(rows, cfg)
    say("SGD done")
    extra["sgd"] = rows

    digit_runs = {}
    for pair in cfg.digits:
        tr, _ = run_digits(cfg, pair)
        name = f"{pair[0]}v{pair[1]}"
        digit_runs[name] = tr
        checks.append(check_digits(name, tr, cfg))
        say(f"digits {name}: {tr.stats['steps']} steps")
    runs = {
        "small init": small,
        "large init": large,
        **{f"digits {k}": v for k, v in digit_runs.items()},
    }
    checks.insert(2, check_theorem51_runs({**runs, "outlier (GD)": outlier}, cfg.slope))

    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        plot_boundaries(small, data, sol, cfg, outdir.path("boundary.png"))
        plot_clustering(runs, outdir.path("clustering.png"))
        plot_par(
            {
                "symmetric, small init": small,
                "symmetric, large init": large,
                "outlier (GD)": outlier,
            },
            sol,
            small,
            outdir.path("par.png"),
        )
        plot_outlier(outlier, odata, cfg, outdir.path("outlier.png"))
        plot_sgd(rows, outdir.path("sgd.png"))
        small.save(outdir.path("trajectory.nc"))
        extra["runs"] = {
            k: {
                "stats": v.stats,
                "final": {
                    name: float(np.asarray(v.observables[name])[-1])
                    for name in (
                        "loss",
                        "r_rel",
                        "frac_outside",
                        "par_share",
                        "margin",
                        "smoothed_margin",
                        "max_disagree",
                    )
                },
            }
            for k, v in {**runs, "outlier (GD)": outlier}.items()
        }
        extra["separability"] = {
            "symmetric": data.separability.to_dict(),
            "outlier": odata.separability.to_dict(),
        }
        extra["wall_s"] = time.perf_counter() - start
        write_results_json(
            outdir.path("results.json"), NAME, dataclasses.asdict(cfg), checks, extra
        )
        files = outdir.commit()
    except BaseException:
        outdir.abort()
        raise
    say("done")
    return Report(NAME, checks, files, {"par": agree, "sgd": rows})


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate linear-teacher`


class LinearTeacherExperiment(AbstractExperiment):
    """Leaky-ReLU ±v nets on linearly separable data (the linear-teacher paper)."""

    name = NAME
    title = "Towards Understanding Learning in Neural Networks with Linear Teachers"
    files = FILES
    simulate_flags = (
        Flag("k", "neurons per type (default 10)", fl.count("--k")),
        Flag("init", f"init scale in (0, {MAX_INIT:g}] (default 1e-4)", fl.positive("--init")),
        Flag("slope", "leaky slope α in [0, 1) (default 0.1)", fl.real("--slope", lo=0.0, hi=1.0)),
        Flag("seed", "PRNG seed (default 0)", fl.seed()),
        Flag("t1", "final time (default 1e8)", fl.positive("--t1")),
    )
    sweep_flags = (
        Flag(
            "init",
            f"init scales in (0, {MAX_INIT:g}], comma-separated (e.g. 1e-4,1)",
            grid_type(
                "--init",
                f"{__package__}.sweep:parse_inits",
                ("as_float", {"positive": True, "hi": MAX_INIT}),
            ),
            required=True,
        ),
        Flag(
            "slope",
            "leaky slopes α in [0, 1) (e.g. 0.1,0.5)",
            grid_type("--slope", f"{__package__}.sweep:parse_slopes", ("as_float", {"lo": 0.0})),
            required=True,
        ),
        Flag(
            "seeds",
            "seeds (data and θ(0)): a range 0-2 or a list 0,1,2 (default 0)",
            grid_type("--seeds", f"{__package__}.sweep:parse_prng_seeds"),
            default="0",
        ),
        Flag("k", "neurons per type (default 10)", fl.count("--k")),
        Flag("v", "output weight v (default 1)", fl.positive("--v")),
        Flag("n", "data points, even (default 100)", fl.count("--n", 4)),
        Flag("mean", "class mean m·e₁ (default 3)", fl.positive("--mean")),
        Flag("t1", "final time, > 1 (default 1e8)", fl.real("--t1", lo=1.0)),
        Flag("n_save", "log-spaced save times (default 61)", fl.count("--n-save", 3)),
        Flag("rtol", "relative tolerance (default 1e-6)", fl.tolerance("--rtol", "1e-6")),
        Flag("atol", "absolute tolerance (default 1e-9)", fl.tolerance("--atol", "1e-9")),
        Flag(
            "beta", "β of the NAR/PAR tests, ≥ 0 (default 0)", fl.real("--beta", nonnegative=True)
        ),
    )

    def default_config(self, quick: bool = False) -> Config:
        return default_config(quick)

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        return run(cfg, out, progress=progress)

    def sweep(self, out: Path, options: dict, **engine):
        """The grid init × slope × seeds (`flows.experiments.linear_teacher.sweep`)."""
        from .sweep import teacher_sweep

        return teacher_sweep(out, **{k: v for k, v in options.items() if v is not None}, **engine)

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """The exact flow on symmetric Gaussians with the loss clock."""
        given = {k: v for k, v in options.items() if v is not None and k != "init"}
        cfg = dataclasses.replace(Config(), **given)
        data = symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)
        obs = teacher_observables(teacher=data.teacher, beta=cfg.beta)
        init = cfg.small_init if options.get("init") is None else options["init"]
        return Simulated(run_flow(cfg, data, init, obs), cfg.rtol)


EXPERIMENT = LinearTeacherExperiment()
