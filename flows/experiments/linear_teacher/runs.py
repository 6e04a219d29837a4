"""The runs of the linear-teacher experiment: the Theorem 5.1 property test, exact gradient
flow (loss clock), the PAR prediction, gradient descent on the outlier data, SGD to loss ε
and the digit pairs. Each returns what its claim in `checks` confronts."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from flows import (
    ConfigError,
    Trajectory,
    gradient_descent,
    log_save_times,
    logistic,
    make_problem,
    sgd_to_epsilon,
    simulate,
    simulate_nonsmooth,
)
from flows.models.leaky import LeakyReLUNet
from reduced import max_margin as mm

from .config import MAX_INIT, NAME, Config
from .data import SeparableData, antipodal_with_outlier, digits_pair, symmetric_gaussians
from .observables import teacher_observables

# ---------------------------------------------------------------------------------------
# Theorem 5.1: property test and the ReLU counterexample


def _leaky_np(z, slope: float):
    """σ(z) of `reduced.linear_teacher.leaky_relu` (z for z ≥ 0, slope·z below) in plain
    NumPy: the property test calls it for hundreds of random shapes, and the JAX version
    compiles once per shape (~4 s CPU over the property test)."""
    z = np.asarray(z, dtype=np.float64)
    return np.where(z >= 0, z, slope * z)


def network_np(w, u, x, v: float, slope: float):
    """N_W(x) in NumPy (eq. 1), for the property test."""
    w, u, x = (np.asarray(a, dtype=np.float64) for a in (w, u, x))
    return v * (_leaky_np(x @ w.T, slope).sum(-1) - _leaky_np(x @ u.T, slope).sum(-1))


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


# ---------------------------------------------------------------------------------------
# Gradient-flow runs


def _model(cfg: Config, d: int, init: float) -> LeakyReLUNet:
    return LeakyReLUNet(k=cfg.k, d=d, slope=cfg.slope, v=cfg.v, init_scale=init)


#: The init scale of the model *inside* every exact-flow problem. The model's `init_scale`
#: is a static field, so it would key a new compilation of the non-smooth solver (~15 s
#: CPU each) for every init; it only enters θ(0), which is an array argument. So θ(0) is
#: drawn by the model with the run's own init scale (bit-identical) and the problem that
#: is compiled carries this fixed one; `config["problem"]` is restored to the real model.
_SHARED_INIT = 1.0
_SHARED_NAME = "linear-teacher data"


def shared_problem(cfg: Config, train, init: float, key: int | None = None):
    """(problem to integrate, its description with the real init scale): θ(0) of
    `LeakyReLUNet(init_scale=init)` with `key` (default `cfg.seed`), in a problem whose
    model has the fixed `_SHARED_INIT`, so runs at different inits share one compile."""
    key = cfg.seed if key is None else key
    real = make_problem(_model(cfg, train.d, init), train, key=key, loss_fn=logistic)
    problem = make_problem(
        _model(cfg, train.d, _SHARED_INIT),
        # the data's name is static too: one name for every data set of the same shape
        dataclasses.replace(train, name=_SHARED_NAME),
        key=key,
        loss_fn=logistic,
        theta0=real.theta0,
    )
    return problem, real.describe()


def run_flow(
    cfg: Config,
    data,
    init: float,
    obs,
    *,
    t1: float | None = None,
    global_error: bool = False,
) -> Trajectory:
    """The exact flow from init scale `init` (loss clock to `t1`, default `cfg.t1`);
    `global_error`: with its companion solve at tolerances 10× tighter
    (`flows.simulate_nonsmooth`), which reuses the compiled loop."""
    if not 0 < init <= MAX_INIT:
        raise ConfigError(
            f"the init scale (`init`) must lie in (0, {MAX_INIT:g}]; got {init!r}. The "
            "paper's regimes are small init (1e-4) and large init (1.0)."
        )
    problem, described = shared_problem(cfg, data.train, init)
    t1 = cfg.t1 if t1 is None else t1
    # the exact piecewise-smooth flow: switches located, Filippov sliding on kinks
    traj = simulate_nonsmooth(
        problem,
        t1=t1,
        ts=log_save_times(t1, cfg.n_save, first=0.1),
        clock="loss",
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=obs,
        save_params="ends",
        global_error=global_error,
    )
    traj.config["problem"] = described
    traj.config["experiment"] = {"name": NAME, "init_scale": init, "data": data.name}
    return traj


def par_prediction(traj: Trajectory, data, cfg: Config) -> tuple[mm.ParSolution, dict]:
    model = _model(cfg, data.train.d, cfg.small_init)
    z = np.asarray(model.features(data.train.x))
    sol = mm.solve_par(z, data.train.y, v=cfg.v, k=cfg.k, slope=cfg.slope)
    o = traj.observables
    agree = mm.direction_agreement(sol.w, sol.u, o["w_bar"][-1], o["u_bar"][-1])
    return sol, agree


# ---------------------------------------------------------------------------------------
# Outlier (App. J), SGD (Thm 4.1), digits (Fig. 2)


def outlier_data(cfg: Config, seed: int = 0) -> SeparableData:
    return antipodal_with_outlier(cfg.outlier_n, 2, outlier=np.asarray(cfg.outlier), seed=seed)


def run_outlier(
    cfg: Config,
    obs_kwargs: dict,
    *,
    init: float | None = None,
    t1: float | None = None,
    obs=None,
    seed: int | None = None,
    global_error: bool = False,
) -> tuple[Trajectory, SeparableData]:
    """The outlier data (App. J) by the exact flow (loss clock to `t1`, default
    `outlier_t1`; init scale default `small_init`; `cfg.n_save` saves). `obs`: the
    observables function (default `teacher_observables(**obs_kwargs)`); passing the main
    runs' one lets this run share their compilation when `outlier_n + 1 == n`. `seed`:
    draws the Gaussians and the net's init (default: data seed 0, init key `cfg.seed`).
    `global_error`: with its companion solve at tolerances 10× tighter."""
    data = outlier_data(cfg, 0 if seed is None else seed)
    init = cfg.small_init if init is None else init
    t1 = cfg.outlier_t1 if t1 is None else t1
    problem, described = shared_problem(cfg, data.train, init, key=seed)
    traj = simulate_nonsmooth(
        problem,
        t1=t1,
        ts=log_save_times(t1, cfg.n_save, first=0.1),
        clock="loss",
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=teacher_observables(**obs_kwargs) if obs is None else obs,
        save_params="ends",
        global_error=global_error,
    )
    traj.config["problem"] = described
    traj.config["experiment"] = {"name": NAME, "part": "outlier", "data": data.name}
    return traj, data


def run_outlier_gd(cfg: Config, obs_kwargs: dict, learning_rate: float) -> Trajectory:
    """The outlier data by gradient descent (the paper's method) at `learning_rate`."""
    data = outlier_data(cfg)
    problem = make_problem(
        _model(cfg, 2, cfg.small_init), data.train, key=cfg.seed, loss_fn=logistic
    )
    return gradient_descent(
        problem,
        learning_rate=learning_rate,
        t1=cfg.outlier_t1,
        n_save=41,
        observables=teacher_observables(**obs_kwargs),
        save_params="ends",
    )


def smoothing_crosscheck(cfg: Config, data, t1: float = 20.0) -> dict:
    """The exact flow (large init, to `t1`) against flows of the smoothed activation
    σ_ε(z) = αz + (1 − α) ε softplus(z/ε), ε = 1e-3, 1e-4, 1e-5 (Tsit5, rtol 1e-10):
    max |θ_ε − θ| / max|θ| at t1 per ε, and the exact run's kink counts."""

    def problem(eps):
        model = LeakyReLUNet(
            k=cfg.k,
            d=data.train.d,
            slope=cfg.slope,
            v=cfg.v,
            init_scale=cfg.large_init,
            smoothing=eps,
        )
        return make_problem(model, data.train, key=cfg.seed, loss_fn=logistic)

    exact = simulate_nonsmooth(problem(0.0), t1=t1, n_save=5, rtol=1e-10, atol=1e-13)
    th = np.concatenate([exact.params[k][-1].ravel() for k in ("w", "u")])
    errs = {}
    for eps in (1e-3, 1e-4, 1e-5):
        tr = simulate(problem(eps), t1=t1, n_save=5, rtol=1e-10, atol=1e-13)
        th_e = np.concatenate([tr.params[k][-1].ravel() for k in ("w", "u")])
        errs[eps] = float(np.max(np.abs(th_e - th)) / np.max(np.abs(th)))
    return {
        "t1": t1,
        "errors": errs,
        "crossings": exact.stats["crossings"],
        "sliding_entries": exact.stats["sliding_entries"],
    }


def run_sgd(cfg: Config) -> list[dict]:
    rows = []
    for n in cfg.sgd_n:
        data = symmetric_gaussians(n, 2, mean=cfg.mean, seed=cfg.seed + 7)
        problem, _ = shared_problem(cfg, data.train, cfg.small_init)  # one compile per n
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


def run_digits(
    cfg: Config, pair, *, global_error: bool = False
) -> tuple[Trajectory, SeparableData]:
    """Two digits of scikit-learn's set (`pair`), logistic loss, exact flow on the loss
    clock to `digits_t1`; `global_error`: with its companion solve."""
    data = digits_pair(*pair, seed=cfg.seed)
    assert data.test is not None  # digits_pair's default test_fraction 0.3 keeps a test split
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
        global_error=global_error,
    )
    return traj, data


