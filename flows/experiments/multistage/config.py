"""Settings of `flows check multistage`: the `Config`, its default, the experiment's name,
files and source tag, and the constants that read "≲" / "≳" in the paper's bounds."""

from __future__ import annotations

import dataclasses
import math

from flows import SOLVERS, ConfigError

__all__ = [
    "NAME",
    "FILES",
    "SOURCE",
    "LESSSIM_C",
    "GTRSIM_C",
    "Config",
    "default_config",
]

NAME = "multistage"
#: The files `run` writes into `out/NAME/` (nothing else there is touched): each figure
#: as PNG and, next to it, as SVG.
FILES = (
    "stages.png",
    "stages.svg",
    "K.png",
    "K.svg",
    "descent_time.png",
    "descent_time.svg",
    "trajectory.nc",
    "results.json",
)
SOURCE = "multistage"
#: Reading of "≲" and "≳" in the paper's bounds: the constant C used for the verdict.
LESSSIM_C = 10.0
GTRSIM_C = 0.1


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of `flows check multistage` (frozen; saved with the results).

    Main run: width `m`, init exponent `alpha`, `target` ('f1', 'f2', 'f3'), `data`
    ('paper': 1000 points on [−15, 15]; 'assumption': data with E xxᵀ = I, E[f x] = e₁),
    `n` points, PRNG `seed`, final physical time `t1`, `solver`, `rtol`, `atol`.
    Theory: `beta` (T_d = first t ≥ T_p with 1 − K̂ ≤ β), `delta_prime` (Theorem 2's
    δ′, "any given small β, δ′ > 0", shared by (45) and (47): the default 1.2 sits inside
    the window where both hold at every tested width and α — (45) needs δ′ ≥ 0.82 at
    α = 0.75, m = 4000 and δ′ ≥ 0.51 at α = 1 — so a small δ′ is not reached at
    these sizes; the window rows say so), `much_greater` (the toolkit's reading of "≫ 1"
    in Theorem 3 (64): at least this large).
    Extension (Theorem 2 (3) at α = `extend_alpha`): while its row is undecided (finite
    size), the largest width is doubled and run (3 seeds, with companions) as long as the
    predicted cost fits in `extend_budget_s` CPU seconds of this process (0: no extension,
    as in `--quick`; CPU time, so that the verdict does not depend on the machine's load).
    Sweep (Assumption 1–2 data in `sweep_d` dimensions, f₂, `sweep_n` points): widths
    `sweep_m`, exponents `sweep_alpha`, seeds `sweep_seeds`; fitted slopes must lie within
    `slope_tol` (relative) of the theory. The sweep's runs also give every asymptotic
    claim at ≥ 2 widths (the finite-size trends; d ≥ 2 for the claims about the
    directions orthogonal to E[f x]).
    Target figure (paper data, width `target_m`, `target_n` points, final time
    `target_t1`): one run per target in `targets` (empty: not run).
    """

    m: int = 5000
    alpha: float = 1.0
    target: str = "f1"
    data: str = "paper"
    n: int = 1000
    seed: int = 0
    t1: float = 20.0
    solver: str = "tsit5"
    rtol: float = 1e-6
    atol: float = 1e-9
    beta: float = 0.1
    delta_prime: float = 1.2
    much_greater: float = 10.0
    sweep_m: tuple[int, ...] = (250, 500, 1000, 2000, 4000)
    sweep_alpha: tuple[float, ...] = (0.75, 1.0, 1.25)
    sweep_seeds: tuple[int, ...] = (0, 1, 2)
    sweep_n: int = 100
    sweep_d: int = 2
    slope_tol: float = 0.15
    targets: tuple[str, ...] = ("f1", "f2", "f3")
    target_m: int = 1000
    target_n: int = 200
    target_t1: float = 8.0
    extend_budget_s: float = 120.0
    extend_alpha: float = 1.0

    def __post_init__(self):
        if not (isinstance(self.m, int) and self.m >= 1):
            raise ConfigError(f"`m` must be an integer ≥ 1; got {self.m!r}.")
        if not math.isfinite(self.alpha):
            raise ConfigError(f"`alpha` must be finite; got {self.alpha!r}.")
        if self.data not in ("paper", "assumption"):
            raise ConfigError(f"`data` must be 'paper' or 'assumption'; got {self.data!r}.")
        if not (math.isfinite(self.t1) and self.t1 > 0):
            raise ConfigError(f"`t1` must be > 0; got {self.t1!r}.")
        if self.solver not in (*SOLVERS, "auto"):
            raise ConfigError(
                f"`solver` must be 'auto' or one of {sorted(SOLVERS)}; got {self.solver!r}."
            )
        for name in ("rtol", "atol"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v > 0):
                raise ConfigError(f"`{name}` must be > 0; got {v!r}.")
        if not 0 < self.beta < 1:
            raise ConfigError(f"`beta` must lie in (0, 1); got {self.beta!r}.")
        if not 0 < self.delta_prime < 2:
            raise ConfigError(f"`delta_prime` must lie in (0, 2); got {self.delta_prime!r}.")
        if not (math.isfinite(self.much_greater) and self.much_greater > 1):
            raise ConfigError(f"`much_greater` must be > 1; got {self.much_greater!r}.")
        if not (math.isfinite(self.extend_budget_s) and self.extend_budget_s >= 0):
            raise ConfigError(
                f"`extend_budget_s` must be ≥ 0 seconds (0: no extension); got "
                f"{self.extend_budget_s!r}."
            )
        if not (isinstance(self.sweep_d, int) and self.sweep_d >= 1):
            raise ConfigError(f"`sweep_d` must be an integer ≥ 1; got {self.sweep_d!r}.")
        if not (isinstance(self.target_m, int) and self.target_m >= 2):
            raise ConfigError(f"`target_m` must be an integer ≥ 2; got {self.target_m!r}.")
        if not (isinstance(self.target_n, int) and self.target_n >= 2):
            raise ConfigError(f"`target_n` must be an integer ≥ 2; got {self.target_n!r}.")
        if not (math.isfinite(self.target_t1) and self.target_t1 > 0):
            raise ConfigError(f"`target_t1` must be > 0; got {self.target_t1!r}.")
        bad = [t for t in self.targets if t not in ("f1", "f2", "f3")]
        if bad:
            raise ConfigError(f"`targets` must be among 'f1', 'f2', 'f3'; got {bad!r}.")
        if any(m < 2 for m in self.sweep_m) or any(a <= 0.5 for a in self.sweep_alpha):
            raise ConfigError("`sweep_m` must be ≥ 2 and `sweep_alpha` > 1/2 (theory regime).")


def default_config(quick: bool = False) -> Config:
    """The built-in default; `quick` is a smaller version (m = 1000, t1 = 2, one seed, no
    target-figure runs, no extension)."""
    if quick:
        return Config(
            m=1000,
            t1=2.0,
            sweep_m=(250, 1000, 4000),
            sweep_seeds=(0,),
            targets=(),
            extend_budget_s=0.0,
        )
    return Config()


def two_layer_bytes(n: int, m: int, *, batch: int = 1, itemsize: int = 8) -> int:
    """A lower bound on the working memory of a two-layer (autodiff) field evaluation: one
    (n × m) array of pre-activations per batched run (the evaluation holds several; a lower
    bound refuses only runs that certainly cannot fit: `flows.plugin.check_memory`)."""
    return itemsize * n * m * batch


def fused_two_layer_bytes(n: int, m: int, *, batch: int = 1, itemsize: int = 8) -> int:
    """A lower bound on the working memory of a fused two-layer field evaluation
    (`vector_field='fused'`, which never forms an n × m array): per batched run, one block
    of at least min(n, 8) samples × m activations, and θ and its gradient (2 × 2m)."""
    return itemsize * batch * (min(n, 8) * m + 4 * m)


def field_bytes(vector_field: str, n: int, m: int, *, batch: int = 1, itemsize: int = 8) -> int:
    """The lower bound of the field `vector_field` ('auto', 'autodiff', 'fused') takes at
    (n, m): `two_layer_bytes` for autodiff, `fused_two_layer_bytes` for the fused one."""
    from flows.plugin import two_layer_field

    fused = two_layer_field(vector_field, n, m) == "fused"
    bound = fused_two_layer_bytes if fused else two_layer_bytes
    return bound(n, m, batch=batch, itemsize=itemsize)
