"""Pytree helpers of the stabilized solvers (norms, scaling, `where`, a start vector for
power iterations)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, PyTree


def _tree_norm(tree: PyTree[Array]) -> Array:
    leaves = jtu.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


def _tree_scale(tree: PyTree[Array], c: Array) -> PyTree[Array]:
    return jtu.tree_map(lambda x: x * c.astype(x.dtype), tree)


def _start_vector(y: PyTree[Array]) -> PyTree[Array]:
    """Deterministic pseudo-random unit vector shaped like `y` (fixed key; one fold-in per
    leaf), so that runs are reproducible and the start is almost surely not orthogonal to
    the dominant eigenvector."""
    leaves, treedef = jtu.tree_flatten(y)
    key = jax.random.PRNGKey(0)
    vs = [
        jax.random.normal(jax.random.fold_in(key, i), jnp.shape(x), jnp.result_type(x))
        for i, x in enumerate(leaves)
    ]
    v = jtu.tree_unflatten(treedef, vs)
    return _tree_scale(v, 1.0 / _tree_norm(v))


def _tree_all_finite(tree) -> Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]))


def _tree_where(pred, a, b):
    return jtu.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)
