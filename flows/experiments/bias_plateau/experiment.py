"""Experiment: bias, depth and the linear-interpolation plateau (THEORY.md §B).

Paper: *Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for
Deep Networks* (`shared/papers/000_*.txt`).

Three parts, each confronted with the paper's claims as `Check`s:

1. **Four-class r-homogeneous example (§4, Proposition 1).** f_i(x) = ⟨W_i, x⟩^r + b_i on
   x = e_c + ξ, gradient flow of (k/N)·Σ CE integrated exactly (`flows.simulate`), and the
   reduced tensor-power ODE of (W_ii, b_i) (`reduced.bias_plateau`) from the same W_ii(0):
   learning order = order of W_ii(0), the last-learned class ends with the top bias,
   learned classes sit below it, off-diagonal weights stay O(δ); repeated over seeds and k.
2. **Deep nets and Theorem 1.** f(x) = V_r σ(⋯σ(V_1 x)) + b on the synthetic data (scaled
   to ‖x‖ ≤ 1) and on scikit-learn's digits; linear interpolation θ^[α] between θ(0) and
   θ(T); the predicted error-plateau interval [δ/Δ_min, (Δ_min/(2V_max^r))^{1/(r−1)}] and
   loss bound log k − 2e(αV_max)^r against the measured curves (`reduced.interpolation`).
3. **Trends (3 seeds, mean ± sd).** The error plateau lengthens with depth, shortens as δ
   grows, and (nearly) disappears without the output bias.

Exact flows use σ = identity (smooth); a ReLU net is trained by gradient descent, because
ReLU kinks make an error-controlled solver take ~10²× more steps (see the check's reason).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np

from reduced import bias_plateau as rbp
from reduced import interpolation as rint

from ... import _flags as fl
from ..._baselines import gradient_descent
from ..._checks import Check
from ..._data import Dataset
from ..._errors import ConfigError
from ..._flags import Flag
from ..._problem import make_problem
from ..._simulate import simulate
from ..._solvers import SOLVERS
from ..._stages import first_crossing
from ..._sweep import grid_type
from ..._trajectory import Trajectory
from ...models.deep import DEEP_ACTIVATIONS, DeepFCN
from ...models.homogeneous import Homogeneous
from ..base import (
    AbstractExperiment,
    OutputDir,
    Report,
    Simulated,
    mpl_rcparams,
    new_figure,
    write_results_json,
)
from .data import (
    balance_reason,
    class_sum_cross_entropy,
    digits_data,
    orthogonal_data,
    scale_to_unit_ball,
)
from .interpolation import InterpolationCurve, interpolate, plateau
from .observables import classification_observables, homogeneous_observables

NAME = "bias-plateau"
#: The files `run` writes into `out/NAME/` (nothing else there is touched).
FILES = (
    "four_class.png",
    "interpolation.png",
    "trends.png",
    "bias_order.png",
    "trajectory.nc",
    "trajectory_deep.nc",
    "results.json",
)
SOURCE = "bias-plateau"
#: Constant C in the left end α₁′ = C·2·max|f^(0)|/Δ_min of the checked error-plateau interval.
ALPHA1_C = 2.0


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of `flows check bias-plateau` (frozen; saved with the results).

    **r-homogeneous example (§4):** `k` classes, `d` ≥ k dimensions, `n_per_class`
    samples each, noise `sigma`, degree `r`, init scale `delta`, `seed`. The run lasts
    T = `t_factor` × (the reduced model's time at which the (k−1)-th class reaches
    W_ii^r = 1). A class is *learned* once min_x u_c(x) ≥ `learned_prob` for good
    (Proposition 1's 1 − u ≤ C₁ with C₁ = 1 − `learned_prob`). Tolerances: learning
    times of full vs reduced flow within `reduced_time_rtol` (relative), final biases
    within `reduced_bias_rtol` × max|b_red(T)|; off-diagonals ≤ `offdiag_c` · δ; learned
    classes ≥ `bias_gap_c2` below the top bias. W_ii(0) must be distinct by a factor
    `min_w0_ratio` between neighbours (anti-concentration assumption). Sweep over
    `sweep_k` × `sweep_seeds`.

    **Deep nets (Theorem 1):** `deep_depth`, `deep_width`, `deep_activation`,
    `deep_delta`, `deep_t1`, synthetic data with `deep_n_per_class` samples per class
    (k, d, σ = `deep_sigma` as above, scaled to ‖x‖ ≤ 1); digits with
    `digits_n_per_class` per class, width `digits_width`, time `digits_t1`; `relu_run`
    adds a ReLU net trained by GD with rate `gd_lr`. Interpolation on `n_alpha` points;
    error plateau: error ≥ 1 − 1/k − `plateau_tol`.

    **Trends** (synthetic deep net, exact flow unless `sweep_method` = 'gd'): depths
    `sweep_depths`, scales `sweep_deltas`, seeds `trend_seeds`; a trend holds when the
    mean plateau moves the predicted way by more than `trend_tol` end to end and never
    the wrong way by more than `trend_tol`.
    """

    k: int = 4
    d: int = 16
    n_per_class: int = 10
    sigma: float = 0.02
    r: int = 4
    delta: float = 0.1
    seed: int = 0
    t_factor: float = 1.5
    solver: str = "tsit5"
    rtol: float = 1e-8
    atol: float = 1e-10
    n_save: int = 801
    learned_prob: float = 0.5
    reduced_time_rtol: float = 0.05
    reduced_bias_rtol: float = 0.05
    offdiag_c: float = 5.0
    bias_gap_c2: float = 0.5
    min_w0_ratio: float = 1.02
    sweep_k: tuple[int, ...] = (3, 4, 5)
    sweep_seeds: tuple[int, ...] = (1, 2, 3)
    deep_depth: int = 4
    deep_width: int = 16
    deep_activation: str = "identity"
    deep_delta: float = 1e-3
    deep_t1: float = 150.0
    deep_n_per_class: int = 10
    deep_sigma: float = 0.1
    deep_rtol: float = 1e-6
    deep_atol: float = 1e-9
    digits: bool = True
    digits_n_per_class: int = 10
    digits_width: int = 32
    digits_t1: float = 80.0
    relu_run: bool = True
    gd_lr: float = 0.05
    n_alpha: int = 50
    plateau_tol: float = 0.02
    sweep_method: str = "gd"
    sweep_activation: str = "relu"
    sweep_t1: float = 300.0
    sweep_depths: tuple[int, ...] = (3, 4, 5, 6)
    sweep_deltas: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
    trend_seeds: tuple[int, ...] = (0, 1, 2)
    trend_tol: float = 0.05

    def __post_init__(self):
        def integer(name, v, lo):
            if not (isinstance(v, int) and not isinstance(v, bool) and v >= lo):
                raise ConfigError(f"`{name}` must be an integer ≥ {lo}; got {v!r}.")

        def positive(name, v):
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"`{name}` must be a finite number > 0; got {v!r}.")

        integer("k", self.k, 2)
        integer("r", self.r, 1)
        integer("d", self.d, 1)
        if self.d < self.k:
            raise ConfigError(
                f"`d` must be ≥ k = {self.k} (orthonormal class features e_1 … e_k); "
                f"got d = {self.d}."
            )
        for name in ("n_per_class", "deep_n_per_class", "digits_n_per_class", "deep_width"):
            integer(name, getattr(self, name), 1)
        integer("digits_width", self.digits_width, 1)
        integer("deep_depth", self.deep_depth, 1)
        integer("n_save", self.n_save, 10)
        integer("n_alpha", self.n_alpha, 2)
        for name in (
            "delta",
            "deep_delta",
            "t_factor",
            "rtol",
            "atol",
            "deep_rtol",
            "deep_atol",
            "deep_t1",
            "digits_t1",
            "gd_lr",
            "reduced_time_rtol",
            "reduced_bias_rtol",
            "offdiag_c",
            "bias_gap_c2",
            "trend_tol",
            "plateau_tol",
        ):
            positive(name, getattr(self, name))
        if not self.delta < 1:
            raise ConfigError(
                f"`delta` (δ, the init scale) must be < 1: §4's Proposition 1 is about small "
                f"initialization, and the tensor-power ODE's blow-up times shrink like "
                f"δ^−(r−2); got δ = {self.delta!r}. Try δ = 0.1 (default) or smaller."
            )
        if not (isinstance(self.sigma, (int, float)) and self.sigma >= 0):
            raise ConfigError(f"`sigma` must be ≥ 0; got {self.sigma!r}.")
        if not (isinstance(self.deep_sigma, (int, float)) and self.deep_sigma >= 0):
            raise ConfigError(f"`deep_sigma` must be ≥ 0; got {self.deep_sigma!r}.")
        if not 0 < self.learned_prob < 1:
            raise ConfigError(f"`learned_prob` must lie in (0, 1); got {self.learned_prob!r}.")
        if not self.min_w0_ratio >= 1:
            raise ConfigError(f"`min_w0_ratio` must be ≥ 1; got {self.min_w0_ratio!r}.")
        if self.solver not in SOLVERS:
            raise ConfigError(f"`solver` must be one of {sorted(SOLVERS)}; got {self.solver!r}.")
        if self.deep_activation not in DEEP_ACTIVATIONS:
            raise ConfigError(
                f"`deep_activation` must be one of {sorted(DEEP_ACTIVATIONS)}; "
                f"got {self.deep_activation!r}."
            )
        if self.sweep_activation not in DEEP_ACTIVATIONS:
            raise ConfigError(
                f"`sweep_activation` must be one of {sorted(DEEP_ACTIVATIONS)}; "
                f"got {self.sweep_activation!r}."
            )
        positive("sweep_t1", self.sweep_t1)
        if self.sweep_method not in ("flow", "gd"):
            raise ConfigError(f"`sweep_method` must be 'flow' or 'gd'; got {self.sweep_method!r}.")
        for kk in self.sweep_k:
            integer("sweep_k entries", kk, 2)
            if kk > self.d:
                raise ConfigError(f"`sweep_k` entries must be ≤ d = {self.d}; got {kk}.")
        for dd in self.sweep_depths:
            integer("sweep_depths entries", dd, 1)
        for dl in self.sweep_deltas:
            positive("sweep_deltas entries", dl)


