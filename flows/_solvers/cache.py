"""The state the solves share: one vector-field evaluation counter and one cache of
compiled solves."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from .. import _compile


class EvalCounter:
    """Counts vector-field calls, and those that returned NaN/Inf, from inside jitted code
    (host callback). Non-finite trial stages are normally rejected by the step-size
    controller; when a solve then fails, this count names the cause."""

    def __init__(self):
        self.n = 0
        self.nonfinite = 0
        self.products = 0

    def reset(self):
        self.n = 0
        self.nonfinite = 0
        self.products = 0

    def __call__(self, bad):
        self.n += 1
        self.nonfinite += int(bad)

    def add_products(self, k) -> None:
        """Jacobian-vector products of a matrix-free linear solve (`HessianCG.on_solve`)."""
        self.products += int(k)


#: The one evaluation counter of the solves (reset at the start of each).
EVAL_COUNTER = EvalCounter()

#: Compiled solves, keyed by the kind of solve, its settings, the solver and the problem's
#: structure and shapes, so repeated runs (seeds, benchmarks, sweeps over equal shapes)
#: compile once.
_COMPILED: dict[Hashable, Any] = {}
_compile.register_cache(_COMPILED.clear)

_T = TypeVar("_T")


def cached(key: Hashable, build: Callable[[], _T]) -> tuple[_T, bool]:
    """The compiled solve stored under `key`, built by `build()` on first use; returns it and
    whether it was built now. The key names what `build` makes, so a hit has `build`'s type."""
    fn = _COMPILED.get(key)
    if fn is not None:
        return fn, False
    _compile.relieve_map_pressure()  # before compiling: see `flows._compile`
    fn = build()
    _COMPILED[key] = fn
    return fn, True
