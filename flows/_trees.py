"""Pytree helpers shared by the solves, the solvers and the event flow: norms, scaling,
`where`, finiteness, and a start vector for power iterations."""

from __future__ import annotations

from typing import cast

import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jaxtyping import Array, PyTree


def tree_sq_norm(tree) -> jax.Array:
    """Σ ‖leaf‖² over the leaves of a pytree (traceable)."""
    # `sum` starts from the int 0, which is returned as it is only for a tree with no leaves
    return cast(jax.Array, sum(jnp.vdot(v, v) for v in jax.tree_util.tree_leaves(tree)))


def all_finite(tree) -> bool:
    """Whether every leaf of a pytree is finite (host-side: blocks on the values)."""
    return all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(tree))


def tree_norm(tree: PyTree[Array]) -> Array:
    leaves = jtu.tree_leaves(tree)
    return jnp.sqrt(sum(jnp.sum(jnp.abs(x) ** 2) for x in leaves))


def tree_scale(tree: PyTree[Array], c: Array) -> PyTree[Array]:
    return jtu.tree_map(lambda x: x * c.astype(x.dtype), tree)


def start_vector(y: PyTree[Array]) -> PyTree[Array]:
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
    return tree_scale(v, 1.0 / tree_norm(v))


def tree_all_finite(tree) -> Array:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]))


def tree_where(pred, a, b):
    return jtu.tree_map(lambda x, y: jnp.where(pred, x, y), a, b)


def tree_rms(tree) -> jax.Array:
    """Root mean square over every component of a pytree (traceable)."""
    leaves = [jnp.ravel(v) for v in jax.tree_util.tree_leaves(tree)]
    flat = jnp.concatenate(leaves)
    return jnp.sqrt(jnp.mean(flat * flat))