def default_config(quick: bool = False) -> Config:
    """The built-in default; `quick` is a smaller version (fewer sweep points and seeds,
    no ReLU run, a smaller digits subset)."""
    if quick:
        return Config(
            n_save=401,
            sweep_k=(4,),
            sweep_seeds=(1, 2),
            digits=False,
            relu_run=False,
            sweep_depths=(3, 6),
            sweep_deltas=(1e-3, 1e-1),
            trend_seeds=(0, 1),
            sweep_t1=150.0,
        )
    return Config()


def _fmt(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}" if math.isfinite(x) else "not reached"


# ---------------------------------------------------------------------------------------
# Part 1: the r-homogeneous example (§4).


@functools.partial(jax.jit, static_argnums=(3, 4))
def _reduced_solve(w0, b0, ts, r: int, k: int):
    """The tensor-power ODE (reduced.bias_plateau) from (w0, b0), saved at `ts`."""
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rbp.tensor_power_vector_field),
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        (w0, b0),
        args=(r, k),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-12),
        max_steps=200_000,
    )
    return sol.ys


def reduced_trajectory(w0, r: int, k: int, ts) -> tuple[np.ndarray, np.ndarray]:
    """(w(t), b(t)) of the reduced tensor-power ODE from w(0) = `w0`, b(0) = 0 at times `ts`."""
    w, b = _reduced_solve(
        jnp.asarray(w0, jnp.float64), jnp.zeros(k), jnp.asarray(ts, jnp.float64), r, k
    )
    return np.asarray(w), np.asarray(b)


def crossing_times(times, w, r: int) -> np.ndarray:
    """Per class, the first time W_ii^r reaches 1 (the signal is O(1): the class's
    tensor-power blow-up); NaN when never reached."""
    return np.array(
        [first_crossing(times, w[:, i] ** r, 1.0, below=False) for i in range(w.shape[1])]
    )


def learned_times(times, min_prob, threshold: float) -> np.ndarray:
    """Per class, the first saved time from which min_x u_c(x) ≥ `threshold` until the end
    (learned for good); NaN when not learned at the last time."""
    out = np.full(min_prob.shape[1], np.nan)
    for c in range(min_prob.shape[1]):
        ok = min_prob[:, c] >= threshold
        if not ok[-1]:
            continue
        bad = np.flatnonzero(~ok)
        out[c] = times[0] if bad.size == 0 else times[bad[-1] + 1]
    return out


@dataclasses.dataclass
class HomogeneousRun:
    """One run of §4's example: the full flow, the reduced flow and derived times."""

    k: int
    seed: int
    w0: np.ndarray
    traj: Trajectory
    w_red: np.ndarray
    b_red: np.ndarray
    t_learned: np.ndarray
    t_cross: np.ndarray
    t_cross_red: np.ndarray
    applicable: bool
    reason: str


def run_homogeneous(
    cfg: Config, *, k: int | None = None, seed: int | None = None
) -> HomogeneousRun:
    """Integrate §4's example (exact flow) and the reduced tensor-power ODE from its W_ii(0)."""
    k = cfg.k if k is None else k
    seed = cfg.seed if seed is None else seed
    data = orthogonal_data(k=k, n_per_class=cfg.n_per_class, d=cfg.d, sigma=cfg.sigma, seed=seed)
    model = Homogeneous(k=k, d=cfg.d, r=cfg.r, delta=cfg.delta)
    problem = make_problem(model, data, key=seed, loss_fn=class_sum_cross_entropy)
    w0 = np.diag(np.asarray(problem.theta0["W"]))
    ok, why = model.theorem_applicable()
    reasons = [] if ok else [why]
    ws = np.sort(w0)[::-1]
    ratio = float(np.min(ws[:-1] / ws[1:]))
    if ratio < cfg.min_w0_ratio:
        reasons.append(
            f"W_ii(0) too close: neighbours differ by a factor {ratio:.3g} < {cfg.min_w0_ratio} "
            "(Proposition 1 needs distinct W_ii(0))"
        )
    bal = balance_reason(data.y, k)
    if bal:
        reasons.append(bal)
    # Time horizon from the reduced model: 1.5 × the time the (k−1)-th class blows up.
    if cfg.r >= 3:
        t_star = np.sort(np.asarray(rbp.blowup_times(w0, cfg.r, k)))
        t_probe = np.linspace(0.0, 4.0 * float(t_star[k - 2]), cfg.n_save)
        wp, _ = reduced_trajectory(w0, cfg.r, k, t_probe)
        tc = np.sort(crossing_times(t_probe, wp, cfg.r))[k - 2]
        t1 = cfg.t_factor * (tc if math.isfinite(tc) else t_probe[-1] / cfg.t_factor)
    else:
        t1 = 50.0 / cfg.delta ** max(cfg.r - 2, 0)
    if not (math.isfinite(t1) and t1 > 0):
        raise ConfigError(
            f"no time horizon: the reduced tensor-power ODE from W_ii(0) = {w0} (δ = "
            f"{cfg.delta}, r = {cfg.r}) gives t1 = {t1}; choose a smaller `delta`."
        )
    traj = simulate(
        problem,
        t1=float(t1),
        n_save=cfg.n_save,
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=homogeneous_observables,
        save_params="ends",
    )
    traj.config["experiment"] = {"name": NAME, "part": "homogeneous", "k": k, "seed": seed}
    if cfg.r >= 3:
        w_red, b_red = reduced_trajectory(w0, cfg.r, k, traj.times)
    else:
        w_red = b_red = np.full((len(traj.times), k), np.nan)
    o = traj.observables
    return HomogeneousRun(
        k=k,
        seed=seed,
        w0=w0,
        traj=traj,
        w_red=w_red,
        b_red=b_red,
        t_learned=learned_times(traj.times, o["class_min_prob"], cfg.learned_prob),
        t_cross=crossing_times(traj.times, o["W_diag"], cfg.r),
        t_cross_red=crossing_times(traj.times, w_red, cfg.r),
        applicable=not reasons,
        reason="; ".join(reasons),
    )


