"""Losses, in numerically stable forms. Each maps (predictions, targets) to a scalar."""

from __future__ import annotations

import jax.numpy as jnp


def squared_error(pred, y):
    """R = 1/(2n) Σ_i (f(x_i) − y_i)²: the multi-stage paper's risk on the empirical measure."""
    return 0.5 * jnp.mean((pred - y) ** 2)


squared_error.description = "R = 1/(2n) * sum_i (f(x_i) - y_i)^2 (mean squared error / 2)"

LOSSES = {"squared_error": squared_error}
