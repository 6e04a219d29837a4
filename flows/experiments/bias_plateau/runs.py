"""The runs of `flows check bias-plateau`: §4's r-homogeneous example (exact flow and the
reduced tensor-power ODE, `reduced.bias_plateau`) and its sweep over k × seeds; the deep
nets trained by exact flow, by the exact piecewise-smooth flow of a ReLU net or by GD and
interpolated (`train_deep`); and GD's η → 0 extrapolation against the exact ReLU flow
(`gd_extrapolation_check`). The deep nets' Theorem 1 runs with their checks are in
`theorem1_runs`, the trend sweep over depth, δ and the output bias in `trend_runs`."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import (
    Check,
    ConfigError,
    Dataset,
    Trajectory,
    first_crossing,
    gradient_descent,
    make_problem,
    simulate,
    simulate_nonsmooth,
)
from flows.claims import Measured, agrees, richardson
from flows.models.deep import DeepFCN
from flows.models.homogeneous import Homogeneous
from flows.plugin import callback_free
from reduced import bias_plateau as rbp
from reduced.bias_plateau import reduced_trajectory as _reduced_trajectory

from .checks import check_learning_order, check_top_bias
from .config import NAME, Config
from .data import (
    balance_reason,
    class_sum_cross_entropy,
    digits_data,
    orthogonal_data,
    scale_to_unit_ball,
)
from .interpolation import InterpolationCurve, interpolate
from .observables import classification_observables, homogeneous_observables

__all__ = [
    "GD_LIMIT_CLAIM",
    "RELU_MAX_KINKS",
    "DeepRun",
    "HomogeneousRun",
    "crossing_times",
    "exact_relu_flow",
    "gd_extrapolation_check",
    "homogeneous_horizon",
    "homogeneous_sweep",
    "learned_times",
    "reduced_trajectory",
    "run_deep_relu_flow",
    "run_homogeneous",
    "synthetic_deep_data",
    "train_deep",
]


def reduced_trajectory(w0, r: int, k: int, ts) -> tuple[np.ndarray, np.ndarray]:
    """`reduced.bias_plateau.reduced_trajectory`, traced without host callbacks so that its
    compiled solve is kept by the persistent cache (a failed solve still raises: its output
    is then not finite)."""
    with callback_free():
        return _reduced_trajectory(w0, r, k, ts)


# ---------------------------------------------------------------------------------------
# The r-homogeneous example (§4).


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
    #: the same run's companion solve at tolerances 10× tighter (`global_error=True`)
    companion: HomogeneousRun | None = None


def homogeneous_horizon(w0, cfg: Config) -> float:
    """The time horizon of §4's run from W_ii(0) = `w0` (k = len(w0) classes): `t_factor` ×
    the time at which the reduced tensor-power ODE's (k−1)-th class reaches W_ii^r = 1
    (r ≥ 3); 50/δ^(r−2) for r < 3. Raises `ConfigError` when there is none."""
    w0 = np.asarray(w0, dtype=np.float64)
    k = len(w0)
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
    return float(t1)


def run_homogeneous(
    cfg: Config, *, k: int | None = None, seed: int | None = None, global_error: bool = False
) -> HomogeneousRun:
    """Integrate §4's example (exact flow) and the reduced tensor-power ODE from its W_ii(0);
    `global_error`: also its companion solve at tolerances 10× tighter (`companion`)."""
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
    t1 = homogeneous_horizon(w0, cfg)
    traj = simulate(
        problem,
        t1=float(t1),
        n_save=cfg.n_save,
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=homogeneous_observables,
        save_params="ends",
        global_error=global_error,
    )
    traj.config["experiment"] = {"name": NAME, "part": "homogeneous", "k": k, "seed": seed}

    def derived(tr: Trajectory) -> HomogeneousRun:
        if cfg.r >= 3:
            w_red, b_red = reduced_trajectory(w0, cfg.r, k, tr.times)
        else:
            w_red = b_red = np.full((len(tr.times), k), np.nan)
        o = tr.observables
        return HomogeneousRun(
            k=k,
            seed=seed,
            w0=w0,
            traj=tr,
            w_red=w_red,
            b_red=b_red,
            t_learned=learned_times(tr.times, o["class_min_prob"], cfg.learned_prob),
            t_cross=crossing_times(tr.times, o["W_diag"], cfg.r),
            t_cross_red=crossing_times(tr.times, w_red, cfg.r),
            applicable=not reasons,
            reason="; ".join(reasons),
        )

    run = derived(traj)
    ge = traj.global_error
    if ge is not None and ge.companion is not None:
        run.companion = derived(ge.companion)
    return run


def homogeneous_sweep(cfg: Config, *, progress: bool = False) -> list[dict]:
    """Proposition 1's per-run claims over `sweep_k` × `sweep_seeds`.

    Each run comes with its companion solve at tolerances 10× tighter: per claim, the
    row records its margin (order: the smallest gap between successive learning times in
    the predicted order; top bias: the predicted class's lead over the next bias at T;
    off-diagonals: `offdiag_c`·δ − max |W_ij|) and its numerical error (the margin's change
    on the companion); a claim whose margin is inside its error, or whose verdict differs
    on the companion, is listed in `numerical`."""
    rows = []
    for k in cfg.sweep_k:
        for seed in cfg.sweep_seeds:
            run = run_homogeneous(cfg, k=k, seed=seed, global_error=True)
            row = {"k": k, "seed": seed, "applicable": run.applicable, "reason": run.reason}
            row["w0"] = run.w0.tolist()
            row["t_learned"] = run.t_learned.tolist()
            b_T = run.traj.observables["b"][-1]
            row["b_T"] = b_T.tolist()
            if run.applicable:
                verdicts, margins = _sweep_verdicts(run, cfg)
                row.update(verdicts)
                row["margins"] = margins
                row["rank_by_w0"] = np.argsort(np.argsort(-run.w0)).tolist()
                twin = run.companion
                if twin is None:
                    row["errors"] = dict.fromkeys(margins, float("nan"))
                    row["numerical"] = []
                    ge = run.traj.global_error
                    row["companion_missing"] = ge.missing if ge is not None else "not run"
                else:
                    t_verdicts, t_margins = _sweep_verdicts(twin, cfg)
                    row["errors"] = {n: abs(margins[n] - t_margins[n]) for n in margins}
                    row["numerical"] = [
                        n
                        for n in margins
                        if verdicts[n] in ("holds", "fails")
                        and verdicts[n] != t_verdicts[n]
                        or abs(margins[n]) < row["errors"][n]
                        or not math.isfinite(row["errors"][n])
                    ]
            rows.append(row)
            if progress:
                print(f"  [{NAME}] homogeneous k={k} seed={seed}: {row.get('order', 'n/a')}")
    return rows


def _sweep_verdicts(run: HomogeneousRun, cfg: Config) -> tuple[dict, dict]:
    """The three per-run claims of the sweep: verdicts and margins (see `homogeneous_sweep`)."""
    order = np.asarray(rbp.predicted_learning_order(run.w0))
    b_T = np.asarray(run.traj.observables["b"][-1], dtype=float)
    off = float(np.max(run.traj.observables["offdiag_max"]))
    bound = cfg.offdiag_c * cfg.delta
    verdicts = {
        "order": check_learning_order(run.t_learned, order).verdict,
        "top_bias": check_top_bias(b_T, order[-1]).verdict,
        "offdiag": "holds" if off <= bound else "fails",
    }
    t = np.asarray(run.t_learned, dtype=float)[order]
    last = int(order[-1])
    margins = {
        "order": float(np.min(np.diff(t))) if len(t) > 1 else float("nan"),
        "top_bias": float(b_T[last] - np.max(np.delete(b_T, last))),
        "offdiag": bound - off,
    }
    return verdicts, margins


# ---------------------------------------------------------------------------------------
# Deep networks trained by exact flow or GD, and interpolated.


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
    #: the same run's companion solve at tolerances 10× tighter (`global_error=True`; exact
    #: flows only), interpolated the same way
    companion: DeepRun | None = None


def train_deep(
    model: DeepFCN,
    data: Dataset,
    *,
    seed: int,
    t1: float,
    method: str,
    cfg: Config,
    label: str = "",
    learning_rate: float | None = None,
    stop=None,
    n_save: int = 201,
    global_error: bool = False,
    n_alpha: int | None = None,
) -> DeepRun:
    """Train by exact flow (`method='flow'`; `'nonsmooth'`: the exact piecewise-smooth
    flow of a ReLU net, switches located and sliding resolved) or GD (`'gd'`, rate
    `learning_rate`, default `cfg.gd_lr`) and interpolate. `stop` (e.g.
    `matched_loss(0.1)`) ends the run at its event, `t1` is then the horizon; θ(T) is θ at
    the end (the stop, or t1). `global_error` (exact flows): also the companion solve at
    tolerances 10× tighter, as `companion`. `n_alpha`: the interpolation grid (default
    `cfg.n_alpha`)."""
    lr = cfg.gd_lr if learning_rate is None else learning_rate
    problem = make_problem(model, data, key=seed, loss_fn=class_sum_cross_entropy)
    # δ only draws θ(0); the (static) model the solver compiles carries δ = 1, so nets that
    # differ only in δ share one compilation (the trajectory's config names the real δ)
    problem = dataclasses.replace(problem, model=dataclasses.replace(model, delta=1.0))
    if method == "flow":
        traj = simulate(
            problem,
            t1=t1,
            n_save=n_save,
            rtol=cfg.deep_rtol,
            atol=cfg.deep_atol,
            observables=classification_observables,
            save_params="ends",
            stop=stop,
            global_error=global_error,
        )
    elif method == "nonsmooth":
        traj = exact_relu_flow(problem, cfg, t1=t1, n_save=n_save, global_error=global_error)
    else:
        traj = gradient_descent(
            problem,
            learning_rate=lr,
            t1=t1,
            n_save=n_save,
            observables=classification_observables,
            save_params="ends",
            stop=stop,
        )
        if traj.stats["result"] != "successful":
            raise ConfigError(
                f"gradient descent diverged on {label or data.name} ({traj.stats['result']}); "
                f"lower `gd_lr` (now {lr})."
            )
    traj.config["experiment"] = {"name": NAME, "part": "deep", "label": label, "seed": seed}
    if isinstance(traj.config.get("problem"), dict):
        traj.config["problem"]["model"] = model.describe()

    def derived(tr: Trajectory) -> DeepRun:
        th0 = {n: tr.param(n, 0) for n in tr.params}
        thT = {n: tr.param(n, -1) for n in tr.params}
        grid = cfg.n_alpha if n_alpha is None else n_alpha
        curve = interpolate(problem.model, data.x, data.y, th0, thT, n_alpha=grid)
        return DeepRun(label, model, data, tr, curve, th0, thT, method)

    run = derived(traj)
    ge = traj.global_error
    if ge is not None and ge.companion is not None:
        run.companion = derived(ge.companion)
    return run


# The pair slots the deep ReLU nets' exact flow is compiled with at first (it doubles them
# when more pairs meet a kink at once): the default net (depth 4, width 16, §4 data) has 14
# sliding at t = 58 and more than 16 at t = 64.7, so 32 runs it through with one compilation.
RELU_MAX_KINKS = 32


def exact_relu_flow(
    problem, cfg: Config, *, t1: float, n_save: int, global_error: bool = False
) -> Trajectory:
    """The deep ReLU net's exact piecewise-smooth flow at the deep nets' tolerances, with
    classification observables, θ at the ends and `RELU_MAX_KINKS` pair slots to start
    with. The step size is controlled in the max norm: from small init the error sits in the few
    parameters that move, and the RMS norm let it reach 28× rtol in θ and 60× in the loss
    on the default net (max norm: 2.7× and 6.5×, same work; benchmarks/results/
    nonsmooth_synthetic.md)."""
    return simulate_nonsmooth(
        problem,
        t1=t1,
        n_save=n_save,
        rtol=cfg.deep_rtol,
        atol=cfg.deep_atol,
        observables=classification_observables,
        save_params="ends",
        slots=RELU_MAX_KINKS,
        error_norm="max",
        global_error=global_error,
    )


def run_deep_relu_flow(
    cfg: Config, *, depth: int, width: int, t1: float, data_name: str = "synthetic"
) -> Trajectory:
    """A deep ReLU net (output bias, init scale `deep_delta`) trained by the exact
    piecewise-smooth flow (`flows.simulate_nonsmooth`): switches located, kink counts saved.
    `data_name`: 'synthetic' (the §4 data scaled to the unit ball) or 'digits'."""
    if data_name == "digits":
        data, k = digits_data("train", n_per_class=cfg.digits_n_per_class), 10
    else:
        data, k = synthetic_deep_data(cfg, cfg.seed), cfg.k
    model = DeepFCN(
        d=data.d, k=k, depth=depth, width=width, activation="relu", delta=cfg.deep_delta
    )
    problem = make_problem(model, data, key=cfg.seed, loss_fn=class_sum_cross_entropy)
    traj = exact_relu_flow(problem, cfg, t1=t1, n_save=201)
    traj.config["experiment"] = {"name": NAME, "part": "deep relu", "data": data_name}
    return traj


def gd_extrapolation_check(gd_runs: list[DeepRun], etas, exact: DeepRun) -> Check:
    """The η → 0 limit of GD is the exact flow: the training loss at T by GD at η, η/2,
    η/4, extrapolated to η → 0 (`flows.claims.richardson`, GD's order 1), agrees with the
    exact piecewise-smooth flow's within the extrapolation's error bar."""
    T = float(exact.traj.times[-1])
    for r in gd_runs:
        if not math.isclose(float(r.traj.times[-1]), T, rel_tol=1e-9):
            return Check.not_applicable(
                GD_LIMIT_CLAIM,
                "gradient flow",
                f"the GD runs end at t = {float(r.traj.times[-1]):.6g}, the flow at {T:.6g}",
            )
    losses = [float(r.traj.loss[-1]) for r in gd_runs]
    limit = richardson(losses, etas)
    flow = Measured(float(exact.traj.loss[-1]))
    gd_text = ", ".join(f"{x:.6g} (η = {e:g})" for x, e in zip(losses, etas, strict=True))
    return agrees(
        GD_LIMIT_CLAIM,
        "gradient flow",
        limit,
        flow,
        reason=f"L(T = {T:g}) by GD: {gd_text}; exact flow {flow.value:.6g}; the plain GD "
        f"error at η/4 is {abs(losses[-1] - flow.value):.2g}",
        values={"gd_losses": losses, "etas": list(etas), "T": T},
    )


GD_LIMIT_CLAIM = "GD's η → 0 extrapolation of the ReLU net's loss L(T) is the exact flow's"
