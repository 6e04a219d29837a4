"""Test configuration: float64 everywhere, fixed seeds, small sizes."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("FLOWS_NOTEBOOK_SIZE", "small")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402
import pytest  # noqa: E402


def assert_tree_allclose(a, b, *, rtol=1e-7, atol=0.0):
    """Compare two pytrees leaf by leaf."""
    la, ta = jax.tree_util.tree_flatten(a)
    lb, tb = jax.tree_util.tree_flatten(b)
    assert ta == tb, f"tree structures differ: {ta} vs {tb}"
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=rtol, atol=atol)


@pytest.fixture
def tree_allclose():
    return assert_tree_allclose
