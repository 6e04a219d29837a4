"""Linear interpolation θ^[α] = (1 − α) θ(0) + α θ(T) and its loss / error curves.

Bias-plateau paper, §2: γ_loss(α) is the training loss at θ^[α] and
γ_error(α) the fraction of training samples misclassified; the paper uses 50 evenly
spaced α. Works for any model family (the parameters are any pytree).
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from flows import ConfigError, cross_entropy

__all__ = [
    "InterpolationCurve",
    "interpolate",
    "logits_at",
    "sample_logits_at",
    "alpha_grid",
    "plateau",
    "Plateau",
    "zeros_like_params",
]


def alpha_grid(alphas=None, n_alpha: int = 50) -> np.ndarray:
    """The α grid: `alphas` as given (checked: 1-D, finite, within [0, 1], increasing) or
    `n_alpha` evenly spaced points on [0, 1] (the paper's 50 by default)."""
    if alphas is None:
        if not (isinstance(n_alpha, int) and not isinstance(n_alpha, bool) and n_alpha >= 2):
            raise ConfigError(f"`n_alpha` must be an integer ≥ 2; got {n_alpha!r}.")
        return np.linspace(0.0, 1.0, n_alpha)
    a = np.asarray(alphas, dtype=np.float64)
    if a.ndim != 1 or a.size < 1:
        raise ConfigError(f"`alphas` must be a non-empty 1-D array; got shape {a.shape}.")
    if not np.all(np.isfinite(a)):
        raise ConfigError("`alphas` must be finite numbers in [0, 1].")
    if a.min() < 0 or a.max() > 1:
        raise ConfigError(
            f"`alphas` must lie in [0, 1] (θ^[α] interpolates between θ(0) at α = 0 and θ(T) "
            f"at α = 1); got values in [{a.min():g}, {a.max():g}]."
        )
    if np.any(np.diff(a) <= 0):
        raise ConfigError("`alphas` must be strictly increasing.")
    return a


@dataclasses.dataclass(frozen=True)
class InterpolationCurve:
    """γ_loss(α), γ_error(α) on the training set.

    **Attributes:** `alphas` (A,); `loss` (A,): the average cross-entropy (1/N) Σ CE
    (log k at zero logits; the paper's 'training loss'); `error` (A,): fraction
    misclassified; `pred_fraction` (A, k): fraction of samples predicted as each class;
    `k` classes; `chance_error` = 1 − 1/k.
    """

    alphas: np.ndarray
    loss: np.ndarray
    error: np.ndarray
    pred_fraction: np.ndarray
    k: int

    @property
    def chance_error(self) -> float:
        return 1.0 - 1.0 / self.k

    def to_dict(self) -> dict:
        return {
            "alphas": self.alphas.tolist(),
            "loss": self.loss.tolist(),
            "error": self.error.tolist(),
            "k": self.k,
        }


@eqx.filter_jit
def _curve(model, x, y, theta0, theta1, alphas):
    def one(a):
        th = jax.tree_util.tree_map(lambda p, q: (1.0 - a) * p + a * q, theta0, theta1)
        logits = model(th, x)
        k = logits.shape[-1]
        pred = jnp.argmax(logits, axis=-1)
        return (
            cross_entropy(logits, y),
            jnp.mean((pred != y).astype(logits.dtype)),
            jnp.mean(jax.nn.one_hot(pred, k, dtype=logits.dtype), axis=0),
        )

    return jax.lax.map(one, alphas)


def interpolate(model, x, y, theta_0, theta_T, *, alphas=None, n_alpha: int = 50):
    """γ_loss and γ_error along θ^[α] = (1 − α) θ(0) + α θ(T) on the data (x, y).

    **Arguments:** `model` (any `AbstractModel`, logits (n, k)); training inputs `x` (n, d)
    and integer labels `y` (n,); `theta_0`, `theta_T`: parameter pytrees of equal
    structure; `alphas` (within [0, 1]) or `n_alpha` evenly spaced points (default 50).

    **Returns:** an `InterpolationCurve`. At α = 0 and 1 it reproduces the average
    cross-entropy of θ(0) and θ(T) exactly.
    """
    a = alpha_grid(alphas, n_alpha)
    s0 = jax.tree_util.tree_structure(theta_0)
    s1 = jax.tree_util.tree_structure(theta_T)
    if s0 != s1:
        raise ConfigError(f"θ(0) and θ(T) have different structures: {s0} vs {s1}.")
    f = lambda t: jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float64), t)
    loss, err, frac = _curve(
        model,
        jnp.asarray(x),
        jnp.asarray(y).astype(jnp.int32),
        f(theta_0),
        f(theta_T),
        jnp.asarray(a),
    )
    frac = np.asarray(frac)
    return InterpolationCurve(
        alphas=a, loss=np.asarray(loss), error=np.asarray(err), pred_fraction=frac, k=frac.shape[1]
    )


@eqx.filter_jit
def _logits(model, x, theta0, theta1, alphas):
    def one(a):
        th = jax.tree_util.tree_map(lambda p, q: (1.0 - a) * p + a * q, theta0, theta1)
        return model(th, x)

    return jax.vmap(one)(alphas)


