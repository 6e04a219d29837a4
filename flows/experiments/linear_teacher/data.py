"""Linearly separable data sets of the linear-teacher paper, labels in {−1, +1}.

Every generator returns a `SeparableData`: the training `Dataset`, an optional test
`Dataset`, the teacher w* when one generated the labels, and a `Separability` verdict from
a linear program (`check_separable`), which reports — never raises — when the data are not
linearly separable through the origin (the models here have no bias unless asked).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, cast

import numpy as np

from flows import ConfigError, Dataset, from_arrays
from flows.plugin import as_bool, as_float, as_int, as_real_array, as_seed, check_sign_labels

if TYPE_CHECKING:
    from sklearn.utils import Bunch

__all__ = [
    "Separability",
    "SeparableData",
    "check_separable",
    "binary_dataset",
    "check_sign_labels",
    "symmetric_gaussians",
    "teacher_ball",
    "antipodal_with_outlier",
    "digits_pair",
]


@dataclasses.dataclass(frozen=True)
class Separability:
    """Result of the separability linear program.

    `separable`: True / False, or None when the LP solver could not decide. `margin`: the
    largest t with y_i w·x_i ≥ t for some ‖w‖_∞ ≤ 1 (> 0 iff separable through the
    origin); `w`: that w (None if not separable); `message`: a sentence for reports.
    """

    separable: bool | None
    margin: float
    w: np.ndarray | None
    message: str

    def to_dict(self) -> dict:
        return {
            "separable": self.separable,
            "margin_inf": self.margin,
            "message": self.message,
        }


@dataclasses.dataclass(frozen=True)
class SeparableData:
    """Training data, optional test data, the teacher w* (if any) and separability."""

    train: Dataset
    test: Dataset | None
    teacher: np.ndarray | None
    separability: Separability

    @property
    def name(self) -> str:
        return self.train.name


def check_separable(x, y, *, bias: bool = False, tol: float = 1e-9) -> Separability:
    """Is there a w with y_i w·x_i > 0 for every i (through the origin, or with a bias)?

    Solves the LP max t s.t. y_i w·x_i ≥ t, −1 ≤ w_j ≤ 1 with
    `scipy.optimize.linprog` (HiGHS). The data are separable iff the optimum t* > `tol`.
    Never raises for non-separable data: the verdict says so.

    **Arguments:** `x` (n, d), `y` (n,) in {−1, +1}; `bias`: append a constant feature
    (separable by an affine boundary).
    """
    from scipy.optimize import linprog

    x = as_real_array("x", x)
    y = check_sign_labels(y)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ConfigError(
            f"`x` must have shape (n, d) with n = {y.shape[0]} rows (one per label); "
            f"got shape {x.shape}."
        )
    bias = as_bool("bias", bias)
    tol = as_float("tol", tol, nonnegative=True)
    if bias:
        x = np.concatenate([x, np.ones((x.shape[0], 1))], axis=1)
    n, d = x.shape
    # variables (w, t); minimize −t
    c = np.zeros(d + 1)
    c[-1] = -1.0
    a_ub = np.concatenate([-(y[:, None] * x), np.ones((n, 1))], axis=1)
    b_ub = np.zeros(n)
    bounds = [(-1.0, 1.0)] * d + [(None, None)]
    res = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs")
    where = "with a bias" if bias else "through the origin"
    if res.status != 0 or res.x is None:
        return Separability(
            None, float("nan"), None, f"separability undetermined: the LP failed ({res.message})"
        )
    t = float(res.x[-1])
    if t > tol:
        w = res.x[:-1]
        return Separability(
            True, t, w, f"linearly separable {where} (LP margin {t:.3g} at ‖w‖_∞ ≤ 1)"
        )
    return Separability(
        False, t, None, f"NOT linearly separable {where} (LP optimum t* = {t:.2e} ≤ {tol:g})"
    )


def binary_dataset(x, y, name: str = "user", meta: dict | None = None) -> Dataset:
    """A `Dataset` whose labels must all be −1 or +1 (else `ConfigError`)."""
    if meta is not None and not isinstance(meta, dict):
        raise ConfigError(f"`meta` must be a dict or None; got {type(meta).__name__}.")
    ds = from_arrays(x, y, name=name)
    check_sign_labels(ds.y)
    return dataclasses.replace(ds, meta=dict(meta or {}))


def _check_n_d(n: int, d: int, n_min: int = 2) -> tuple[int, int]:
    n = as_int("n", n, minimum=n_min, hint="`n` is the number of points.")
    d = as_int("d", d, minimum=1, hint="`d` is the input dimension.")
    return n, d


def _bundle(x, y, name, meta, teacher, n_test_xy=None) -> SeparableData:
    train = binary_dataset(x, y, name=name, meta=meta)
    test = None
    if n_test_xy is not None:
        test = binary_dataset(*n_test_xy, name=f"{name}-test", meta=meta)
    return SeparableData(train, test, teacher, check_separable(train.x, train.y))


def symmetric_gaussians(
    n: int = 100,
    d: int = 2,
    *,
    mean: float | np.ndarray = 3.0,
    std: float = 1.0,
    seed: int = 0,
    n_test: int = 0,
) -> SeparableData:
    """Two Gaussian classes, the set closed under (x, y) → (−x, −y) (Lemma 6.1).

    n/2 points x ~ N(μ, std² I) with y = +1 and their mirror images (−x, −1). `mean` is
    μ (a vector of length d) or a number m (then μ = m·e₁, the teacher w* = e₁ direction).
    Points on the wrong side of the teacher are kept: separability is verified, not
    forced (see `.separability`). Test points (`n_test`, even) are drawn the same way.
    """
    n, d = _check_n_d(n, d)
    if n % 2:
        raise ConfigError(f"`n` must be even (points come in ±pairs); got {n}. Try n={n + 1}.")
    std = as_float("std", std, positive=True)
    seed = as_seed("seed", seed)
    n_test = as_int("n_test", n_test, minimum=0, hint="`n_test` is the number of test points.")
    if n_test % 2:
        raise ConfigError(
            f"`n_test` must be even (points come in ±pairs); got {n_test}. Try n_test={n_test + 1}."
        )
    mu = np.zeros(d)
    if np.ndim(mean) == 0:
        mu[0] = as_float("mean", mean)
    else:
        mu = as_real_array("mean", mean)
        if mu.shape != (d,):
            raise ConfigError(
                f"`mean` must be a number or a vector of length d = {d}; got shape {mu.shape}."
            )
    rng = np.random.default_rng(seed)

    def draw(m):
        half = mu + std * rng.standard_normal((m // 2, d))
        return np.concatenate([half, -half]), np.concatenate([np.ones(m // 2), -np.ones(m // 2)])

    x, y = draw(n)
    test = draw(n_test) if n_test else None
    teacher = mu / np.linalg.norm(mu) if np.linalg.norm(mu) > 0 else None
    meta = {"kind": "symmetric-gaussians", "mean": mu.tolist(), "std": std, "seed": seed}
    return _bundle(x, y, f"symmetric-gaussians-d{d}", meta, teacher, test)


#: `teacher_ball` gives up (ConfigError) after this many rejected uniform draws.
_MAX_REJECTION_DRAWS = 10**7


def teacher_ball(
    n: int = 100,
    d: int = 2,
    *,
    margin: float = 0.1,
    radius: float = 1.0,
    seed: int = 0,
    n_test: int = 0,
) -> SeparableData:
    """Points uniform in the ball ‖x‖ ≤ `radius`, kept only if |w*·x| ≥ `margin`, for a
    random unit teacher w*; y = sign(w*·x). Separable by construction (margin ≥ `margin`).
    """
    n, d = _check_n_d(n, d, n_min=1)
    margin = as_float("margin", margin, nonnegative=True)
    radius = as_float("radius", radius, positive=True)
    if not margin < radius:
        raise ConfigError(f"need 0 ≤ margin < radius; got margin={margin}, radius={radius}.")
    seed = as_seed("seed", seed)
    n_test = as_int("n_test", n_test, minimum=0, hint="`n_test` is the number of test points.")
    rng = np.random.default_rng(seed)
    w_star = rng.standard_normal(d)
    w_star /= np.linalg.norm(w_star)

    def draw(m):
        out = []
        tried = 0
        while sum(len(o) for o in out) < m:
            if tried > max(_MAX_REJECTION_DRAWS, 1000 * m):
                got = sum(len(o) for o in out)
                raise ConfigError(
                    f"`margin` = {margin} is too large for d = {d}, radius = {radius}: only "
                    f"{got} of {tried} uniform points in the ball have |w*·x| ≥ margin (need "
                    f"{m}). Points concentrate near |w*·x| ≈ radius/√d = "
                    f"{radius / math.sqrt(d):.3g}; lower `margin`."
                )
            g = rng.standard_normal((4 * m + 16, d))
            tried += len(g)
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            r = radius * rng.random(len(g)) ** (1.0 / d)
            pts = g * r[:, None]
            out.append(pts[np.abs(pts @ w_star) >= margin])
        pts = np.concatenate(out)[:m]
        return pts, np.sign(pts @ w_star)

    x, y = draw(n)
    test = draw(n_test) if n_test else None
    meta = {"kind": "teacher-ball", "margin": margin, "radius": radius, "seed": seed}
    return _bundle(x, y, f"teacher-ball-d{d}", meta, w_star, test)


def antipodal_with_outlier(
    n: int = 60,
    d: int = 2,
    *,
    mean: float = 3.0,
    std: float = 0.5,
    outlier: np.ndarray | tuple | None = None,
    seed: int = 0,
) -> SeparableData:
    """Antipodal Gaussians N(±μ, std² I) (μ = mean·e₁; y = ±1) plus one positive outlier.

    The paper's App. J example of a run that enters an NAR which is not the PAR. The default
    outlier is (−0.5, 2.0, 0, …): positive, on the negative class's side of e₁, yet the
    set stays separable through the origin (e.g. by (1, 1, 0, …)); verified by the LP.
    """
    n, d = _check_n_d(n, d)
    if d < 2:
        raise ConfigError(f"`d` must be ≥ 2 for the outlier example; got d = {d}.")
    mean = as_float(
        "mean", mean, positive=True, hint="The classes sit at ±mean·e₁ (the teacher is e₁)."
    )
    std = as_float("std", std, nonnegative=True)
    seed = as_seed("seed", seed)
    rng = np.random.default_rng(seed)
    mu = np.zeros(d)
    mu[0] = mean
    half = n // 2
    xp = mu + std * rng.standard_normal((half, d))
    xn = -mu + std * rng.standard_normal((n - half, d))
    if outlier is None:
        outlier = np.zeros(d)
        outlier[:2] = (-0.5, 2.0)
    outlier = as_real_array("outlier", outlier)
    if outlier.shape != (d,):
        raise ConfigError(
            f"`outlier` must be a vector of length d = {d}; got shape {outlier.shape}."
        )
    x = np.concatenate([xp, xn, outlier[None]])
    y = np.concatenate([np.ones(half), -np.ones(n - half), [1.0]])
    meta = {
        "kind": "antipodal-with-outlier",
        "mean": mean,
        "std": std,
        "outlier": outlier.tolist(),
        "outlier_index": int(n),
        "seed": seed,
    }
    return _bundle(x, y, f"antipodal-outlier-d{d}", meta, mu / mean)


def digits_pair(
    a: int = 0,
    b: int = 1,
    *,
    n_train: int | None = None,
    test_fraction: float = 0.3,
    seed: int = 0,
) -> SeparableData:
    """Two classes of scikit-learn's 8×8 digits (a stand-in for the paper's MNIST pairs):
    y = +1 for digit `a`, −1 for digit `b`; pixels scaled to [0, 1] and centred by the
    training mean (so a boundary through the origin can separate them), d = 64.

    Shuffled with `seed`, split into train / test (`test_fraction`); `n_train` caps the
    number of training points. Needs scikit-learn.
    """
    a = as_int("a", a, minimum=0, maximum=9, hint="`a` is a digit 0–9.")
    b = as_int("b", b, minimum=0, maximum=9, hint="`b` is a digit 0–9.")
    if a == b:
        raise ConfigError(f"the two digits must differ; got a = b = {a}.")
    if n_train is not None:
        n_train = as_int(
            "n_train", n_train, minimum=1, hint="`n_train` caps the training points (None: all)."
        )
    test_fraction = as_float("test_fraction", test_fraction, nonnegative=True)
    if not test_fraction < 1:
        raise ConfigError(f"`test_fraction` must lie in [0, 1); got {test_fraction}.")
    seed = as_seed("seed", seed)
    try:
        from sklearn.datasets import load_digits
    except ImportError as err:  # pragma: no cover
        raise ConfigError("digit pairs need scikit-learn: pip install scikit-learn") from err
    digits = cast("Bunch", load_digits())  # without return_X_y/as_frame: a Bunch of arrays
    sel = np.isin(digits.target, (a, b))
    x = digits.data[sel].astype(np.float64) / 16.0
    y = np.where(digits.target[sel] == a, 1.0, -1.0)
    perm = np.random.default_rng(seed).permutation(len(y))
    x, y = x[perm], y[perm]
    n_test = int(round(test_fraction * len(y)))
    xte, yte, xtr, ytr = x[:n_test], y[:n_test], x[n_test:], y[n_test:]
    if n_train is not None:
        xtr, ytr = xtr[:n_train], ytr[:n_train]
    centre = xtr.mean(axis=0)
    xtr, xte = xtr - centre, xte - centre
    meta = {"kind": "digits", "digits": [a, b], "seed": seed, "test_fraction": test_fraction}
    test = (xte, yte) if n_test else None
    return _bundle(xtr, ytr, f"digits-{a}v{b}", meta, None, test)
