"""Small pytree helpers shared by the solves."""

from __future__ import annotations

from typing import cast

import jax
import jax.numpy as jnp

__all__ = ["all_finite", "tree_sq_norm"]


def tree_sq_norm(tree) -> jax.Array:
    """Σ ‖leaf‖² over the leaves of a pytree (traceable)."""
    # `sum` starts from the int 0, which is returned as it is only for a tree with no leaves
    return cast(jax.Array, sum(jnp.vdot(v, v) for v in jax.tree_util.tree_leaves(tree)))


def all_finite(tree) -> bool:
    """Whether every leaf of a pytree is finite (host-side: blocks on the values)."""
    return all(bool(jnp.all(jnp.isfinite(v))) for v in jax.tree_util.tree_leaves(tree))
