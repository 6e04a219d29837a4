"""The interface every model family implements."""

from __future__ import annotations

import abc
import functools

import equinox as eqx
import numpy as np
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._validate import as_bool, as_float, as_int
from ._kinks import PiecewiseLinear

#: What a model's call accepts for parameters and inputs: JAX or NumPy arrays.
ArrayIn = Array | np.ndarray


def int_field(name: str, *, minimum: int = 1, hint: str = "", **kwargs):
    """A static hyper-parameter stored as a Python int (`as_int`: NumPy and 0-d JAX integers
    accepted; bools, floats such as 2.5 or 3.0, strings refused with a `ConfigError`)."""
    convert = functools.partial(as_int, name, minimum=minimum, hint=hint)
    return eqx.field(static=True, converter=convert, **kwargs)


def float_field(name: str, *, positive: bool = False, hint: str = "", **kwargs):
    """A static hyper-parameter stored as a finite Python float (`as_float`: NumPy and 0-d
    JAX numbers accepted; bools, strings, complex, NaN/inf refused)."""
    convert = functools.partial(as_float, name, positive=positive, hint=hint)
    return eqx.field(static=True, converter=convert, **kwargs)


def bool_field(name: str, **kwargs):
    """A static switch stored as a Python bool (`as_bool`: strings such as "False" refused)."""
    return eqx.field(static=True, converter=functools.partial(as_bool, name), **kwargs)


class AbstractModel(eqx.Module):
    """A model family: hyper-parameters as (static) fields; parameters as a separate pytree.

    Hyper-parameters are converted on construction to plain Python ints/floats/bools
    (`int_field`, `float_field`, `bool_field`), so `np.int64(10)` or a 0-d JAX array is
    accepted and the module hashes, compares and `describe()`s as with Python numbers.

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

    @property
    def activation_kinks(self) -> PiecewiseLinear | None:
        """The activation's kink points, for the exact flow through them
        (`flows.simulate_nonsmooth`); None for a smooth activation (the default)."""
        return None

    def forward(self, params: PyTree, x: Float[Array, "n d"], act) -> Float[Array, "n ..."]:
        """The model with its activation given as `act(layer, z)` (pre-activations z of shape
        (n, units) per named layer): what a model with kinks provides for
        `flows.simulate_nonsmooth`."""
        raise NotImplementedError(
            f"{type(self).__name__} does not provide forward(params, x, act); the exact flow "
            "through kinks needs it (see LeakyReLUNet.forward)."
        )

    @abc.abstractmethod
    def describe(self) -> dict:
        """Hyper-parameters as plain JSON-able data (saved with every result)."""