def check_learning_order(t_learned, predicted_order, *, source: str = f"{SOURCE} Prop 1") -> Check:
    """Classes are learned in `predicted_order` (ties within one save interval allowed)."""
    claim = "classes learned one by one in the order of W_ii(0)"
    t = np.asarray(t_learned, dtype=float)
    pred = [int(c) for c in predicted_order]
    if not np.all(np.isfinite(t)):
        missing = [int(c) for c in np.flatnonzero(~np.isfinite(t))]
        return Check.not_applicable(
            claim, source, f"classes {missing} are not learned by T; increase t_factor"
        )
    measured = [int(c) for c in np.argsort(t, kind="stable")]
    seq = t[pred]
    holds = bool(np.all(np.diff(seq) >= 0))
    return Check.compare(
        claim,
        source,
        holds=holds,
        predicted=f"order {pred} (decreasing W_ii(0))",
        measured=f"order {measured}; times {', '.join(f'{x:.3g}' for x in seq)}",
        values={"t_learned": t.tolist(), "predicted_order": pred, "measured_order": measured},
        reason="learned: min over the class's samples of u_c(x) ≥ 1/2 from then on",
    )


def check_top_bias(b_T, predicted_last: int, *, source: str = f"{SOURCE} Prop 1") -> Check:
    """The last-learned class (smallest W_ii(0)) ends with the largest bias."""
    b_T = np.asarray(b_T)
    top = int(np.argmax(b_T))
    return Check.compare(
        "the last-learned class ends with the largest bias",
        source,
        holds=top == int(predicted_last),
        predicted=f"argmax b(T) = class {int(predicted_last)} (smallest W_ii(0))",
        measured=f"argmax b(T) = class {top}; b(T) = [{', '.join(f'{x:.3g}' for x in b_T)}]",
        values={"top": top, "predicted": int(predicted_last), "b_T": b_T.tolist()},
    )


def learned_gaps(run: HomogeneousRun) -> tuple[float, list[dict]]:
    """min over checkpoints of (top bias − bias of a class whose learning phase is over).

    Proposition 1: class j's phase ends at s_{j+1}, after which b_j ≤ max b − C₂. The
    checkpoints are the learning times τ of the 2nd … (k−1)-th class (measured order),
    where every earlier-learned class must sit below the top, and the final time T, where
    every class but the top one must. (The last class is learned by its bias as soon as
    the (k−1)-th class is, so its own learning time is no checkpoint.)"""
    t, o = run.traj.times, run.traj.observables
    order = np.argsort(run.t_learned, kind="stable")
    b = o["b"]
    rows = []
    for i in range(1, len(order) - 1):
        tau = run.t_learned[order[i]]
        bj = b[min(int(np.searchsorted(t, tau)), len(t) - 1)]
        for c in order[:i]:
            rows.append({"time": float(tau), "class": int(c), "gap": float(bj.max() - bj[c])})
    bT = b[-1]
    for c in range(run.k):
        if c != int(np.argmax(bT)):
            rows.append({"time": float(t[-1]), "class": c, "gap": float(bT.max() - bT[c])})
    return min(r["gap"] for r in rows), rows


