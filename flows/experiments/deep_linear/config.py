"""Settings of `flows check deep-linear` (and of `flows simulate deep-linear`)."""

from __future__ import annotations

import dataclasses
import math

from flows import SOLVERS, ConfigError
from flows.plugin import as_choice, as_float, as_int, as_seed, as_tolerance

__all__ = ["Config", "default_config", "geometric_spectrum"]


@dataclasses.dataclass(frozen=True)
class Config:
    """Settings of the deep-linear experiment (frozen; saved with the results).

    Network and data: input, hidden and output sizes `d_in`, `h`, `d_out`; `n` samples
    (whitened inputs, `n` > d_in); the teacher's `singular_values` — one per mode,
    min(d_in, d_out) of them, positive and strictly decreasing (distinct, so that each mode
    and its learning time is well defined); `noise`, the standard deviation of the output
    noise that no linear map can fit (it sets the loss floor); `seed` (data and random init).

    Init: `u0` > 0, the initial strength of every mode for the balanced, aligned init; the
    small random init draws every weight from N(0, 2·u0/h), so that its expected effective
    strength (`observables.effective_strength`) is u0 as well.

    Flow: final time `t1`, `n_save` equally spaced save times, `solver`, `rtol`, `atol`.

    Verdicts: `tol_factor` — the closed-form comparison (claim a) must hold to
    `tol_factor`·rtol (relative), the half-learning times (claim b) to the timing error
    that implies plus the interpolation error between saves, and the balancedness drift
    (claim c) to 2·`tol_factor`·rtol·max‖θ‖²; `random_factor` — for the random init (claim
    e), each mode's t(½) must lie within this factor of the prediction; `small_init` — claim
    e applies when u0 ≤ `small_init`·(smallest singular value).
    """

    d_in: int = 6
    h: int = 6
    d_out: int = 4
    n: int = 200
    singular_values: tuple[float, ...] = (3.0, 2.0, 1.0, 0.5)
    noise: float = 0.1
    u0: float = 1e-3
    t1: float = 14.0
    n_save: int = 1401
    solver: str = "tsit5"
    rtol: float = 1e-8
    atol: float = 1e-12
    seed: int = 0
    tol_factor: float = 100.0
    random_factor: float = 2.0
    small_init: float = 0.01

    def __post_init__(self):
        def setv(name, value):
            object.__setattr__(self, name, value)

        for name in ("d_in", "h", "d_out"):
            setv(name, as_int(name, getattr(self, name), minimum=1))
        setv(
            "n",
            as_int(
                "n",
                self.n,
                minimum=self.d_in + 1,
                hint=f"whitening d_in = {self.d_in} inputs (with noise left over) needs n > d_in.",
            ),
        )
        try:
            sv = tuple(as_float("singular_values", v, positive=True) for v in self.singular_values)
        except TypeError:
            raise ConfigError(
                f"`singular_values` must be a sequence of numbers; got {self.singular_values!r}."
            ) from None
        r = min(self.d_in, self.d_out)
        if len(sv) != r:
            raise ConfigError(
                f"`singular_values` must hold min(d_in, d_out) = {r} values (one per mode); "
                f"got {len(sv)}: {list(sv)}."
            )
        if any(a <= b for a, b in zip(sv, sv[1:], strict=False)):
            raise ConfigError(
                f"`singular_values` must be strictly decreasing (distinct modes); got {list(sv)}."
            )
        setv("singular_values", sv)
        setv("noise", as_float("noise", self.noise, nonnegative=True))
        setv("u0", as_float("u0", self.u0, positive=True, hint="e.g. u0=1e-3 (small init)."))
        setv("t1", as_float("t1", self.t1, positive=True))
        setv("n_save", as_int("n_save", self.n_save, minimum=2))
        setv("solver", as_choice("solver", self.solver, ("auto", *sorted(SOLVERS))))
        setv("rtol", as_tolerance("rtol", self.rtol, example="1e-8"))
        setv("atol", as_tolerance("atol", self.atol, example="1e-12"))
        setv("seed", as_seed("seed", self.seed))
        setv("tol_factor", as_float("tol_factor", self.tol_factor, lo=1.0))
        setv("random_factor", as_float("random_factor", self.random_factor, lo=1.0))
        setv("small_init", as_float("small_init", self.small_init, positive=True, hi=0.5))
        if not math.isfinite(self.tol_factor * self.rtol):  # pragma: no cover
            raise ConfigError("`tol_factor`·`rtol` must be finite.")

    @property
    def init_std(self) -> float:
        """Standard deviation of the random init's weights: √(2·u0/h)."""
        return math.sqrt(2.0 * self.u0 / self.h)


def geometric_spectrum(s_max: float, s_min: float, count: int) -> tuple[float, ...]:
    """`count` singular values from `s_max` down to `s_min`, equally spaced in log."""
    if count == 1:
        return (float(s_max),)
    ratio = (s_min / s_max) ** (1.0 / (count - 1))
    return tuple(float(s_max * ratio**i) for i in range(count))


def default_config(quick: bool = False) -> Config:
    """The built-in setting; `quick`: three modes (d_in = 5, h = 4, d_out = 3), n = 100,
    t1 = 10 and 401 saves."""
    if quick:
        return Config(
            d_in=5,
            h=4,
            d_out=3,
            n=100,
            singular_values=(3.0, 1.5, 0.75),
            t1=10.0,
            n_save=401,
        )
    return Config()