@eqx.filter_jit
def _sample_logits(model, x, theta0, theta1, alphas):
    def one(a, xi):
        th = jax.tree_util.tree_map(lambda p, q: (1.0 - a) * p + a * q, theta0, theta1)
        return model(th, xi[None])[0]

    return jax.vmap(one)(alphas, x)


def _padded(a: np.ndarray) -> tuple[np.ndarray, int]:
    """`a` (non-empty, finite) padded with its last entry to a power-of-two length."""
    if a.shape[0] == 0:
        raise ConfigError("`alphas` must hold at least one α.")
    if not np.all(np.isfinite(a)):
        raise ConfigError("`alphas` must be finite numbers.")
    size = 1 << int(a.shape[0] - 1).bit_length()
    pad = np.repeat(a[-1:], size - a.shape[0], axis=0)
    return np.concatenate([a, pad]), a.shape[0]


def _as_f64(tree):
    return jax.tree_util.tree_map(lambda v: jnp.asarray(v, jnp.float64), tree)


def logits_at(model, x, theta_0, theta_T, alphas) -> np.ndarray:
    """The logits f^[α](x) of every sample at θ^[α] = (1 − α) θ(0) + α θ(T), at each α
    in one vectorised call (the α in any order; padded internally to a power-of-two count
    so that searches evaluating a few α at a time share compilations).

    **Returns:** an array (A, n, k): `[a, i, j]` is logit j of sample i at `alphas[a]`.
    """
    a, m = _padded(np.asarray(alphas, dtype=np.float64).reshape(-1))
    z = _logits(model, jnp.asarray(x, jnp.float64), _as_f64(theta_0), _as_f64(theta_T), a)
    return np.asarray(z)[:m]


def sample_logits_at(model, x, theta_0, theta_T, alphas) -> np.ndarray:
    """The logits of sample `x[m]` at θ^[`alphas[m]`], for each m (pairs, vectorised):
    what a search following one sample per bracket needs.

    **Arguments:** `x` (M, d): one input per α; `alphas` (M,).

    **Returns:** an array (M, k).
    """
    xs = np.asarray(x, dtype=np.float64)
    a = np.asarray(alphas, dtype=np.float64).reshape(-1)
    if xs.ndim != 2 or xs.shape[0] != a.shape[0]:
        raise ConfigError(
            f"`x` must hold one input row per α: got x of shape {xs.shape} for {a.shape[0]} α."
        )
    ap, m = _padded(a)
    xp, _ = _padded(xs)
    z = _sample_logits(model, jnp.asarray(xp), _as_f64(theta_0), _as_f64(theta_T), ap)
    return np.asarray(z)[:m]


def zeros_like_params(theta) -> dict:
    """θ = 0 with the structure of `theta`: the start of the interpolation from 0,
    θ^[α] = α θ(T), whose logits are exactly α^r·(signal of θ(T)) + α·b^(T) for a
    positively homogeneous σ — the small-δ form Theorem 1's proof expands around."""
    return jax.tree_util.tree_map(lambda v: np.zeros(np.shape(v)), theta)


@dataclasses.dataclass(frozen=True)
class Plateau:
    """The longest run of consecutive grid α where a condition holds.

    `start`, `end`: its first and last α (NaN when the condition never holds);
    `length` = end − start (0 for one point or none); `n_points` in the run.
    """

    start: float
    end: float
    length: float
    n_points: int


def _longest_run(alphas: np.ndarray, mask: np.ndarray) -> Plateau:
    best, cur, best_i = 0, 0, -1
    for i, m in enumerate(mask):
        cur = cur + 1 if m else 0
        if cur > best:
            best, best_i = cur, i
    if best == 0:
        return Plateau(math.nan, math.nan, 0.0, 0)
    start, end = float(alphas[best_i - best + 1]), float(alphas[best_i])
    return Plateau(start, end, end - start, best)


def plateau(curve: InterpolationCurve, *, kind: str = "error", tol: float = 0.02) -> Plateau:
    """Plateau of an interpolation curve.

    `kind='error'`: α with γ_error(α) ≥ 1 − 1/k − `tol` (chance-level error);
    `kind='loss'`: α with |γ_loss(α) − log k| ≤ `tol` (the loss of a zero-logit net);
    `kind='loss-floor'`: α with γ_loss(α) ≥ log k − `tol` (one-sided, as Theorem 1 bounds
    the loss: γ_loss ≥ log k − 2eε; the bias term α·b^(T) may lift the loss above log k).
    Returns the longest run of consecutive grid points (`Plateau`).
    """
    if not (math.isfinite(tol) and tol >= 0):
        raise ConfigError(f"`tol` must be ≥ 0; got {tol!r}.")
    if kind == "error":
        mask = curve.error >= curve.chance_error - tol
    elif kind == "loss":
        mask = np.abs(curve.loss - math.log(curve.k)) <= tol
    elif kind == "loss-floor":
        mask = curve.loss >= math.log(curve.k) - tol
    else:
        raise ConfigError(f"`kind` must be 'error', 'loss' or 'loss-floor'; got {kind!r}.")
    return _longest_run(curve.alphas, mask)