def homogeneous_checks(run: HomogeneousRun, cfg: Config) -> list[Check]:
    """Proposition 1's claims and the full-vs-reduced comparison for one run."""
    o = run.traj.observables
    checks: list[Check] = []
    # Accuracy certificate of the solve.
    res = float(np.max(o["energy_residual"]))
    tol = 100 * cfg.rtol * float(o["loss"][0])
    checks.append(
        Check.compare(
            "energy identity L(0) − L(t) = ∫‖∇L‖² along the solve",
            "gradient flow",
            holds=res <= tol,
            predicted=f"residual ≤ 100·rtol·L(0) = {tol:.2e}",
            measured=f"max residual {res:.2e}",
            values={"max_residual": res, "tolerance": tol},
        )
    )
    assumptions = (
        f"k = {run.k}, r = {cfg.r}, δ = {cfg.delta}, σ = {cfg.sigma}, d = {cfg.d}, "
        f"N/k = {cfg.n_per_class}, W_ii(0) = [{', '.join(f'{x:.3g}' for x in run.w0)}]"
    )
    claims = [
        ("full flow tracks the reduced tensor-power ODE: W_ii^r = 1 crossing times", "§4"),
        ("full flow tracks the reduced tensor-power ODE: biases b(T)", "§4"),
        ("classes learned one by one in the order of W_ii(0)", "Prop 1"),
        ("the last-learned class ends with the largest bias", "Prop 1"),
        (f"learned classes sit ≥ C₂ = {cfg.bias_gap_c2} below the top bias", "Prop 1"),
        (f"off-diagonal weights stay O(δ): max_t,i≠j |W_ij| ≤ {cfg.offdiag_c}·δ", "Prop 1"),
    ]
    if not run.applicable:
        for claim, src in claims:
            checks.append(
                Check.not_applicable(claim, f"{SOURCE} {src}", run.reason, assumptions=assumptions)
            )
        return checks
    # 1. Full vs reduced: crossing times of the classes that cross in the reduced model.
    tc, tr_ = run.t_cross, run.t_cross_red
    sel = np.isfinite(tr_)
    rel = np.abs(tc[sel] - tr_[sel]) / tr_[sel]
    worst = float(np.max(rel)) if rel.size and np.all(np.isfinite(rel)) else math.inf
    checks.append(
        Check.compare(
            claims[0][0],
            f"{SOURCE} §4",
            holds=worst <= cfg.reduced_time_rtol,
            predicted=f"relative difference ≤ {cfg.reduced_time_rtol:g}; reduced: "
            + ", ".join(_fmt(x) for x in tr_),
            measured=f"max {worst:.3g}; full: " + ", ".join(_fmt(x) for x in tc),
            assumptions=assumptions,
            values={"t_cross_full": tc.tolist(), "t_cross_reduced": tr_.tolist(), "max_rel": worst},
            reason="metric: |t_full − t_red|/t_red of the first time W_ii^r = 1 (linear "
            "interpolation between saves); the reduced ODE drops noise and off-diagonal "
            "weights, exact when σ = 0 and W is diagonal",
        )
    )
    bT, brT = o["b"][-1], run.b_red[-1]
    scale = float(np.max(np.abs(brT)))
    db = float(np.max(np.abs(bT - brT)))
    checks.append(
        Check.compare(
            claims[1][0],
            f"{SOURCE} §4",
            holds=db <= cfg.reduced_bias_rtol * scale,
            predicted=f"max_i |b_i − b_i^red| ≤ {cfg.reduced_bias_rtol:g}·max|b^red| = "
            f"{cfg.reduced_bias_rtol * scale:.3g}",
            measured=f"{db:.3g}",
            assumptions=assumptions,
            values={"b_T": bT.tolist(), "b_red_T": brT.tolist(), "max_abs_diff": db},
            reason="biases at the final time T (the sup over t is dominated by small shifts of "
            "the sharp learning transitions, so the end state is compared)",
        )
    )
    order = np.asarray(rbp.predicted_learning_order(run.w0))
    chk = check_learning_order(run.t_learned, order)
    checks.append(dataclasses.replace(chk, assumptions=assumptions))
    checks.append(dataclasses.replace(check_top_bias(bT, order[-1]), assumptions=assumptions))
    if np.all(np.isfinite(run.t_learned)):
        gap, rows = learned_gaps(run)
        checks.append(
            Check.compare(
                claims[4][0],
                f"{SOURCE} Prop 1",
                holds=gap >= cfg.bias_gap_c2,
                predicted=f"top bias − learned class's bias ≥ {cfg.bias_gap_c2}",
                measured=f"min gap {gap:.3g} over {len(rows)} (time, class) checkpoints",
                assumptions=assumptions,
                values={"min_gap": gap, "rows": rows},
                reason="checked when each later class is learned, and at T",
            )
        )
    else:
        checks.append(
            Check.not_applicable(
                claims[4][0], f"{SOURCE} Prop 1", "not every class is learned by T"
            )
        )
    off = float(np.max(o["offdiag_max"]))
    off0 = float(o["offdiag_max"][0])
    checks.append(
        Check.compare(
            claims[5][0],
            f"{SOURCE} Prop 1",
            holds=off <= cfg.offdiag_c * cfg.delta,
            predicted=f"≤ {cfg.offdiag_c:g}·δ = {cfg.offdiag_c * cfg.delta:.3g}",
            measured=f"{off:.3g} = {off / cfg.delta:.3g}·δ (at t = 0: {off0 / cfg.delta:.3g}·δ)",
            assumptions=assumptions,
            values={"offdiag_max": off, "offdiag_max_0": off0},
        )
    )
    return checks


def homogeneous_sweep(cfg: Config, *, progress: bool = False) -> list[dict]:
    """Proposition 1's per-run claims over `sweep_k` × `sweep_seeds`."""
    rows = []
    for k in cfg.sweep_k:
        for seed in cfg.sweep_seeds:
            run = run_homogeneous(cfg, k=k, seed=seed)
            row = {"k": k, "seed": seed, "applicable": run.applicable, "reason": run.reason}
            row["w0"] = run.w0.tolist()
            row["t_learned"] = run.t_learned.tolist()
            b_T = run.traj.observables["b"][-1]
            row["b_T"] = b_T.tolist()
            if run.applicable:
                order = np.asarray(rbp.predicted_learning_order(run.w0))
                verdicts = {}
                for name, c in (
                    ("order", check_learning_order(run.t_learned, order)),
                    ("top_bias", check_top_bias(b_T, order[-1])),
                ):
                    verdicts[name] = c.verdict
                off = float(np.max(run.traj.observables["offdiag_max"]))
                verdicts["offdiag"] = "holds" if off <= cfg.offdiag_c * cfg.delta else "fails"
                row.update(verdicts)
                row["rank_by_w0"] = np.argsort(np.argsort(-run.w0)).tolist()
            rows.append(row)
            if progress:
                print(f"  [{NAME}] homogeneous k={k} seed={seed}: {row.get('order', 'n/a')}")
    return rows


def check_homogeneous_sweep(rows: list[dict], cfg: Config) -> Check:
    claim = "order, top bias and O(δ) off-diagonals hold over seeds and k"
    src = f"{SOURCE} Prop 1"
    app = [r for r in rows if r["applicable"]]
    if not app:
        return Check.not_applicable(claim, src, "no sweep run meets the assumptions")
    keys = ("order", "top_bias", "offdiag")
    n_na = sum(any(r[key] == "not applicable" for key in keys) for r in app)
    good = [r for r in app if all(r[key] == "holds" for key in keys)]
    bad = [(r["k"], r["seed"]) for r in app if any(r[key] == "fails" for key in keys)]
    return Check.compare(
        claim,
        src,
        holds=not bad and len(good) >= 1,
        predicted=f"all applicable runs of k ∈ {list(cfg.sweep_k)} × seeds {list(cfg.sweep_seeds)}",
        measured=f"{len(good)}/{len(app)} runs hold all three"
        + (f"; failing (k, seed): {bad}" if bad else "")
        + (f"; {n_na} not reached" if n_na else ""),
        values={"n_runs": len(rows), "n_applicable": len(app), "n_good": len(good)},
        reason=f"{len(rows) - len(app)} runs excluded (assumptions)"
        if len(app) < len(rows)
        else "",
    )


# ---------------------------------------------------------------------------------------
# Part 2: deep networks, linear interpolation and Theorem 1.


def synthetic_deep_data(cfg: Config, seed: int = 0) -> Dataset:
    """The §4 data for the deep nets, scaled to ‖x‖ ≤ 1 (Theorem 1's assumption)."""
    return scale_to_unit_ball(
        orthogonal_data(
            k=cfg.k, n_per_class=cfg.deep_n_per_class, d=cfg.d, sigma=cfg.deep_sigma, seed=seed
        )
    )


@dataclasses.dataclass
class DeepRun:
    """A trained deep net, its interpolation curve and Theorem 1's quantities."""

    label: str
    model: DeepFCN
    data: Dataset
    traj: Trajectory
    curve: InterpolationCurve
    theta_0: dict
    theta_T: dict
    method: str


def train_deep(
    model: DeepFCN,
    data: Dataset,
    *,
    seed: int,
    t1: float,
    method: str,
    cfg: Config,
    label: str = "",
) -> DeepRun:
    """Train by exact flow (`method='flow'`) or GD (`'gd'`, rate `cfg.gd_lr`) and interpolate."""
    problem = make_problem(model, data, key=seed, loss_fn=class_sum_cross_entropy)
    if method == "flow":
        traj = simulate(
            problem,
            t1=t1,
            n_save=201,
            rtol=cfg.deep_rtol,
            atol=cfg.deep_atol,
            observables=classification_observables,
            save_params="ends",
        )
    else:
        traj = gradient_descent(
            problem,
            learning_rate=cfg.gd_lr,
            t1=t1,
            n_save=201,
            observables=classification_observables,
            save_params="ends",
        )
        if traj.stats["result"] != "successful":
            raise ConfigError(
                f"gradient descent diverged on {label or data.name} ({traj.stats['result']}); "
                f"lower `gd_lr` (now {cfg.gd_lr})."
            )
    traj.config["experiment"] = {"name": NAME, "part": "deep", "label": label, "seed": seed}
    th0 = {n: traj.param(n, 0) for n in traj.params}
    thT = {n: traj.param(n, -1) for n in traj.params}
    curve = interpolate(model, data.x, data.y, th0, thT, n_alpha=cfg.n_alpha)
    return DeepRun(label, model, data, traj, curve, th0, thT, method)


