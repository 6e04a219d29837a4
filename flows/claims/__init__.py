"""The claim kit: a paper's claim stated as data, its verdict computed.

A claim names the measured quantity (with its numerical error bar), the paper's
expression with its unspecified constants (each with a documented default and an
admissible range), the theorem's hypotheses as predicates evaluated on the run, and the
quantity's a-priori range. `judge()` turns it into a `flows.Check` whose verdict is one of
`VERDICTS`:

- `holds` / `fails`: the comparison at the constants' defaults, with a margin larger than
  the numerical error;
- `vacuous`: the claim could not have failed (an upper bound at or above the largest
  value the quantity can take, a lower bound at or below its smallest) — counted
  separately, never "holds";
- `outside hypothesis`: the run does not meet a hypothesis of the theorem (named, with
  by how much); the comparison is still shown;
- `undecided (numerical)`: the margin is inside the numerical error bar;
- `undecided (finite size)`: a limit claim whose fitted rate's confidence interval
  contains 0;
- `holds (transient)` / `holds (persistent)` / `not observed`: an existential claim
  ("can happen") searched over whole trajectories and a family of runs;
- `not applicable`: the quantity was not reached (set by the paper's code, with why).

Beside the verdict, every unspecified constant gets its *critical value*: where, with the
other constants at their defaults, the verdict flips ("holds for C ≥ 0.79"), and where
the bound becomes vacuous.

Kinds: `Bound` (upper/lower bound, ordering), `Near` (equality within a tolerance),
`Limit` ("→ L as m → ∞": the literal value at the largest width and the fitted rate with
a confidence interval, over ≥ 4 widths × ≥ 3 seeds), `Existential` ("can happen"),
`ForAll` ("for every α in [a, b]": the margin minimised by an adaptive search — a grid,
then golden-section around every local minimum — and judged at the worst point found).
A universal claim over a set already sampled (save times) is a `Bound` on the worst value
over it, with `over` naming the set.

Bad claims raise `flows.ConfigError` naming the claim and the field: a constant with no
admissible range, a default outside its range, a hypothesis predicate that raises, a
measured value outside the a-priori range the claim itself states.

A check carries where its claim stands in the paper (`Reference`, filled in from the
check's `source` by `annotate`) and, for a finite-size claim, the trend it measured
(`Trend`), which the report draws.
"""

from .._solve.global_error import (
    GLOBAL_ERROR_SAFETY,
    error_calibration,
)
from ._bound import (
    Bound,
    Flip,
    Near,
    agrees,
    flips_at,
)
from ._checks import (
    FAILING,
    FAILS,
    FAILS_JOINTLY,
    HOLDS,
    HOLDS_PERSISTENT,
    HOLDS_TRANSIENT,
    NOT_APPLICABLE,
    NOT_OBSERVED,
    OUTSIDE_HYPOTHESIS,
    UNDECIDED,
    UNDECIDED_SIZE,
    VACUOUS,
    VERDICTS,
    Check,
    Reference,
    Trend,
    annotate,
    error_note,
    row_notes,
)
from ._error_bars import (
    with_error_bars,
)
from ._estimates import (
    ORDER_SLACK,
    limit_in_time,
    linear_fit,
    power_law_fit,
    richardson,
)
from ._existential import (
    Existential,
)
from ._forall import (
    ForAll,
)
from ._limit import (
    MIN_SEEDS,
    MIN_WIDTHS,
    Limit,
)
from ._parts import (
    Constant,
    Critical,
    Hypothesis,
    Measured,
)
from ._window import Extension, Part, Window, edge_trend, extend

__all__ = [
    "VERDICTS",
    "HOLDS",
    "FAILS",
    "FAILS_JOINTLY",
    "FAILING",
    "VACUOUS",
    "OUTSIDE_HYPOTHESIS",
    "UNDECIDED",
    "UNDECIDED_SIZE",
    "HOLDS_TRANSIENT",
    "HOLDS_PERSISTENT",
    "NOT_OBSERVED",
    "NOT_APPLICABLE",
    "Measured",
    "Constant",
    "Hypothesis",
    "Critical",
    "Bound",
    "Near",
    "Limit",
    "Existential",
    "ForAll",
    "Window",
    "Part",
    "edge_trend",
    "extend",
    "Extension",
    "linear_fit",
    "power_law_fit",
    "richardson",
    "agrees",
    "limit_in_time",
    "ORDER_SLACK",
    "with_error_bars",
    "error_calibration",
    "GLOBAL_ERROR_SAFETY",
    "flips_at",
    "Flip",
    "MIN_WIDTHS",
    "MIN_SEEDS",
    "Reference",
    "Trend",
    "annotate",
    "error_note",
    "row_notes",
    "Check",
]
