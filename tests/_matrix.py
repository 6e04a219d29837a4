"""Parameter matrices split between the default test command and `.ci/run`.

A parametrized test that runs one behaviour over several solvers, problems or inputs keeps
a representative in the default command (README command 2, about ten minutes) and runs
the rest of its matrix as `e2e`, which `.ci/run` runs (`pytest -m e2e`): every value is
still checked on every CI run, and a developer's quick loop pays for one or two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pytest


def default_and_ci(values: Iterable, *, default: Sequence, unpack: bool = False) -> list:
    """`values` for `pytest.mark.parametrize`, those not in `default` marked `e2e`.

    `unpack=True` when the test takes several arguments and each value is their tuple.
    A `default` value that is not among `values` is an error (a renamed case would
    otherwise leave the default command without one)."""
    values = list(values)
    stray = [d for d in default if d not in values]
    if stray:
        raise ValueError(f"default values {stray!r} are not among the parameters {values!r}")
    if not default:
        raise ValueError("keep at least one value in the default command")
    out = []
    for v in values:
        args = v if unpack else (v,)
        out.append(
            pytest.param(*args) if v in default else pytest.param(*args, marks=pytest.mark.e2e)
        )
    return out