def theorem1_of(run: DeepRun) -> rint.Theorem1 | None:
    if "b" not in run.theta_T:
        return None
    return rint.theorem1(
        run.theta_T["b"],
        [run.theta_T[n] for n in run.model.layer_names],
        run.model.depth,
        run.model.delta,
    )


def init_spread(run: DeepRun) -> float:
    """2·max_x max_i |f_i^(0)(x)|: the largest logit difference θ(0) can make (≈ δ·O(1))."""
    f0 = np.asarray(run.model.features(run.theta_0, jnp.asarray(run.data.x)))
    return 2.0 * float(np.max(np.abs(f0)))


def checked_interval(run: DeepRun, th: rint.Theorem1) -> tuple[float, float]:
    """[α₁′, α₂] with α₁′ = max(δ, C·2 max|f^(0)|)/Δ_min, C = `ALPHA1_C` = 2: the theorem's
    δ/Δ_min with δ read as the spread of the initial logits and the statement's 'roughly,
    for small δ' as a factor 2 (with the literal δ the left end fails whenever the initial
    logits differ by more than δ; at C = 1 the bias only ties them there)."""
    return max(th.alpha_1, ALPHA1_C * init_spread(run) / th.delta_min), th.alpha_2


def check_error_interval(
    run: DeepRun,
    th: rint.Theorem1,
    *,
    interval: tuple[float, float] | None = None,
    n_points: int = 25,
    source: str = f"{SOURCE} Thm 1",
) -> Check:
    """Every sample is predicted as k* on `interval` (default `checked_interval`; checked on
    `n_points` evenly spaced α there)."""
    claim = f"{run.label}: every sample predicted as k* on [δ/Δ_min, (Δ_min/2V_max^r)^(1/(r−1))]"
    lo, hi = interval if interval is not None else checked_interval(run, th)
    if not lo < hi:
        return Check.not_applicable(
            claim,
            source,
            f"the interval is empty: α₁′ = {lo:.3g} ≥ α₂ = {hi:.3g} (bias gap too small for "
            "the initial logits' spread)",
            values=th.to_dict(),
        )
    alphas = np.linspace(lo, hi, n_points)
    c = interpolate(run.model, run.data.x, run.data.y, run.theta_0, run.theta_T, alphas=alphas)
    frac = c.pred_fraction[:, th.k_star]
    worst = float(frac.min())
    err_lo = float(c.error.min())
    return Check.compare(
        claim,
        source,
        holds=worst == 1.0,
        predicted=f"α ∈ [{lo:.3g}, {hi:.3g}]: all predicted as class "
        f"{th.k_star}, error = 1 − 1/k = {c.chance_error:.3g}",
        measured=f"min fraction predicted {th.k_star}: {worst:.3g}; min error {err_lo:.3g}",
        values={**th.to_dict(), "min_fraction_k_star": worst, "min_error": err_lo},
        reason=f"Δ_min = {th.delta_min:.3g}, V_max = {th.v_max:.3g} (max spectral norm of "
        f"V_i(T)), δ = {th.delta:g}, r = {th.r}; α₁ = δ/Δ_min = {th.alpha_1:.3g} read as "
        f"α₁′ = max(δ, {ALPHA1_C:g}·2·max|f^(0)|)/Δ_min = {lo:.3g} (2·max|f^(0)| = "
        f"{init_spread(run):.3g})",
    )


def check_loss_bound(run: DeepRun, th: rint.Theorem1, *, source: str = f"{SOURCE} Thm 1") -> Check:
    """γ_loss(α) ≥ log k − 2e(αV_max)^r for grid α ≥ δ/Δ_min (ε = (αV_max)^r)."""
    c = run.curve
    sel = c.alphas >= th.alpha_1
    bound = th.loss_bound(c.alphas[sel], c.k)
    margin = c.loss[sel] - bound
    worst = float(margin.min()) if margin.size else math.nan
    i = int(np.argmin(margin)) if margin.size else 0
    return Check.compare(
        f"{run.label}: average loss ≥ log k − 2eε for α ≤ ε^(1/r)/V_max",
        source,
        holds=worst >= -1e-12,
        predicted="γ_loss(α) − [log k − 2e(αV_max)^r] ≥ 0 on grid α ≥ δ/Δ_min",
        measured=f"min margin {worst:.3g} (at α = {c.alphas[sel][i]:.3g})",
        values={"min_margin": worst},
        reason="ε = (αV_max)^r makes α = ε^(1/r)/V_max, so the bound is a curve in α; "
        "α < δ/Δ_min is skipped as in the theorem (there θ(0) dominates)",
    )


def theorem1_checks(run: DeepRun, cfg: Config) -> list[Check]:
    """Theorem 1 for one trained deep net (or not applicable, with the reason)."""
    claims = [
        f"{run.label}: every sample predicted as k* on [δ/Δ_min, (Δ_min/2V_max^r)^(1/(r−1))]",
        f"{run.label}: average loss ≥ log k − 2eε for α ≤ ε^(1/r)/V_max",
    ]
    src = f"{SOURCE} Thm 1"
    reasons = []
    ok, why = run.model.theorem_applicable()
    if not ok:
        reasons.append(why)
    xmax = float(np.max(np.linalg.norm(run.data.x, axis=1)))
    if xmax > 1 + 1e-12:
        reasons.append(f"inputs exceed the unit ball (max ‖x‖ = {xmax:.3g})")
    bal = balance_reason(run.data.y, run.model.k)
    th = theorem1_of(run)
    if th is not None and not th.delta_min > 0:
        reasons.append("no bias gap after training (Δ_min = 0)")
    if reasons:
        return [Check.not_applicable(c, src, "; ".join(reasons)) for c in claims]
    checks = []
    if not th.nonempty:
        checks.append(
            Check.not_applicable(
                claims[0],
                src,
                f"the predicted interval is empty: δ/Δ_min = {th.alpha_1:.3g} > "
                f"(Δ_min/2V_max^r)^(1/(r−1)) = {th.alpha_2:.3g} (bias gap too small)",
                values=th.to_dict(),
            )
        )
    else:
        chk = check_error_interval(run, th)
        if bal:
            chk = dataclasses.replace(chk, reason=chk.reason + f"; {bal} (error ≠ 1 − 1/k)")
        checks.append(chk)
    checks.append(check_loss_bound(run, th))
    return checks


