"""A user's model given as a plain function `f(params, x)`, with its parameters a pytree."""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._errors import ConfigError
from .base import AbstractModel


class FunctionModel(AbstractModel):
    """Wraps `fn(params, x) -> outputs` so any function of a params pytree is a model.

    `flows.make_problem(fn, data, theta0=params)` builds one for you; `theta0` is then θ(0)
    (a plain function has no initialization of its own). Parameters are labelled by their
    pytree paths in saved results.

    **Arguments:** `fn`, a JAX-traceable function of (params, x (n, d)); `treedef` and
    `shapes`, the structure and leaf shapes of the params (`FunctionModel.of(fn, params)`).
    """

    fn: Callable = eqx.field(static=True)
    # jaxlib ships no stub for PyTreeDef, so pyright sees jax's alias of it as a variable
    treedef: jax.tree_util.PyTreeDef = eqx.field(static=True)  # pyright: ignore[reportInvalidTypeForm]
    shapes: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    names: tuple[str, ...] = eqx.field(static=True)

    @classmethod
    def of(cls, fn: Callable, params: PyTree) -> FunctionModel:
        if not callable(fn):
            raise ConfigError(
                f"`model` must be a flows model or a function f(params, x); got {fn!r}."
            )
        leaves_with_paths, treedef = jax.tree_util.tree_flatten_with_path(params)
        if not leaves_with_paths:
            raise ConfigError("`theta0` of a function model must hold at least one array.")
        names = tuple(
            jax.tree_util.keystr(path).strip("[]'\"").replace("']['", ".") or f"p{i}"
            for i, (path, _) in enumerate(leaves_with_paths)
        )
        shapes = tuple(tuple(np.shape(leaf)) for _, leaf in leaves_with_paths)
        return cls(fn=fn, treedef=treedef, shapes=shapes, names=names)

    def init(self, key: PRNGKeyArray) -> PyTree[Float[Array, ...]]:
        """Zeros of the parameters' shapes: the structure only (θ(0) comes from `theta0`)."""
        return jax.tree_util.tree_unflatten(self.treedef, [jnp.zeros(s) for s in self.shapes])

    def __call__(self, params: PyTree, x: Float[Array, "n d"]) -> Float[Array, "n ..."]:
        return self.fn(params, x)

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        return {}

    def describe(self) -> dict:
        return {
            "family": "function",
            "function": getattr(self.fn, "__qualname__", repr(self.fn)),
            "module": getattr(self.fn, "__module__", ""),
            "params": {n: list(s) for n, s in zip(self.names, self.shapes, strict=True)},
        }
