"""The benchmark's problems (`Case`), the reference, and the tolerance grids."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

import flows
from flows.experiments import bias_plateau as bp
from flows.experiments import linear_teacher as lt
from flows.models import Homogeneous, LeakyReLUNet, TwoLayer

__all__ = [
    "ATOL_FACTOR",
    "BASELINE_LR",
    "CASES",
    "FLOAT32_MIN_RTOL",
    "REF",
    "Case",
    "bias_plateau_case",
    "linear_teacher_case",
    "multistage_case",
]

BASELINE_LR = 1e-3
REF = {"solver": "dopri8", "rtol": 1e-11, "atol": 1e-13}
ATOL_FACTOR = 1e-3  # atol = 1e-3 · rtol for every adaptive method (toolkit, scipy, torch)
# Tolerance grids: per toolkit solver name ("default" for any other, e.g. a new 'rkc').
FULL_GRID = {
    "default": (1e-3, 1e-4, 1e-6, 1e-8),
    "dopri5": (1e-6,),
    "dopri8": (1e-8, 1e-10),
    "kvaerno5": (1e-4, 1e-6, 1e-8),
    "rkc": (1e-3, 1e-4, 3e-5, 1e-5, 1e-6),
    "rock4": (1e-4, 1e-5, 1e-6, 1e-7, 1e-8),
    "etdrk4": (3e-3, 1e-3, 3e-4, 1e-4, 1e-5, 1e-6),
}
# fused / float32 variants: Tsit5 at one tolerance, RKC around the baseline's error
FULL_VARIANT_GRID = {
    "default": (),
    "tsit5": (1e-4, 1e-6),
    "rkc": (1e-5, 3e-6, 1e-6),
    "etdrk4": (3e-4, 1e-4),
}
# --quick: Kvaerno5 left out (even at m = 200 one solve takes minutes: ~300 steps, half of
# them rejected, a Jacobian per step)
QUICK_GRID = {"default": (1e-6,), "tsit5": (1e-4, 1e-6), "dopri8": (1e-8,), "kvaerno5": ()}
# --quick runs the fused / float32 variants with Tsit5 at rtol 1e-6 only
QUICK_VARIANT_GRID = {"default": (), "tsit5": (1e-6,)}
FLOAT32_MIN_RTOL = flows.FLOAT32_MIN_RTOL  # simulate refuses tighter in float32
# rtol 1e-3 too: the explicit peers are stability-limited, so their loosest tolerance is
# where the error comes closest to gradient descent's, the regime RKC2 is for
PEER_GRID = {"full": (1e-3, 1e-4, 1e-6), "quick": (1e-6,)}


@dataclasses.dataclass
class Case:
    """One problem: how to build it (per variant), its horizon, clocks and method grids."""

    name: str
    title: str
    config: dict
    build: Callable[..., flows.Problem]  # build(**variant_kwargs) -> Problem
    t1: float
    clocks: tuple[str, ...]  # toolkit clocks (standard vector field)
    variant_clocks: tuple[str, ...]  # clocks for the fused / float32 variants
    gd_lrs: tuple[float, ...]
    grid: dict
    variant_grid: dict  # tolerance grid of the fused / float32 variants
    peer_rtols: tuple[float, ...]
    scipy_methods: tuple[str, ...]
    notes: list[str]


def _standard_settings(quick: bool) -> dict:
    """What the multi-stage and bias-plateau cases share: the physical clock (standard
    field and variants), GD at η = 1e-2, 1e-3 (and 1e-4 at full size), the standard
    tolerance grids and scipy's RK45, DOP853, LSODA and BDF."""
    return dict(
        clocks=("physical",),
        variant_clocks=("physical",),
        gd_lrs=(1e-2, 1e-3) if quick else (1e-2, 1e-3, 1e-4),
        grid=QUICK_GRID if quick else FULL_GRID,
        variant_grid=QUICK_VARIANT_GRID if quick else FULL_VARIANT_GRID,
        peer_rtols=PEER_GRID["quick" if quick else "full"],
        scipy_methods=("RK45", "DOP853", "LSODA", "BDF"),
    )


def multistage_case(quick: bool, m: int | None = None) -> Case:
    """The multi-stage net: m = 5000 to t = 20 (`quick`: m = 200 to t = 2), or width `m`."""
    m_default, t1 = (200, 2.0) if quick else (5000, 20.0)
    m = m_default if m is None else m
    config = {
        "model": "TwoLayer",
        "m": m,
        "d": 1,
        "alpha": 1.0,
        "activation": "tanh",
        "target": "f1",
        "data": "paper_data('f1'): 1000 points on [-15, 15]",
        "loss": "squared_error: 1/(2n) sum (f - y)^2",
        "key": 0,
        "t1": t1,
    }
    data = flows.paper_data("f1")

    def build(**kw):
        return flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), data, key=0, **kw)

    return Case(
        name="multistage",
        title=f"Multi-stage default (m = {m}, α = 1, f₁, paper data, t = {t1:g})",
        config=config,
        build=build,
        t1=t1,
        **_standard_settings(quick),
        notes=[
            "The explicit solvers are stability-limited on this wide net: the step count "
            "barely changes with rtol, so loosening the tolerance buys little time.",
        ],
    )


