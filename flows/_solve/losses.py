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
import numpy as np

from .._errors import ConfigError
from .._validate import as_int, as_real_array


def squared_error(pred, y):
    """R = 1/(2n) Σ_i ‖f(x_i) − y_i‖²: the multi-stage paper's risk on the empirical measure
    (scalar outputs), and for vector outputs the sum over output components, averaged over
    samples (the deep-linear paper's L = (1/2n) Σ_i ‖y_i − W₂W₁x_i‖²)."""
    r = pred - y
    if r.ndim == 1:
        return 0.5 * jnp.mean(r**2)
    return 0.5 * jnp.mean(jnp.sum(r**2, axis=tuple(range(1, r.ndim))))


squared_error.description = (
    "R = 1/(2n) * sum_i ||f(x_i) - y_i||^2 (squared error summed over outputs, averaged over "
    "samples, halved)"
)
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


# Label checks for the target kinds above (called by `make_problem` and data constructors)


def check_labels(y, k: int) -> np.ndarray:
    """Labels as an int64 array after checking they are integers in [0, k).

    Integral floats (1.0) are accepted, and bools as 0/1; fractional, negative, ≥ k,
    non-finite, complex or non-numeric labels raise `ConfigError` naming the first
    offending label. Called by the classification data constructors and by
    `make_problem` for every cross-entropy loss (which would otherwise turn a label ≥ k
    into a NaN loss, wrap −1 to class k − 1 and truncate 0.5 to 0).
    """
    k = as_int("k", k, minimum=2, hint="`k` is the number of classes.")
    y = as_real_array("y", y, dtype=None, finite=False, hint="Class labels are 0, 1, …, k − 1.")
    if y.ndim == 2 and y.shape[1] == k and y.shape[0] > 0:
        raise ConfigError(
            f"labels `y` must have shape (n,) (class indices in [0, {k})); got shape {y.shape}, "
            "which looks one-hot: pass y.argmax(axis=1)."
        )
    if y.ndim != 1:
        raise ConfigError(f"labels `y` must have shape (n,); got shape {y.shape}.")
    if y.size == 0:
        raise ConfigError("labels `y` are empty: need at least one sample.")
    if not np.issubdtype(y.dtype, np.integer):
        bad = ~np.isfinite(y) | (y != np.round(y))
        if bad.any():
            i = int(np.argmax(bad))
            raise ConfigError(
                f"labels must be integers in [0, {k}); y[{i}] = {float(y[i])!r} is not an "
                "integer. Class labels are 0, 1, …, k − 1."
            )
        y = y.astype(np.int64)
    bad = (y < 0) | (y >= k)
    if bad.any():
        i = int(np.argmax(bad))
        raise ConfigError(
            f"labels must be integers in [0, k) = [0, {k}); y[{i}] = {int(y[i])} is out of range. "
            f"Number the classes 0 … {k - 1} (or build the model with more outputs)."
        )
    return y.astype(np.int64)


def check_sign_labels(y) -> np.ndarray:
    """Labels as a float64 array of shape (n,) after checking every one is −1 or +1.

    Raises `ConfigError` naming the first offending label (and saying how to map {0, 1}
    labels). Called by `binary_dataset` and by `make_problem` for the logistic loss.
    """
    y = as_real_array("y", y, finite=False)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.size == 0:
        raise ConfigError(f"labels `y` must have shape (n,) with n ≥ 1; got shape {y.shape}.")
    bad = ~np.isin(y, (-1.0, 1.0))
    if bad.any():
        i = int(np.argwhere(bad)[0, 0])
        zero_one = bool(np.all(np.isin(y, (0.0, 1.0))))
        how = (
            "These look like {0, 1} labels: pass y = 2·y − 1."
            if zero_one
            else "Map your two classes to ±1 (e.g. y = 2·y01 − 1)."
        )
        raise ConfigError(
            f"labels must be −1 or +1 for the logistic loss log(1 + exp(−y f(x))); "
            f"y[{i}] = {float(y[i])!r}. {how}"
        )
    return y
