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

VECTOR_FIELDS = ("autodiff", "fused")
DTYPES = {"float64": jnp.float64, "float32": jnp.float32}


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
    #: 'autodiff' (jax.grad) or 'fused' (the model's hand-derived `fused_grad`).
    vector_field: str = eqx.field(static=True, default="autodiff")

    def loss(self, theta: PyTree) -> Float[Array, ""]:
        return self.loss_fn(self.model(theta, self.x), self.y)

    def grad(self, theta: PyTree) -> PyTree:
        if self.vector_field == "fused":
            return self.model.fused_grad(theta, self.x, self.y)  # type: ignore[attr-defined]
        return jax.grad(self.loss)(theta)

    def loss_and_grad(self, theta: PyTree):
        if self.vector_field == "fused":
            return self.model.fused_loss_and_grad(theta, self.x, self.y)  # type: ignore[attr-defined]
        return jax.value_and_grad(self.loss)(theta)

    @property
    def dtype(self):
        return jnp.asarray(self.x).dtype

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
            "vector_field": self.vector_field,
            "dtype": str(self.dtype),
        }


def make_problem(
    model: AbstractModel,
    data: Dataset,
    key: PRNGKeyArray | int = 0,
    *,
    loss_fn: Callable = squared_error,
    theta0: PyTree | None = None,
    vector_field: str = "autodiff",
    dtype: str = "float64",
) -> Problem:
    """Build a `Problem`; θ(0) = `model.init(key)` unless `theta0` is given.

    - `vector_field`: 'autodiff' (default, any model and loss) or 'fused' (a hand-derived
      ∇L: two-layer nets with the squared error only; faster, tested against autodiff).
    - `dtype`: 'float64' (default) or 'float32' (data and θ(0) cast, and `simulate` then
      integrates in float32; about half the cost per evaluation on CPU.
      `benchmarks/bench_work_precision.py` and `bench_descent_time.py` measure what it
      changes in the error — use it where they say so, with rtol ≥ 1e-6).

    Raises `ConfigError` when the data's input dimension does not match the model's, or
    an option does not apply to this model and loss.
    """
    d_model = getattr(model, "d", None)
    if d_model is not None and data.d != d_model:
        raise ConfigError(
            f"the data have d = {data.d} input dimensions but the model expects d = {d_model}; "
            f"build the model with d={data.d}."
        )
    if vector_field not in VECTOR_FIELDS:
        raise ConfigError(f"`vector_field` must be one of {VECTOR_FIELDS}; got {vector_field!r}.")
    if vector_field == "fused" and not (hasattr(model, "fused_grad") and loss_fn is squared_error):
        raise ConfigError(
            "`vector_field='fused'` exists for two-layer nets (`TwoLayer`) with the squared "
            f"error only; got model {type(model).__name__} with loss "
            f"{getattr(loss_fn, '__name__', loss_fn)!r}. Use vector_field='autodiff'."
        )
    if dtype not in DTYPES:
        raise ConfigError(f"`dtype` must be one of {tuple(DTYPES)}; got {dtype!r}.")
    dt = DTYPES[dtype]
    if isinstance(key, int):
        key = jax.random.key(key)
    if theta0 is None:
        theta0 = model.init(key)
    theta0 = jax.tree_util.tree_map(lambda v: jnp.asarray(v, dtype=dt), theta0)
    x = jnp.asarray(data.x, dtype=dt)
    y = jnp.asarray(data.y)
    if jnp.issubdtype(y.dtype, jnp.floating):
        y = y.astype(dt)
    return Problem(
        model=model,
        x=x,
        y=y,
        theta0=theta0,
        loss_fn=loss_fn,
        data_name=data.name,
        vector_field=vector_field,
    )