def linear_teacher_case(quick: bool) -> Case:
    cfg = lt.default_config()
    t1 = 100.0 if quick else 1e3
    init = cfg.small_init
    config = {
        "model": "LeakyReLUNet",
        "k": cfg.k,
        "d": 2,
        "slope": cfg.slope,
        "v": cfg.v,
        "init_scale": init,
        "data": f"symmetric_gaussians(n={cfg.n}, d=2, mean={cfg.mean}, seed={cfg.seed})",
        "loss": "logistic: (1/n) sum log(1 + exp(-y f))",
        "key": cfg.seed,
        "t1": t1,
        "source": "flows.experiments.linear_teacher.default_config() (small init)",
    }
    data = lt.symmetric_gaussians(cfg.n, 2, mean=cfg.mean, seed=cfg.seed)

    def build(**kw):
        model = LeakyReLUNet(k=cfg.k, d=2, slope=cfg.slope, v=cfg.v, init_scale=init)
        return flows.make_problem(model, data.train, key=cfg.seed, loss_fn=flows.logistic, **kw)

    grid = (
        {"default": (), "tsit5": (1e-6,)}  # --quick: Tsit5 on the three clocks
        if quick
        else {"default": (1e-4, 1e-6, 1e-8), "dopri8": (1e-6, 1e-8, 1e-10)}
    )
    return Case(
        name="linear-teacher",
        title=f"Late-phase linear teacher (leaky-ReLU ±v, k = {cfg.k}, logistic, t = {t1:g})",
        config=config,
        build=build,
        t1=t1,
        clocks=("physical", "log", "loss"),
        variant_clocks=("log",),
        gd_lrs=(1e-2, 1e-3) if quick else (1e-2, 1e-3, 1e-4),
        grid=grid,
        variant_grid=QUICK_VARIANT_GRID if quick else grid,
        peer_rtols=PEER_GRID["quick" if quick else "full"],
        scipy_methods=("RK45", "DOP853", "LSODA"),
        notes=[
            "The leaky-ReLU net is not smooth: σ′ jumps from α to 1 where a neuron's "
            "pre-activation w·x_i crosses 0, so the vector field is discontinuous across "
            "those hyperplanes. Adaptive solvers lose their order at each crossing (they "
            "reject steps until the step straddling it is small enough); errors near the "
            "reference's own spread (below) are not meaningful.",
            "Clocks: 'physical' steps in t, 'log' in s = ln(1 + t) (`flows.simulate`), "
            "'loss' in s with dt/ds = 1/L (`flows.simulate(clock='loss')`, t carried as a state, "
            "event root-find at t1). The loss clock's wall time is the whole "
            "`simulate` call timed here (its own `stats['wall_s']` leaves out the "
            "first segment), per-call overheads included: jit dispatch and host round "
            "trips, and its callback evaluation counter. scipy and torchdiffeq run the "
            "physical clock.",
        ],
    )


def bias_plateau_case(quick: bool) -> Case:
    """§4's r-homogeneous example as `flows check bias-plateau` runs it (its default
    config: k classes, f_c(x) = ⟨W_c, x⟩^r + b_c, the class-summed cross-entropy), to the
    check's horizon (`homogeneous_horizon`: 1.5 × the reduced model's time for the
    (k−1)-th class); --quick stops at a tenth of it."""
    cfg = bp.default_config()
    data = bp.orthogonal_data(
        k=cfg.k, n_per_class=cfg.n_per_class, d=cfg.d, sigma=cfg.sigma, seed=cfg.seed
    )

    def build(**kw):
        model = Homogeneous(k=cfg.k, d=cfg.d, r=cfg.r, delta=cfg.delta)
        return flows.make_problem(
            model, data, key=cfg.seed, loss_fn=bp.class_sum_cross_entropy, **kw
        )

    w0 = np.diag(np.asarray(build().theta0["W"]))
    t_check = bp.homogeneous_horizon(w0, cfg)
    t1 = t_check / 10 if quick else t_check
    config = {
        "model": "Homogeneous",
        "k": cfg.k,
        "d": cfg.d,
        "r": cfg.r,
        "delta": cfg.delta,
        "data": f"orthogonal_data(k={cfg.k}, n_per_class={cfg.n_per_class}, d={cfg.d}, "
        f"sigma={cfg.sigma}, seed={cfg.seed})",
        "loss": "class_sum_cross_entropy: (k/N) sum_x CE(f(x), y_x)",
        "key": cfg.seed,
        "t1": t1,
        "source": "flows.experiments.bias_plateau.default_config(): the check's "
        "r-homogeneous run and its horizon",
    }
    return Case(
        name="bias-plateau",
        title=f"r-homogeneous bias plateau (k = {cfg.k}, d = {cfg.d}, r = {cfg.r}, "
        f"δ = {cfg.delta}, class-summed CE, t = {t1:.4g})",
        config=config,
        build=build,
        t1=t1,
        **_standard_settings(quick),
        notes=[
            "A small smooth problem (68 parameters) whose difficulty is its long plateaus: "
            f"W_ii grows like a tensor power from δ = {cfg.delta} and each class takes off "
            "abruptly after a plateau, so the error is made at the take-offs.",
        ],
    )


CASES = {
    "multistage": multistage_case,
    "linear-teacher": linear_teacher_case,
    "bias-plateau": bias_plateau_case,
}
