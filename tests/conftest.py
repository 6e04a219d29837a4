"""Test configuration: float64 everywhere, fixed seeds, small sizes."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("FLOWS_NOTEBOOK_SIZE", "small")

# Runtime checks of the jaxtyping shape annotations (beartype), installed before any flows
# or reduced module is imported. Scope: the pure-theory modules and the model families,
# whose array arguments' shapes the annotations state. The engine's entry points
# (`flows.simulate`, `make_problem`, …) check their arguments explicitly (`flows._validate`)
# and accept NumPy and 0-d JAX numbers that a strict `float` annotation would refuse, and
# the sympy derivations (`reduced.derive`) carry no array shapes.
import pkgutil  # noqa: E402
from pathlib import Path  # noqa: E402

from jaxtyping import install_import_hook  # noqa: E402

# every theory module of `reduced` (found on disk, not imported: the hook must come first)
# and the model families
TYPECHECKED = (
    *(
        f"reduced.{m.name}"
        for m in pkgutil.iter_modules([str(Path(__file__).resolve().parents[1] / "reduced")])
        if not m.name.startswith("_") and m.name != "derive"
    ),
    "flows.models",
)
_HOOK = install_import_hook(TYPECHECKED, "_typecheck.typechecker")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

# The persistent compilation cache for the suite, shared with the commands it starts (they
# read FLOWS_CACHE_DIR) and kept between runs (`.ci/run`'s second pytest, a developer's
# reruns): a test module recompiles what an earlier one compiled only as a disk read.
# FLOWS_CACHE_DIR chooses another folder; FLOWS_NO_CACHE=1 runs the suite uncached.
_TEST_CACHE = os.environ.setdefault(
    "FLOWS_CACHE_DIR",
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".pytest_cache", "flows-jax"
    ),
)
from flows import _compile  # noqa: E402

if not _compile.cache_disabled_by_env():
    _compile.enable_compilation_cache(_TEST_CACHE)

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


@pytest.fixture(autouse=True, scope="module")
def _bounded_compiled_programs():
    """Keep the process far from its memory-map limit. Each cached XLA CPU executable holds
    about three memory mappings; at the kernel's limit (`vm.max_map_count`, 65 530) LLVM
    cannot map a new program and the process segfaults — the crash this suite met in one
    long process (root cause found 2026-12-04, see `flows._compile`). The engine drops its
    compiled programs at half the limit before compiling; after each test module, compiled
    programs are dropped here already at a quarter of it (tests also compile outside the
    engine's caches). Until then modules share what earlier ones compiled."""
    yield
    _compile.relieve_map_pressure(threshold=0.25)
