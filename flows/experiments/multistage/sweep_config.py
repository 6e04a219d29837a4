"""The multistage sweep's settings (`SweepConfig`, saved in the manifest; a sweep into an
existing folder must match them), how older manifests are read, and the grid m × α × seed
(parsed and validated in the user's terms; `check_grid` refuses a grid every point would
fail before anything is written)."""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
import numpy as np

from flows import SOLVERS, TARGETS, ConfigError
from flows.plugin import (
    Axis,
    check_memory,
    grid_points,
    grid_values,
    parse_prng_seeds,
    to_float,
    to_int,
)

from .config import NAME, field_bytes

__all__ = [
    "SweepConfig",
    "upgrade_config",
    "MIN_INIT_STD",
    "ATOL_INIT_FRACTION",
    "parse_widths",
    "parse_alphas",
    "AXES",
    "parse_grid",
    "point_id",
    "batch_key",
    "check_grid",
]


@dataclasses.dataclass(frozen=True)
class SweepConfig:
    """Settings of a multistage sweep that every grid point shares (saved in the manifest;
    a sweep into an existing folder must match them).

    `target` ('f1', 'f2', 'f3'), `data` ('paper' | 'assumption'), `n` data points, `solver`
    (a name in `flows.SOLVERS`), `vector_field` ('auto', the default: the fused field from
    n·m ≥ 10⁷, else autodiff; 'autodiff'; or the hand-derived 'fused'),
    `dtype` ('float64' or 'float32': data, θ and the solve), `rtol`, `atol`, `error_norm`
    (the norm of the step-size control: 'rms', the default, or 'max'; see
    `flows.simulate`), `beta`
    (T_d = first τ ≥ T_p with 1 − K̂ ≤ β), `n_save` save times per run, `margin`
    (horizon τ₁ = T_d,leading + margin, in the theorems' time τ), `max_steps` (solver step
    budget per run).
    """

    experiment: str = NAME
    target: str = "f1"
    data: str = "paper"
    n: int = 1000
    solver: str = "tsit5"
    rtol: float = 1e-6
    atol: float = 1e-9
    beta: float = 0.1
    n_save: int = 401
    margin: float = 8.0
    max_steps: int = 200_000
    vector_field: str = "auto"
    dtype: str = "float64"
    error_norm: str = "rms"

    def __post_init__(self):
        from flows.plugin import check_error_norm

        if self.experiment != NAME:
            raise ConfigError(
                f"a descent-time sweep is experiment {NAME!r}; got {self.experiment!r} (other "
                "experiments have their own sweeps: `flows sweep <experiment>`)."
            )
        if self.target not in TARGETS:
            raise ConfigError(f"`target` must be one of {sorted(TARGETS)}; got {self.target!r}.")
        if self.data not in ("paper", "assumption"):
            raise ConfigError(f"`data` must be 'paper' or 'assumption'; got {self.data!r}.")
        if not (_is_int(self.n) and self.n >= 2):
            raise ConfigError(f"`n` (data points) must be an integer ≥ 2; got {self.n!r}.")
        if self.solver not in SOLVERS:
            raise ConfigError(f"`solver` must be one of {sorted(SOLVERS)}; got {self.solver!r}.")
        for name in ("rtol", "atol", "margin"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"`{name}` must be a finite number > 0; got {v!r}.")
        if not (isinstance(self.beta, (int, float)) and 0 < self.beta < 1):
            raise ConfigError(f"`beta` must lie in (0, 1); got {self.beta!r}.")
        if not (_is_int(self.n_save) and self.n_save >= 3):
            raise ConfigError(f"`n_save` must be an integer ≥ 3; got {self.n_save!r}.")
        if not (_is_int(self.max_steps) and self.max_steps >= 1):
            raise ConfigError(f"`max_steps` must be an integer ≥ 1; got {self.max_steps!r}.")
        if self.vector_field not in ("auto", "autodiff", "fused"):
            raise ConfigError(
                f"`vector_field` must be 'auto', 'autodiff' or 'fused'; got {self.vector_field!r}."
            )
        if self.dtype not in ("float64", "float32"):
            raise ConfigError(f"`dtype` must be 'float64' or 'float32'; got {self.dtype!r}.")
        check_error_norm(self.error_norm)

    def to_dict(self) -> dict:
        from flows.plugin import SOLVER_METHODS

        d = dataclasses.asdict(self)
        for k in ("rtol", "atol", "beta", "margin"):
            d[k] = float(d[k])
        for k in ("n", "n_save", "max_steps"):
            d[k] = int(d[k])
        # the algorithm behind the solver's name, so that a folder computed by an earlier
        # algorithm under the same name is not resumed with the new one
        d["solver_method"] = SOLVER_METHODS.get(self.solver, self.solver)
        return d

    @classmethod
    def from_dict(cls, d: dict) -> SweepConfig:
        """Inverse of `to_dict`. A `solver_method` that this library's solver does not
        implement (e.g. a Dask worker with another version) is refused."""
        names = {f.name for f in dataclasses.fields(cls)}
        cfg = cls(**{k: v for k, v in d.items() if k in names})
        mine = cfg.to_dict()["solver_method"]
        if d.get("solver_method", mine) != mine:
            raise ConfigError(
                f"this process implements solver {cfg.solver!r} as {mine!r}, but the sweep "
                f"asks for {d['solver_method']!r} (a different flows version?)."
            )
        return cfg


