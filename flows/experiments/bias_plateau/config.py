"""Settings of `flows check bias-plateau`: the frozen `Config` with its validation,
`default_config` (full and `--quick`), and the experiment's name, output files, claim
source and the constant C of the checked error-plateau interval."""

from __future__ import annotations

import dataclasses
import math

from flows import SOLVERS, ConfigError
from flows.models.deep import DEEP_ACTIVATIONS

__all__ = ["NAME", "FILES", "SOURCE", "ALPHA1_C", "Config", "default_config"]

NAME = "bias-plateau"
#: The files `run` writes into `out/NAME/` (nothing else there is touched): each figure
#: as PNG and, next to it, as SVG.
FILES = (
    "four_class.png",
    "four_class.svg",
    "interpolation.png",
    "interpolation.svg",
    "trends.png",
    "trends.svg",
    "bias_order.png",
    "bias_order.svg",
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
    error plateau: error ≥ 1 − 1/k − `plateau_tol`. `rescaled_run` adds the synthetic
    net with θ(0) rescaled (every layer × c, the same draws) so that its initial logits
    meet Theorem 1's reconstructed hypothesis: 2·max|f^(0)| = `rescaled_spread`·δ ≤ δ
    (Kaiming × δ^{1/r} fixes 2·max|f^(0)|/δ, ≈ 1.42 on the default net, so no δ meets it).

    **Trends at matched loss** (synthetic deep net, `sweep_activation`, GD at `gd_lr` and
    `gd_lr`/4 unless `sweep_method` = 'flow'): every run stops at the first time its mean
    cross-entropy is ≤ `trend_ce` with zero training error (`matched_loss`), at most at
    T = `trend_t_max`; runs that do not get there, and (for the error plateau) runs whose
    bias gap is too small for Theorem 1 (its interval [δ/Δ_min, (Δ_min/2V_max^r)^{1/(r−1)}]
    empty), are excluded and counted. Depths `sweep_depths` at the output scale
    `deep_delta` (each layer × δ^{1/r}, the paper's FCN convention) and, when
    `trend_layer_scale` is set, at that per-layer scale s (each layer × s, output scale
    s^r); scales `sweep_deltas` (output scales, depth `deep_depth`); with and without the
    output bias; seeds `trend_seeds`. Both interpolation paths: from θ(0) (the paper's
    θ^[α]) and from 0 (θ^[α] = α θ(T), the small-δ form the theorem's proof expands
    around). Error plateau: error ≥ 1 − 1/k − `plateau_tol`; loss plateau (one-sided):
    γ_loss ≥ log k − `loss_plateau_tol`, both read on `trend_n_alpha` points α (491:
    10× finer than the paper's 50-point grid, which they contain — a plateau's length on
    50 points is quantized to 1/49, and so were the η-error bars of the trend rows). A
    trend holds when the mean moves the predicted
    way end to end by more than the seed spread (sd at the first + sd at the last value)
    and by more than `trend_tol`, and no step goes the wrong way by more than `trend_tol`.
    `sweep_t1`: the training time T of `flows sweep bias-plateau` (no stop there unless
    `--stop-ce` is given).
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
    rescaled_run: bool = True
    rescaled_spread: float = 0.5
    gd_lr: float = 0.05
    n_alpha: int = 50
    plateau_tol: float = 0.02
    sweep_method: str = "gd"
    sweep_activation: str = "relu"
    sweep_t1: float = 300.0
    sweep_depths: tuple[int, ...] = (3, 4, 5, 6)
    sweep_deltas: tuple[float, ...] = (1e-3, 1e-2, 1e-1)
    trend_seeds: tuple[int, ...] = (0, 1, 2, 3, 4, 5)
    trend_tol: float = 0.05
    trend_ce: float = 0.1
    trend_t_max: float = 600.0
    trend_layer_scale: float | None = 0.3
    trend_n_save: int = 51
    trend_n_alpha: int = 491
    loss_plateau_tol: float = 0.1

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
            "trend_ce",
            "trend_t_max",
            "loss_plateau_tol",
        ):
            positive(name, getattr(self, name))
        if not (isinstance(self.rescaled_spread, (int, float)) and 0 < self.rescaled_spread <= 1):
            raise ConfigError(
                "`rescaled_spread` (the rescaled run's 2·max|f^(0)| in units of δ) must lie in "
                f"(0, 1] to meet Theorem 1's hypothesis; got {self.rescaled_spread!r}. Try 0.5."
            )
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
        integer("trend_n_save", self.trend_n_save, 2)
        integer("trend_n_alpha", self.trend_n_alpha, 2)
        if len(set(self.trend_seeds)) != len(self.trend_seeds):
            raise ConfigError(f"`trend_seeds` has repeated seeds: {self.trend_seeds!r}.")
        if self.trend_layer_scale is not None:
            positive("trend_layer_scale", self.trend_layer_scale)
            if not self.trend_layer_scale < 1:
                raise ConfigError(
                    f"`trend_layer_scale` (s, each layer's init scale; output scale s^r) must "
                    f"be < 1 for a small initialization; got {self.trend_layer_scale!r}. "
                    "Try 0.3 (default), or None to skip the per-layer depth trend."
                )


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
            sweep_depths=(3, 4),
            sweep_deltas=(1e-3, 1e-1),
            trend_seeds=(0, 1, 2),
            trend_layer_scale=None,
        )
    return Config()
