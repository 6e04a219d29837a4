"""Settings of the linear-teacher experiment (`flows check linear-teacher`): the frozen
`Config`, its built-in defaults, the plug-in's name and files, and the constants the runs
and checks share (`MAX_INIT`, the ReLU counterexample of Theorem 5.1)."""

from __future__ import annotations

import dataclasses
import math

from flows import ConfigError

NAME = "linear-teacher"
#: The files `run` writes into `out/NAME/` (nothing else there is touched): each figure
#: as PNG and, next to it, as SVG.
FILES = (
    "boundary.png",
    "boundary.svg",
    "clustering.png",
    "clustering.svg",
    "par.png",
    "par.svg",
    "outlier.png",
    "outlier.svg",
    "sgd.png",
    "sgd.svg",
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
    `beta`: β of the NAR/PAR tests; `kink_cos`: a neuron is on the kink of a point when
    |ŵ·x̂| ≤ kink_cos (counted apart in the NAR/PAR observables). Property test:
    `prop_networks` networks × `prop_points` points. Outlier run: `outlier` point,
    `outlier_n`, exact flow to `outlier_t1` (the check runs it at the geometry the App. J
    search chooses, `outlier_search`: outlier radius `search_radii` × angle
    `search_angles` (degrees) × Gaussian std `search_stds`; App. J's family: the exact
    flow at every separable geometry of that grid × `outlier_family_seeds`, each seed
    drawing the Gaussians and the net's init), and, if `outlier_gd`,
    gradient descent at `outlier_lr` and `outlier_lr`/4 beside it. High-dimensional
    Gaussians (App. I), if `highdim`: dimension `highdim_d`, exact flow to `highdim_t1`
    (its own compilation, ~15 s CPU). `smoothing_check`: the ε → 0 cross-check of the
    exact flow (four compilations, ~25 s CPU). `outlier_n` = `n` − 1 (default) lets the
    outlier run share the main runs' compilation. SGD "any η, any
    init" grid: `sgd_grid_lr` × `sgd_grid_init` at n = `sgd_grid_n`, ε = `sgd_grid_eps`.
    SGD: sizes `sgd_n`, targets `sgd_eps`, step `sgd_lr`,
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
    kink_cos: float = 1e-6
    r_rel_tol: float = 0.01
    frac_tol: float = 0.02
    large_factor: float = 10.0
    margin_drop_tol: float = 1e-5
    cos_tol: float = 0.99
    angle_tol_deg: float = 5.0
    prop_networks: int = 300
    prop_points: int = 200
    outlier: tuple[float, float] = (-1.0, 3.0)
    outlier_n: int = 99
    outlier_lr: float = 0.2
    outlier_t1: float = 1e5
    sgd_n: tuple[int, ...] = (20, 40, 80, 160)
    sgd_eps: tuple[float, ...] = (0.1, 0.03, 0.01)
    sgd_lr: float = 0.1
    sgd_max_epochs: int = 20_000
    sgd_exponent_tol: float = 0.25
    outlier_gd: bool = False
    smoothing_check: bool = True
    search_radii: tuple[float, ...] = (3.16, 12.0)
    search_angles: tuple[float, ...] = (115.0, 135.0, 155.0)
    search_stds: tuple[float, ...] = (0.5,)
    outlier_family_seeds: tuple[int, ...] = (0, 1, 2)
    highdim: bool = True
    highdim_d: int = 20
    highdim_t1: float = 1e6
    sgd_grid_n: int = 40
    sgd_grid_eps: float = 0.03
    sgd_grid_lr: tuple[float, ...] = (0.01, 1.0, 10.0)
    sgd_grid_init: tuple[float, ...] = (1e-4, 1.0, 10.0)
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
        if not (isinstance(self.highdim_d, int) and self.highdim_d >= 2):
            raise ConfigError(f"`highdim_d` must be an integer ≥ 2; got {self.highdim_d!r}.")
        if any(not 0 < a < 1e6 for a in (*self.sgd_grid_lr, *self.sgd_grid_init)):
            raise ConfigError("`sgd_grid_lr` and `sgd_grid_init` must be > 0.")
        if any(r <= 0 for r in self.search_radii) or any(s < 0 for s in self.search_stds):
            raise ConfigError("`search_radii` must be > 0 and `search_stds` ≥ 0.")
        if not self.outlier_family_seeds or any(
            not (isinstance(s, int) and s >= 0) for s in self.outlier_family_seeds
        ):
            raise ConfigError(
                "`outlier_family_seeds` must be one or more integers ≥ 0; got "
                f"{self.outlier_family_seeds!r}."
            )
        if not 0 < self.cos_tol <= 1:
            raise ConfigError(f"`cos_tol` must lie in (0, 1]; got {self.cos_tol!r}.")


def default_config(quick: bool = False) -> Config:
    """The built-in default; `quick`: t1 = 10⁶, fewer property-test networks and SGD
    cases, one search geometry (the default search's choice), no digits, and only the
    runs that share one compilation of the exact flow (d = 2, n = 100): the d = 20 run
    (App. I) and the smoothing cross-check are skipped (their rows read "not applicable:
    --quick")."""
    if quick:
        return Config(
            t1=1e6,
            n_save=41,
            prop_networks=100,
            outlier_t1=2e4,
            sgd_n=(20, 40, 80),
            sgd_eps=(0.1, 0.03),
            # the default's chosen geometry only: each geometry costs four QPs (~1.2 s)
            search_radii=(12.0,),
            search_angles=(135.0,),
            outlier_family_seeds=(0,),
            highdim=False,
            highdim_t1=1e4,
            smoothing_check=False,
            sgd_grid_lr=(0.01, 10.0),
            sgd_grid_init=(1e-4, 10.0),
            digits=(),
        )
    return Config()


#: Largest init scale `run_flow` accepts: 10⁶ × the paper's large init (1.0). The loss
#: clock's range s = ∫L dt grows with L(0) ∝ init: measured (t1 = 100) init 1e12 ran in 28 s,
#: init 1e50 had not finished after 60 s (1e200 ran 4 minutes into a max-steps failure).
MAX_INIT = 1e6


#: Explicit ReLU counterexample (k = 1, r = 0, so every x is in the "linear region"):
#: w = e₁, u = e₂, x = (−1, −2): (w − u)·x = 1 > 0, but N(x) = relu(−1) − relu(−2) = 0.
RELU_EXAMPLE = {"w": [[1.0, 0.0]], "u": [[0.0, 1.0]], "x": [[-1.0, -2.0]]}