def check_measured_plateau(run: DeepRun, th: rint.Theorem1 | None, cfg: Config) -> Check:
    """The measured error plateau (chance-level error) contains the predicted interval."""
    claim = f"{run.label}: measured error plateau ⊇ predicted [α₁, α₂] (grid of {cfg.n_alpha})"
    src = f"{SOURCE} Thm 1"
    pl = plateau(run.curve, kind="error", tol=cfg.plateau_tol)
    if th is None or not th.nonempty:
        return Check.not_applicable(
            claim, src, "no bias, or the predicted interval is empty", measured=f"{pl.length:.3g}"
        )
    a = run.curve.alphas
    lo, hi = checked_interval(run, th)
    inside = (a >= lo) & (a <= hi)
    if not inside.any():
        return Check.not_applicable(claim, src, f"no grid α in [α₁′, α₂] = [{lo:.3g}, {hi:.3g}]")
    ok = bool(np.all(run.curve.error[inside] >= run.curve.chance_error - cfg.plateau_tol))
    return Check.compare(
        claim,
        src,
        holds=ok,
        predicted=f"error ≥ 1 − 1/k − {cfg.plateau_tol:g} on [α₁′, α₂] = [{lo:.3g}, {hi:.3g}]",
        measured=f"plateau [{pl.start:.3g}, {pl.end:.3g}] (length {pl.length:.3g})",
        values={"plateau_start": pl.start, "plateau_end": pl.end, "length": pl.length},
        reason="the theorem's α₂ is a lower bound on the plateau's end; the measured end "
        f"is {pl.end / th.alpha_2:.2g}× α₂"
        if math.isfinite(pl.end)
        else "",
    )


# ---------------------------------------------------------------------------------------
# Part 3: trends over depth, δ and the output bias.


def trend_sweep(cfg: Config, *, progress: bool = False) -> list[dict]:
    """Error-plateau length of the synthetic deep net over depth, δ and bias, per seed."""
    settings = [("depth", r_, cfg.deep_delta, True) for r_ in cfg.sweep_depths]
    settings += [("delta", cfg.deep_depth, dl, True) for dl in cfg.sweep_deltas]
    settings += [("bias", cfg.deep_depth, cfg.deep_delta, b) for b in (True, False)]
    rows, cache = [], {}
    for family, depth, delta, bias in settings:
        for seed in cfg.trend_seeds:
            key = (depth, delta, bias, seed)
            if key not in cache:
                data = synthetic_deep_data(cfg, seed)
                model = DeepFCN(
                    d=data.d,
                    k=cfg.k,
                    depth=depth,
                    width=cfg.deep_width,
                    activation=cfg.sweep_activation,
                    bias=bias,
                    delta=delta,
                )
                run = train_deep(
                    model, data, seed=seed, t1=cfg.sweep_t1, method=cfg.sweep_method, cfg=cfg
                )
                pl = plateau(run.curve, kind="error", tol=cfg.plateau_tol)
                th = theorem1_of(run)
                cache[key] = {
                    "length": pl.length,
                    "end": pl.end,
                    "final_error": float(run.traj.observables["train_error"][-1]),
                    "error_curve": run.curve.error.tolist(),
                    "loss_curve": run.curve.loss.tolist(),
                    "alpha_2": th.alpha_2 if th is not None else math.nan,
                    "delta_min": th.delta_min if th is not None else math.nan,
                    "vf_evals": run.traj.stats["vf_evals"],
                }
                if progress:
                    print(
                        f"  [{NAME}] trend depth={depth} δ={delta:g} bias={bias} seed={seed}: "
                        f"plateau {pl.length:.3g}",
                        flush=True,
                    )
            rows.append(
                {
                    "family": family,
                    "depth": depth,
                    "delta": delta,
                    "bias": bias,
                    "seed": seed,
                    **cache[key],
                }
            )
    return rows


def _means(rows, family, key):
    xs = sorted({r[key] for r in rows if r["family"] == family}, key=float)
    out = []
    for x in xs:
        v = np.array([r["length"] for r in rows if r["family"] == family and r[key] == x])
        out.append((x, float(v.mean()), float(v.std()), len(v)))
    return out


def check_trend(
    stats: list[tuple], *, increasing: bool, tol: float, claim: str, name: str
) -> Check:
    """A monotone trend of the mean plateau length: it moves the predicted way by more than
    `tol` end to end and never the wrong way by more than `tol` between neighbours."""
    src = f"{SOURCE} Thm 1, §5"
    if len(stats) < 2:
        return Check.not_applicable(claim, src, f"needs ≥ 2 values of {name}")
    m = np.array([s[1] for s in stats])
    sgn = 1.0 if increasing else -1.0
    steps = sgn * np.diff(m)
    holds = bool(sgn * (m[-1] - m[0]) > tol and np.all(steps >= -tol))
    txt = "; ".join(f"{name}={s[0]:g}: {s[1]:.3g}±{s[2]:.2g}" for s in stats)
    return Check.compare(
        claim,
        src,
        holds=holds,
        predicted=f"mean length {'in' if increasing else 'de'}creasing (end to end by > {tol:g}, "
        f"no step the wrong way by > {tol:g})",
        measured=txt,
        values={"means": m.tolist(), "sds": [s[2] for s in stats], "n_seeds": stats[0][3]},
    )


def trend_checks(rows: list[dict], cfg: Config) -> list[Check]:
    how = "exact flow" if cfg.sweep_method == "flow" else f"GD (η = {cfg.gd_lr})"
    note = (
        f"error plateau = longest run of grid α with error ≥ 1 − 1/k − {cfg.plateau_tol:g}; "
        f"mean ± sd over seeds {list(cfg.trend_seeds)}; trained by {how} to T = "
        f"{cfg.sweep_t1:g}, σ = {cfg.sweep_activation}, width {cfg.deep_width}"
        + (
            " (GD: the ReLU flow costs ~10²× more gradient evaluations; GD at this η matches "
            "the identity net's flow plateau, see the GD check)"
            if cfg.sweep_method == "gd"
            else ""
        )
    )
    out = []
    c = check_trend(
        _means(rows, "depth", "depth"),
        increasing=True,
        tol=cfg.trend_tol,
        claim="error plateau lengthens with depth r",
        name="r",
    )
    out.append(dataclasses.replace(c, reason=note))
    c = check_trend(
        _means(rows, "delta", "delta"),
        increasing=False,
        tol=cfg.trend_tol,
        claim="error plateau shortens as the init scale δ grows",
        name="δ",
    )
    out.append(dataclasses.replace(c, reason=note))
    b = {s[0]: s for s in _means(rows, "bias", "bias")}
    if True in b and False in b:
        with_b, without = b[True], b[False]
        out.append(
            Check.compare(
                "error plateau (nearly) disappears without output bias",
                f"{SOURCE} Thm 1, §5",
                holds=without[1] <= with_b[1] - cfg.trend_tol and without[1] <= 0.5 * with_b[1],
                predicted=f"mean without ≤ mean with bias − {cfg.trend_tol:g} and ≤ half of it",
                measured=f"with {with_b[1]:.3g}±{with_b[2]:.2g}; without "
                f"{without[1]:.3g}±{without[2]:.2g}",
                values={"with_bias": with_b[1], "without_bias": without[1]},
                reason=note + "; without bias what remains is the θ(0)-dominated start, where "
                "the small random net is at chance level",
            )
        )
    return out


# ---------------------------------------------------------------------------------------
# Figures


