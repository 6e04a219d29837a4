"""The interface every model family implements."""

from __future__ import annotations

import abc

import equinox as eqx
from jaxtyping import Array, Float, PRNGKeyArray, PyTree


class AbstractModel(eqx.Module):
    """A model family: hyper-parameters as (static) fields; parameters as a separate pytree.

    Parameters are kept outside the module so gradient flow integrates a plain pytree
    θ (a dict of arrays) and the module stays immutable configuration.
    """

    @abc.abstractmethod
    def init(self, key: PRNGKeyArray) -> PyTree[Float[Array, ...]]:
        """Initial parameters θ(0) drawn from `key`."""

    @abc.abstractmethod
    def __call__(self, params: PyTree, x: Float[Array, "n d"]) -> Float[Array, "n ..."]:
        """Outputs on a batch of inputs."""

    def param_dims(self) -> dict[str, tuple[str, ...]]:
        """Dimension names of each parameter (for labelled results); override per family."""
        return {}

    @abc.abstractmethod
    def describe(self) -> dict:
        """Hyper-parameters as plain JSON-able data (saved with every result)."""