#: What a manifest or point written before a setting existed meant by it.
_LEGACY_SOLVER_METHODS = {"rkc": "RKC2"}


def upgrade_config(old: dict) -> dict:
    """A saved config with the settings added since filled in as they were then: `dtype`
    (float64), `solver_method` (RKC2 without non-stiff steps for 'rkc'), `error_norm`
    ('rms', diffrax's norm, the only one before the setting existed)."""
    solver = old.get("solver", "")
    return {
        "dtype": "float64",
        "error_norm": "rms",
        "solver_method": _LEGACY_SOLVER_METHODS.get(solver, solver),
        **old,
    }


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


#: Smallest initial-weight scale m^-α a sweep accepts (atol must sit 100× below it).
MIN_INIT_STD = 1e-150
#: A sweep refuses an atol above this fraction of the smallest initial scale m^{-α}.
ATOL_INIT_FRACTION = 1e-2


def parse_widths(value) -> tuple[int, ...]:
    """Widths m ('1000,5000' or a sequence): integers ≥ 2 (the theory uses ln m)."""
    return grid_values(
        value,
        "--m",
        "m",
        to_int,
        lambda m: (
            None
            if m >= 2
            else (
                f"width m = {m} is too small; widths must be integers ≥ 2 (the predictions use "
                "ln m)."
            )
        ),
    )


def parse_alphas(value) -> tuple[float, ...]:
    """Init exponents α ('0.75,1.0' or a sequence): α > 1/2, the theorems' regime."""
    return grid_values(
        value,
        "--alpha",
        "alpha",
        to_float,
        lambda a: (
            None
            if a > 0.5
            else (
                f"α = {a} ≤ 1/2; the multi-stage theorems (and their predicted T_p, T_d) need "
                "small initialization, α > 1/2."
            )
        ),
    )


AXES = (
    Axis("m", int, parse_widths, "--m"),
    Axis("alpha", float, parse_alphas, "--alpha"),
    Axis("seed", int, parse_prng_seeds, "--seeds"),  # each a PRNG seed, named by the flag
)


def parse_grid(m, alpha, seeds) -> list[tuple[int, float, int]]:
    """The grid points (m, α, seed), m outermost; raises `ConfigError` on bad input."""
    return grid_points(AXES, {"m": m, "alpha": alpha, "seed": seeds})


def point_id(m: int, alpha: float, seed: int) -> str:
    return f"m{int(m)}_alpha{float(alpha)!r}_seed{int(seed)}"


def batch_key(point: tuple) -> int:
    """Runs of one width have equal shapes: one vmapped solve."""
    return point[0]


def check_grid(cfg: SweepConfig, grid: list[tuple], batch_size: int) -> None:
    """Refuse, before anything is written, what every point (or the machine) would fail:
    an implicit solver on too many parameters, initial weights float64 cannot resolve,
    a batch that does not fit in memory, an `atol` not small against the initial
    weights."""
    from flows import IMPLICIT_SOLVERS, MAX_IMPLICIT_PARAMS

    widest = max(p[0] for p in grid)
    if cfg.solver in IMPLICIT_SOLVERS and 2 * widest > MAX_IMPLICIT_PARAMS:
        raise ConfigError(
            f"solver {cfg.solver!r} forms the dense Hessian and is limited to "
            f"{MAX_IMPLICIT_PARAMS} parameters; m = {widest} has {2 * widest}. Use 'tsit5'."
        )
    for mm, aa, _ in grid:
        if not float(mm) ** (-float(aa)) >= MIN_INIT_STD:
            raise ConfigError(
                f"--alpha/--m: at m = {mm}, α = {aa} the initial weights have std m^-α = "
                f"{float(mm) ** (-float(aa)):.3g}, below {MIN_INIT_STD:g}: float64 cannot "
                "resolve their growth. Use a smaller α (the theorems need α > 1/2; the paper "
                "uses α ≤ 2) or a smaller m."
            )
    # the field `vector_field` takes at the widest m (autodiff: n×m arrays; fused: blocks)
    batch = min(batch_size, len(grid))
    itemsize = jnp.dtype(cfg.dtype).itemsize
    check_memory(
        field_bytes(cfg.vector_field, cfg.n, widest, batch=batch, itemsize=itemsize),
        f"--m {widest} with --n {cfg.n} (batches of {batch})",
        "Reduce --m, --n or --batch-size.",
    )
    # atol must sit well below the initial weights (std m^{-α}); otherwise the early,
    # exponentially growing phase runs without error control and T_d shifts (measured:
    # +0.5 in τ at α = 2, m = 2·10⁴ with atol 1e-8).
    tiny = min(float(mm) ** (-float(aa)) for mm, aa, _ in grid)
    if cfg.atol > ATOL_INIT_FRACTION * tiny:
        mm, aa = min(((mm, aa) for mm, aa, _ in grid), key=lambda p: float(p[0]) ** -p[1])
        raise ConfigError(
            f"`atol` = {cfg.atol:g} is not small against the initial weights: at m = {mm}, "
            f"α = {aa:g} they have std m^-α = {tiny:.3g}, so the early growth would run "
            f"without error control. Use atol ≤ {ATOL_INIT_FRACTION * tiny:.1g} "
            f"(= {ATOL_INIT_FRACTION:g}·m^-α)."
        )
