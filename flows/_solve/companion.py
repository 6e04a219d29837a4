"""Tolerances tightened for a whole computation: the companion of a result that is not one
solve but a function of several (a sweep point's descent time, plateau length, …).

Inside `tolerances_scaled(s)` every adaptive solve that starts (`simulate`,
`simulate_batch`, `simulate_nonsmooth`, at whatever depth of a paper's code) runs at
rtol·s and atol·s, and is counted. Running a computation once plainly and once inside
`tolerances_scaled(1/10)` gives the difference from which a number's global error is
estimated (`flows.claims.error_calibration`), exactly as `simulate(…, global_error=True)`
does for a single run; the count says whether any adaptive solve was behind the number
at all (gradient descent has no tolerance: its error is its step size's)."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

__all__ = ["SolveCount", "companion_active", "scaled_tolerances", "tolerances_scaled"]


class SolveCount:
    """How many adaptive solves started inside a `tolerances_scaled` block."""

    def __init__(self) -> None:
        self.n = 0


_SCALE: contextvars.ContextVar[tuple[float, SolveCount] | None] = contextvars.ContextVar(
    "flows_tolerance_scale", default=None
)


@contextlib.contextmanager
def tolerances_scaled(scale: float) -> Iterator[SolveCount]:
    """Within the block, every adaptive solve runs at its rtol and atol times `scale`
    (blocks nest: their scales multiply). Yields the count of solves started."""
    outer = _SCALE.get()
    count = SolveCount()
    total = float(scale) * (outer[0] if outer is not None else 1.0)
    token = _SCALE.set((total, count))
    try:
        yield count
    finally:
        _SCALE.reset(token)
        if outer is not None:
            outer[1].n += count.n


def scaled_tolerances(rtol, atol):
    """(rtol, atol) of a solve about to start: as given, or times the scale of the
    enclosing `tolerances_scaled` block (then counted). Values that are not numbers are
    passed through, for the solve's own validation to refuse in the user's terms."""
    active = _SCALE.get()
    if active is None:
        return rtol, atol
    scale, count = active
    count.n += 1
    try:
        return rtol * scale, atol * scale
    except TypeError:
        return rtol, atol


def companion_active() -> bool:
    """Whether a companion computation is under way (inside `tolerances_scaled`). A solver
    that steps to its save times (`flows.STEP_TO_SAVES`) then also steps to the midpoints
    between them: where the saves set the steps, run and companion would otherwise take
    nearly the same steps and their difference would not measure the run's error."""
    return _SCALE.get() is not None