def plot_four_class(run: HomogeneousRun, cfg: Config, path: Path) -> None:
    """Biases and W_ii(t) of §4's example (full flow solid, reduced ODE dashed)."""
    o, t = run.traj.observables, run.traj.times
    fig, axes = new_figure(1, 3, figsize=(16, 4.2))
    cols = mpl_rcparams()["axes.prop_cycle"].by_key()["color"]
    for i in range(run.k):
        c = cols[i % len(cols)]
        lab = f"class {i} (W_ii(0) = {run.w0[i]:.3g})"
        axes[0].plot(t, o["b"][:, i], color=c, label=lab)
        axes[0].plot(t, run.b_red[:, i], "--", color=c, lw=1)
        axes[1].plot(t, o["W_diag"][:, i], color=c)
        axes[1].plot(t, run.w_red[:, i], "--", color=c, lw=1)
        for ax in axes[:2]:
            if math.isfinite(run.t_learned[i]):
                ax.axvline(run.t_learned[i], color=c, ls=":", lw=0.8)
    axes[0].set(xlabel="t", ylabel="b_i(t)", title="(a) biases (dashed: reduced ODE)")
    axes[0].legend(fontsize=8)
    axes[1].set(xlabel="t", ylabel="W_ii(t)", yscale="log", title="(b) diagonal weights")
    axes[2].plot(t, o["offdiag_max"] / cfg.delta, label="max_{i≠j}|W_ij| / δ")
    axes[2].plot(t, o["noise_corr_max"], label="max |⟨W_i, ξ_x⟩|")
    axes[2].plot(t, o["train_error"], label="training error")
    axes[2].set(xlabel="t", title="(c) off-diagonal weights, noise correlation, error")
    axes[2].legend(fontsize=8)
    fig.suptitle(
        f"r-homogeneous net, k = {run.k}, r = {cfg.r}, δ = {cfg.delta}, σ = {cfg.sigma} "
        "(dotted: learning times)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_interpolation(runs: list[DeepRun], path: Path) -> None:
    """γ_error and γ_loss of each deep run, with Theorem 1's interval shaded."""
    fig, axes = new_figure(1, 2, figsize=(12, 4.2))
    for run in runs:
        (line,) = axes[0].plot(run.curve.alphas, run.curve.error, "o-", ms=3, label=run.label)
        axes[1].plot(run.curve.alphas, run.curve.loss, "o-", ms=3, color=line.get_color())
        th = theorem1_of(run)
        if th is not None and th.nonempty:
            lo, hi = checked_interval(run, th)
            if lo < hi:
                axes[0].axvspan(lo, hi, color=line.get_color(), alpha=0.15)
    axes[0].set(xlabel="α", ylabel="γ_error(α)", title="error along θ^[α] (shaded: Thm 1)")
    axes[1].set(xlabel="α", ylabel="γ_loss(α) (mean CE)", title="loss along θ^[α]")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_trends(rows: list[dict], cfg: Config, path: Path) -> None:
    """Mean ± sd interpolation error curves vs depth, vs δ, and with/without bias."""
    alphas = np.linspace(0.0, 1.0, cfg.n_alpha)
    fig, axes = new_figure(1, 3, figsize=(16, 4.2))
    for ax, family, key, fmt in (
        (axes[0], "depth", "depth", "r = {}"),
        (axes[1], "delta", "delta", "δ = {:g}"),
        (axes[2], "bias", "bias", "bias = {}"),
    ):
        for val in sorted({r[key] for r in rows if r["family"] == family}, key=float):
            curves = np.array(
                [r["error_curve"] for r in rows if r["family"] == family and r[key] == val]
            )
            m, s = curves.mean(0), curves.std(0)
            (line,) = ax.plot(alphas, m, label=fmt.format(val))
            ax.fill_between(alphas, m - s, m + s, color=line.get_color(), alpha=0.2)
        ax.set(xlabel="α", ylabel="γ_error(α)", title=f"error interpolation vs {family}")
        ax.legend(fontsize=8)
    fig.suptitle(f"deep {cfg.sweep_activation} net on synthetic data, mean ± sd over seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_bias_order(main: HomogeneousRun, rows: list[dict], path: Path) -> None:
    """Final bias against the learning rank (rank 0 = first learned = largest W_ii(0))."""
    fig, ax = new_figure(figsize=(6, 4.2))
    for r in rows:
        if "rank_by_w0" in r:
            ax.plot(
                r["rank_by_w0"], r["b_T"], "o", alpha=0.6, label=f"k={r['k']}, seed={r['seed']}"
            )
    rank = np.argsort(np.argsort(-main.w0))
    ax.plot(rank, main.traj.observables["b"][-1], "k*", ms=12, label="main run")
    ax.set(
        xlabel="learning rank (by W_ii(0))", ylabel="b_i(T)", title="final bias vs learning order"
    )
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------------------------------
# Entry point of `flows check bias-plateau`


def deep_runs(cfg: Config, progress: bool) -> tuple[list[DeepRun], list[Check]]:
    """The deep nets of Theorem 1 (synthetic data, exact flow; digits and a ReLU net by GD
    when the config asks) with their interpolation curves and checks."""
    runs: list[DeepRun] = []
    data = synthetic_deep_data(cfg, cfg.seed)
    model = DeepFCN(
        d=data.d,
        k=cfg.k,
        depth=cfg.deep_depth,
        width=cfg.deep_width,
        activation=cfg.deep_activation,
        delta=cfg.deep_delta,
    )
    method = "flow"
    runs.append(
        train_deep(
            model,
            data,
            seed=cfg.seed,
            t1=cfg.deep_t1,
            method=method,
            cfg=cfg,
            label=f"synthetic, depth {cfg.deep_depth} {cfg.deep_activation}",
        )
    )
    gd_check = None
    if cfg.relu_run:
        relu = dataclasses.replace(model, activation="relu")
        runs.append(
            train_deep(
                relu,
                data,
                seed=cfg.seed,
                t1=cfg.deep_t1,
                method="gd",
                cfg=cfg,
                label=f"synthetic, depth {cfg.deep_depth} relu (GD)",
            )
        )
        # GD against the flow on the identity net: does GD at this η give the same plateau?
        gd = train_deep(model, data, seed=cfg.seed, t1=cfg.deep_t1, method="gd", cfg=cfg)
        pf = plateau(runs[0].curve, tol=cfg.plateau_tol)
        pg = plateau(gd.curve, tol=cfg.plateau_tol)
        step = 1.0 / (cfg.n_alpha - 1)
        gd_check = Check.compare(
            f"GD (η = {cfg.gd_lr}) reproduces the exact flow's error plateau",
            "gradient flow",
            holds=abs(pf.length - pg.length) <= step + 1e-12,
            predicted=f"|plateau_GD − plateau_flow| ≤ one α step ({step:.3g})",
            measured=f"flow {pf.length:.3g}, GD {pg.length:.3g}",
            values={"flow": pf.length, "gd": pg.length},
            reason="justifies GD for the ReLU net: ReLU kinks make the error-controlled "
            "solver reject most steps (~10²× more gradient evaluations than GD)",
        )
    if cfg.digits:
        dg = digits_data("train", n_per_class=cfg.digits_n_per_class)
        dmodel = DeepFCN(
            d=dg.d,
            k=10,
            depth=cfg.deep_depth,
            width=cfg.digits_width,
            activation=cfg.deep_activation,
            delta=cfg.deep_delta,
        )
        runs.append(
            train_deep(
                dmodel,
                dg,
                seed=cfg.seed,
                t1=cfg.digits_t1,
                method="flow",
                cfg=cfg,
                label=f"digits, depth {cfg.deep_depth} {cfg.deep_activation}",
            )
        )
    checks = []
    for run in runs:
        err_T = float(run.traj.observables["train_error"][-1])
        checks.append(
            Check.compare(
                f"{run.label}: training reaches zero error by T",
                "setup",
                holds=err_T == 0.0,
                predicted="training error 0 at T (the theorem interpolates to a trained net)",
                measured=f"{err_T:.3g} ({run.method}, T = {run.traj.times[-1]:g}, "
                f"{run.traj.stats['vf_evals']} gradient evaluations)",
                values={"final_error": err_T},
            )
        )
        checks += theorem1_checks(run, cfg)
        checks.append(check_measured_plateau(run, theorem1_of(run), cfg))
        if progress:
            print(f"  [{NAME}] deep run '{run.label}' done", flush=True)
    if gd_check is not None:
        checks.append(gd_check)
    return runs, checks


def run(cfg: Config, out: Path, *, progress: bool = True) -> Report:
    """Every part of the experiment, its checks, figures and results.

    Writes into `out/bias-plateau/` atomically: `four_class.png`, `interpolation.png`,
    `trends.png`, `bias_order.png`, `trajectory.nc` (the four-class run: `W(time, class,
    dim)`, `b(time, class)`, observables), `trajectory_deep.nc` (the synthetic deep run) and
    `results.json` (config, versions, checks, sweeps, curves, solver statistics).
    """
    start = time.perf_counter()
    if progress:
        print(f"[{NAME}] r-homogeneous example: k={cfg.k}, r={cfg.r}, δ={cfg.delta}", flush=True)
    main = run_homogeneous(cfg)
    checks = homogeneous_checks(main, cfg)
    rows = homogeneous_sweep(cfg, progress=progress)
    checks.append(check_homogeneous_sweep(rows, cfg))
    if progress:
        print(f"[{NAME}] deep nets and Theorem 1", flush=True)
    deep, deep_checks = deep_runs(cfg, progress)
    checks += deep_checks
    if progress:
        print(f"[{NAME}] trends over depth, δ and bias", flush=True)
    trend_rows = trend_sweep(cfg, progress=progress)
    checks += trend_checks(trend_rows, cfg)
    outdir = OutputDir(Path(out) / NAME, FILES, NAME)
    try:
        plot_four_class(main, cfg, outdir.path("four_class.png"))
        plot_interpolation(deep, outdir.path("interpolation.png"))
        plot_trends(trend_rows, cfg, outdir.path("trends.png"))
        plot_bias_order(main, rows, outdir.path("bias_order.png"))
        main.traj.save(outdir.path("trajectory.nc"))
        deep[0].traj.save(outdir.path("trajectory_deep.nc"))
        write_results_json(
            outdir.path("results.json"),
            NAME,
            dataclasses.asdict(cfg),
            checks,
            {
                "homogeneous": {
                    "w0": main.w0,
                    "t_learned": main.t_learned,
                    "t_cross": main.t_cross,
                    "t_cross_reduced": main.t_cross_red,
                    "b_T": main.traj.observables["b"][-1],
                    "b_reduced_T": main.b_red[-1],
                    "stats": main.traj.stats,
                },
                "homogeneous_sweep": rows,
                "deep": [
                    {
                        "label": r.label,
                        "method": r.method,
                        "model": r.model.describe(),
                        "curve": r.curve.to_dict(),
                        "theorem1": (t.to_dict() if (t := theorem1_of(r)) else None),
                        "stats": r.traj.stats,
                    }
                    for r in deep
                ],
                "trends": trend_rows,
                "wall_s": time.perf_counter() - start,
            },
        )
        files = outdir.commit()
    except BaseException:
        outdir.abort()
        raise
    return Report(
        NAME,
        checks,
        files,
        {"t_learned": main.t_learned.tolist(), "wall_s": time.perf_counter() - start},
    )


# ---------------------------------------------------------------------------------------
# The plug-in: `flows check|simulate bias-plateau`


class BiasPlateauExperiment(AbstractExperiment):
    """§4's r-homogeneous net and deep nets with an output bias (the bias-plateau paper)."""

    name = NAME
    title = (
        'Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape for '
        "Deep Networks"
    )
    files = FILES
    simulate_flags = (
        Flag("k", "classes (default 4)", fl.count("--k", 2)),
        Flag("r", "homogeneity degree r (default 4)", fl.count("--r")),
        Flag("delta", "init scale δ in (0, 1) (default 0.1)", fl.real("--delta", positive=True)),
        Flag("seed", "PRNG seed (default 0)", fl.seed()),
    )
    sweep_flags = (
        Flag(
            "depth",
            "depths r (weight matrices), comma-separated (e.g. 3,4,5)",
            grid_type("--depth", f"{__package__}.sweep:parse_depths", ("as_int", {"minimum": 1})),
            required=True,
        ),
        Flag(
            "delta",
            "init scales δ in (0, 1] (e.g. 1e-3,1e-2)",
            grid_type(
                "--delta",
                f"{__package__}.sweep:parse_deltas",
                ("as_float", {"positive": True, "hi": 1.0}),
            ),
            required=True,
        ),
        Flag(
            "seeds",
            "seeds: a range 0-2 or a list 0,1,2 (default 0)",
            grid_type("--seeds", f"{__package__}.sweep:parse_prng_seeds"),
            default="0",
        ),
        Flag(
            "method",
            "gd (default; rate --lr) or flow (exact; --rtol, --atol)",
            choices=("gd", "flow"),
        ),
        Flag(
            "activation",
            "hidden activation (default relu)",
            choices=tuple(sorted(DEEP_ACTIVATIONS)),
        ),
        Flag(
            "no_bias",
            "nets without the output bias (the plateau should vanish)",
            action="store_true",
        ),
        Flag("lr", "learning rate of --method gd (default 0.05)", fl.positive("--lr")),
        Flag(
            "rtol",
            "--method flow: relative tolerance (default 1e-6)",
            fl.tolerance("--rtol", "1e-6"),
        ),
        Flag(
            "atol",
            "--method flow: absolute tolerance (default 1e-9)",
            fl.tolerance("--atol", "1e-9"),
        ),
        Flag("t1", "training time T (default 300)", fl.positive("--t1")),
        Flag("k", "classes, at most 16 (default 4)", fl.count("--k", 2)),
        Flag("width", "hidden width (default 16)", fl.count("--width")),
        Flag("n_per_class", "samples per class (default 10)", fl.count("--n-per-class")),
        Flag("n_alpha", "interpolation points α on [0, 1] (default 50)", fl.count("--n-alpha", 2)),
        Flag(
            "plateau_tol",
            "error plateau: error ≥ 1 − 1/k − tol (default 0.02)",
            fl.real("--plateau-tol", nonnegative=True),
        ),
    )

    def default_config(self, quick: bool = False) -> Config:
        return default_config(quick)

    def run(self, cfg: Config, out: Path, *, progress: bool = True) -> Report:
        return run(cfg, out, progress=progress)

    def sweep(self, out: Path, options: dict, **engine):
        """The grid depth × δ × seeds (`flows.experiments.bias_plateau.sweep`)."""
        from .sweep import plateau_sweep

        given = {k: v for k, v in options.items() if v is not None and k != "no_bias"}
        return plateau_sweep(out, bias=not options.get("no_bias"), **given, **engine)

    def simulate(self, options: dict, *, progress: bool = False) -> Simulated:
        """The r-homogeneous example's exact flow (t1 from the reduced model's blow-up
        times)."""
        given = {k: v for k, v in options.items() if v is not None}
        cfg = dataclasses.replace(Config(), **given)
        return Simulated(run_homogeneous(cfg).traj, cfg.rtol)


EXPERIMENT = BiasPlateauExperiment()
