"""Losses, in numerically stable forms. Each maps (predictions, targets) to a scalar and
carries a `description` saved with results (the exact objective being integrated) and
`targets`, the kind of targets it needs, which `make_problem` checks before any run:

- "real": real targets of the model's output shape (squared error);
- "classes": integer class labels in [0, k), k = the model's number of outputs
  (cross-entropy: a label ≥ k would give a NaN loss, −1 would wrap to class k − 1);
- "signs": labels −1 or +1 (logistic loss: {0, 1} labels would silently train a
  different objective).

A loss of your own may set `my_loss.targets` to one of these to get the same checks."""

from __future__ import annotations

import jax
import jax.numpy as jnp


def squared_error(pred, y):
    """R = 1/(2n) Σ_i (f(x_i) − y_i)²: the multi-stage paper's risk on the empirical measure."""
    return 0.5 * jnp.mean((pred - y) ** 2)


squared_error.description = "R = 1/(2n) * sum_i (f(x_i) - y_i)^2 (mean squared error / 2)"
squared_error.targets = "real"


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy (1/n) Σ_i [logsumexp(z_i) − z_i,y_i]; finite for any logits.

    `logits` (n, k); `labels` (n,) integers in [0, k).
    """
    lse = jax.nn.logsumexp(logits, axis=-1)
    picked = jnp.take_along_axis(logits, labels[:, None].astype(jnp.int32), axis=-1)[:, 0]
    return jnp.mean(lse - picked)


cross_entropy.description = "(1/n) * sum_i [logsumexp(z_i) - z_i[y_i]] (mean cross-entropy)"
cross_entropy.targets = "classes"


def logistic(pred, y):
    """Mean logistic loss (1/n) Σ_i log(1 + exp(−y_i f(x_i))), labels y ∈ {−1, +1}.

    Evaluated as logaddexp(0, −q): no overflow for large margins of either sign.
    """
    return jnp.mean(jnp.logaddexp(0.0, -y * pred))


logistic.description = "(1/n) * sum_i log(1 + exp(-y_i f(x_i))) (mean logistic loss)"
logistic.targets = "signs"

#: The kinds of targets a loss may declare (its `targets` attribute).
TARGET_KINDS = ("real", "classes", "signs")

LOSSES = {"squared_error": squared_error, "cross_entropy": cross_entropy, "logistic": logistic}
