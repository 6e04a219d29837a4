"""A `Problem`: model family + data + loss + θ(0). Everything `simulate` and the baselines need."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from ._data import Dataset
from ._errors import ConfigError
from ._losses import squared_error
from .models.base import AbstractModel


class Problem(eqx.Module):
    """The objective L(θ) = loss(model(θ, x), y) and the initial point θ(0).

    A pytree (arrays are leaves), so it can be passed as `args` into jitted solves
    without being baked in as constants.
    """

    model: AbstractModel
    x: Float[Array, "n d"]
    y: Array
    theta0: PyTree
    loss_fn: Callable = eqx.field(static=True)
    data_name: str = eqx.field(static=True)

    def loss(self, theta: PyTree) -> Float[Array, ""]:
        return self.loss_fn(self.model(theta, self.x), self.y)

    def grad(self, theta: PyTree) -> PyTree:
        return jax.grad(self.loss)(theta)

    def loss_and_grad(self, theta: PyTree):
        return jax.value_and_grad(self.loss)(theta)

    @property
    def n_params(self) -> int:
        return int(sum(np.prod(leaf.shape) for leaf in jax.tree_util.tree_leaves(self.theta0)))

    def describe(self) -> dict:
        return {
            "model": self.model.describe(),
            "data": self.data_name,
            "n_samples": int(self.x.shape[0]),
            "loss": getattr(self.loss_fn, "description", self.loss_fn.__name__),
            "n_params": self.n_params,
        }


def make_problem(
    model: AbstractModel,
    data: Dataset,
    key: PRNGKeyArray | int = 0,
    *,
    loss_fn: Callable = squared_error,
    theta0: PyTree | None = None,
) -> Problem:
    """Build a `Problem`; θ(0) = `model.init(key)` unless `theta0` is given.

    Raises `ConfigError` when the data's input dimension does not match the model's.
    """
    d_model = getattr(model, "d", None)
    if d_model is not None and data.d != d_model:
        raise ConfigError(
            f"the data have d = {data.d} input dimensions but the model expects d = {d_model}; "
            f"build the model with d={data.d}."
        )
    if isinstance(key, int):
        key = jax.random.key(key)
    if theta0 is None:
        theta0 = model.init(key)
    theta0 = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=jnp.float64), theta0)
    return Problem(
        model=model,
        x=jnp.asarray(data.x),
        y=jnp.asarray(data.y),
        theta0=theta0,
        loss_fn=loss_fn,
        data_name=data.name,
    )
