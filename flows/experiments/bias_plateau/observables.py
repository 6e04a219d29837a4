"""Observables of the bias-plateau paper, computed inside the solve (functions of
(problem, θ, t), as `flows.simulate` and `flows.gradient_descent` expect).

- `classification_observables`: any classifier with logits (n, k): training error, the
  average cross-entropy, per-class "all samples correct", and the output biases with the
  top bias gap when the model has a bias `b`.
- `homogeneous_observables`: the above plus what Proposition 1 tracks for the
  r-homogeneous-weight network on §4's data x = e_c + ξ: W_ii(t), max_{i≠j} |W_ij(t)|,
  max_{i,x} |⟨W_i, ξ_x⟩| (ξ_x = x − e_{y_x}).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp

from flows import cross_entropy

__all__ = [
    "DESCRIPTIONS",
    "classification_observables",
    "homogeneous_observables",
    "top_gap",
    "matched_loss",
]

#: One line per observable of `classification_observables` and `homogeneous_observables`:
#: its formula and what it means (the `flows simulate bias-plateau` report lists them).
DESCRIPTIONS: dict[str, str] = {
    "train_error": "share of training samples misclassified (argmax of the logits)",
    "mean_ce": "(1/N) Σ_x CE(z(x), y_x): the average cross-entropy (log k at zero logits; the "
    "integrated loss is k times it for the class-summed objective)",
    "class_correct": "per class: 1 when every sample of the class is classified correctly "
    "(its learning time is where this turns 1 for good)",
    "class_min_prob": "per class c: min over its samples of the softmax output u_c(x) "
    "(learned in Proposition 1's sense once it exceeds 1 − C₁)",
    "pred_fraction": "per class: share of samples predicted as that class",
    "b": "the output biases b_c",
    "obs.b": "the output biases b_c",
    "bias_gap": "largest bias minus the second largest: how far one class leads",
    "W_diag": "W_ii: each class's weight on its own feature e_i (Proposition 1)",
    "offdiag_max": "max_{i≠j} |W_ij|: the largest weight on another class's feature "
    "(Proposition 1: stays small)",
    "noise_corr_max": "max_{i,x} |⟨W_i, ξ_x⟩|, ξ_x = x − e_{y_x}: the largest alignment of a "
    "class's weights with the samples' noise",
}


def top_gap(b):
    """Largest bias minus the second largest (0 for ties)."""
    s = jnp.sort(b)
    return s[-1] - s[-2]


def min_margin(logits, y):
    """min over samples of z_y(x) − max_{j≠y} z_j(x): > 0 iff every sample is classified
    correctly (training error 0)."""
    k = logits.shape[-1]
    onehot = jax.nn.one_hot(y, k, dtype=bool)
    z_y = jnp.sum(jnp.where(onehot, logits, 0.0), axis=-1)
    z_other = jnp.max(jnp.where(onehot, -jnp.inf, logits), axis=-1)
    return jnp.min(z_y - z_other)


@dataclasses.dataclass(frozen=True)
class matched_loss:  # noqa: N801 (used like a function: `stop=matched_loss(0.1)`)
    """Stop condition (`flows.simulate(stop=…)`, `flows.gradient_descent(stop=…)`): the run
    ends at the first time the average cross-entropy is ≤ `ce` *and* every training sample
    is classified correctly — nets of different depth or init scale are compared at the
    same training loss, not at one training time.

    The value max(mean CE − `ce`, −min margin) is > 0 before and ≤ 0 exactly there (the
    margin z_y − max_{j≠y} z_j of every sample ≥ 0 ⇔ training error 0)."""

    ce: float

    def __call__(self, problem, theta, t):
        logits = problem.model(theta, problem.x)
        y = problem.y.astype(jnp.int32)
        return jnp.maximum(cross_entropy(logits, y) - self.ce, -min_margin(logits, y))


def classification_observables(problem, theta, t):
    """Training error, mean CE, per-class correctness and biases at one time.

    Returns `train_error` (fraction misclassified, argmax of the logits), `mean_ce`
    ((1/N) Σ CE, log k at zero logits; the integrated objective `loss` is k times this
    for `class_sum_cross_entropy`), `class_correct` (k,) (1 when every sample of the class
    is classified correctly: a class's learning time is where this turns 1 for good),
    `class_min_prob` (k,) (min over the class's samples of its softmax output u_c(x): the
    class is *learned* in Proposition 1's sense, 1 − u_c(x) ≤ C₁, once this exceeds
    1 − C₁), `pred_fraction` (k,) (fraction of samples predicted as each class), and, when θ has an
    output bias, `b` (k,) and `bias_gap` (top minus second bias).
    """
    logits = problem.model(theta, problem.x)
    k = logits.shape[-1]
    y = problem.y.astype(jnp.int32)
    pred = jnp.argmax(logits, axis=-1)
    correct = pred == y
    onehot = jax.nn.one_hot(y, k, dtype=bool)
    out = {
        "train_error": jnp.mean((~correct).astype(logits.dtype)),
        "mean_ce": cross_entropy(logits, y),
        "class_correct": jnp.all(jnp.where(onehot, correct[:, None], True), axis=0).astype(
            logits.dtype
        ),
        "class_min_prob": jnp.min(
            jnp.where(onehot, jax.nn.softmax(logits, axis=-1), jnp.inf), axis=0
        ),
        "pred_fraction": jnp.mean(jax.nn.one_hot(pred, k, dtype=logits.dtype), axis=0),
    }
    if isinstance(theta, dict) and "b" in theta:
        out["b"] = theta["b"]
        out["bias_gap"] = top_gap(theta["b"])
    return out


def homogeneous_observables(problem, theta, t):
    """`classification_observables` plus Proposition 1's weights (§4 of the paper).

    `W_diag` (k,) = W_ii; `offdiag_max` = max_{i≠j} |W_ij| (j < d; columns j ≥ k are off
    the class features too); `noise_corr_max` = max_{i, x} |⟨W_i, ξ_x⟩| with ξ_x = x − e_{y_x}
    (exact for `orthogonal_data`; for other data it measures x − e_y).
    """
    out = classification_observables(problem, theta, t)
    W = theta["W"]
    k, d = W.shape
    eye = jnp.eye(k, d, dtype=bool)
    xi = problem.x - jax.nn.one_hot(problem.y.astype(jnp.int32), d, dtype=W.dtype)
    out["W_diag"] = jnp.diagonal(W)
    out["offdiag_max"] = jnp.max(jnp.where(eye, 0.0, jnp.abs(W)))
    out["noise_corr_max"] = jnp.max(jnp.abs(xi @ W.T))
    return out