def run_highdim(
    cfg: Config, obs_kwargs: dict, *, global_error: bool = False
) -> tuple[Trajectory, SeparableData]:
    """App. I: symmetric Gaussians in d = `highdim_d` (mean·e₁), small init, exact flow to
    `highdim_t1`; `global_error`: with its companion solve."""
    data = symmetric_gaussians(cfg.n, cfg.highdim_d, mean=cfg.mean, seed=cfg.seed)
    obs = teacher_observables(teacher=data.teacher, **obs_kwargs)
    traj = run_flow(cfg, data, cfg.small_init, obs, t1=cfg.highdim_t1, global_error=global_error)
    return traj, data


def run_sgd_grid(cfg: Config) -> list[dict]:
    """Theorem 4.1's "any η, any init": SGD to ε = `sgd_grid_eps` at n = `sgd_grid_n` for
    every η in `sgd_grid_lr` and init scale in `sgd_grid_init`."""
    data = symmetric_gaussians(cfg.sgd_grid_n, 2, mean=cfg.mean, seed=cfg.seed + 7)
    rows = []
    for init in cfg.sgd_grid_init:
        # one compilation per n for every init (and shared with `run_sgd`'s run at this n)
        problem, _ = shared_problem(cfg, data.train, init)
        # a random large init can already sit below ε (0 updates: a vacuous test); swapping
        # the w and u neurons maps N to −N, so the worse of θ(0) and its swap is a start
        # above ε whenever either is
        th0 = problem.theta0
        swapped = {"w": th0["u"], "u": th0["w"]}
        loss0, loss_sw = float(problem.loss(th0)), float(problem.loss(swapped))
        start = swapped if loss_sw > loss0 else th0
        for lr in cfg.sgd_grid_lr:
            res = sgd_to_epsilon(
                problem,
                epsilon=cfg.sgd_grid_eps,
                learning_rate=lr,
                key=cfg.seed,
                max_epochs=cfg.sgd_max_epochs,
                theta0=start,
            )
            rows.append(
                {
                    **res.to_dict(),
                    "init": init,
                    "learning_rate": lr,
                    "loss_start": max(loss0, loss_sw),
                    "start": "w/u swapped" if loss_sw > loss0 else "θ(0)",
                }
            )
    return rows
