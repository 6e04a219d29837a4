"""The solvers the toolkit knows by name: one record each (`record.SolverRecord`), and the
tables `flows` exports built from them. Adding a solver: its class and its record in a new
module, one line in `RECORDS`.

Tsit5 (default, 5th order explicit), Dopri5, Dopri8 (tight tolerances), Kvaerno5
(implicit, for stiff runs; forms the dense Hessian, so small problems only), RKC2
(second-order Runge–Kutta–Chebyshev: stabilized explicit, for gradient flows whose step
is limited by the Hessian's spectral radius; its non-stiff, accuracy-limited steps are
Tsit5 steps; tolerance-proportional control; `flows.RKC2`), ESERK4 (fourth-order
stabilized explicit, extrapolated Chebyshev steps, for the same flows at tight
tolerances; `flows.ESERK4`), ROCK4 (fourth-order stabilized explicit with a three-term
recurrence: s evaluations a step for h ρ ≤ 0.318 s²; `flows.ROCK4`), Kvaerno5-CG
(Kvaerno5 whose Newton systems are solved by conjugate gradients on Hessian-vector
products: matrix-free, any size), ETDRK4 (exponential Runge–Kutta whose linear part is the
Hessian's most negative eigenpair, for flows whose stiffness is a few outliers;
`flows.ETDRK4`; interpolates by its exponential dense output).

Solvers that step to the save times, because a save between their steps is far less
accurate than a step end (`benchmarks/results/dense_output.md`: worst error of the
interpolant at 0.1 … 0.9 of a step / worst step-end error): Dopri8, whose diffrax
interpolant is of lower order than its steps (up to 700×); Kvaerno5, whose dense output
is a cubic Hermite interpolant of an order-5 method (Prothero–Robinson, rtol 1e-10:
129×); ESERK4 and ROCK4, whose cubic Hermite between long stiff steps multiplies the error
of the stiff components at the step ends by up to about h·λ/4 (up to 15× and 5.5× on a
problem whose observable is a difference of large terms: 68× and 7.7× the tolerance
there). Their saves are step ends. Interpolating: Tsit5 and Dopri5 (within 2× except at
rtol ≤ 1e-8 on a tanh net, 2.1–3.1× and 6×: a fourth-order interpolant of fifth-order
steps; and 3–7× where stability, not accuracy, sets the step, with saves ≤ 0.015 × the
tolerance) and RKC2 (its second-order steps are less accurate than its cubic Hermite;
within 2.1× except 3.1× at rtol 1e-4 with saves at 0.01 × the tolerance, and its
non-stiff Tsit5 steps as Tsit5's).
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax

from ._eserk import RECORD as ESERK4_RECORD
from ._etd import RECORD as ETDRK4_RECORD
from ._implicit import KVAERNO5_CG_RECORD, KVAERNO5_RECORD
from ._rkc import RECORD as RKC2_RECORD
from ._rock import RECORD as ROCK4_RECORD
from .record import SolverRecord

# Vector-field evaluations per step of the explicit solvers as diffrax implements them
# (plus one at the start): Tsit5 and Dopri5 are FSAL with 7 stages, Dopri8 has 13.
# Checked against a host-callback count in the tests.
TSIT5_RECORD = SolverRecord("tsit5", diffrax.Tsit5, evals_per_step=6)
DOPRI5_RECORD = SolverRecord("dopri5", diffrax.Dopri5, evals_per_step=6)
DOPRI8_RECORD = SolverRecord("dopri8", diffrax.Dopri8, evals_per_step=13, steps_to_saves=True)

#: Every named solver, in the order names are matched against a solver object.
RECORDS: tuple[SolverRecord, ...] = (
    TSIT5_RECORD,
    DOPRI5_RECORD,
    DOPRI8_RECORD,
    KVAERNO5_RECORD,
    RKC2_RECORD,
    ESERK4_RECORD,
    ROCK4_RECORD,
    KVAERNO5_CG_RECORD,
    ETDRK4_RECORD,
)
RECORD_BY_NAME: dict[str, SolverRecord] = {r.name: r for r in RECORDS}

#: Solvers by name: each a constructor of the solver with no tolerances given.
SOLVERS: dict[str, Callable[[], diffrax.AbstractSolver]] = {r.name: r.default for r in RECORDS}
#: The solvers that form the dense Jacobian of the field ('kvaerno5-cg' is implicit but
#: matrix-free, so not limited by `MAX_IMPLICIT_PARAMS`).
IMPLICIT_SOLVERS = frozenset(r.name for r in RECORDS if r.dense_jacobian)
#: The algorithm behind a solver name where the name alone does not say it.
SOLVER_METHODS = {r.name: r.method for r in RECORDS if r.method is not None}
#: Vector-field evaluations per step where they follow from the step count.
EVALS_PER_STEP = {r.name: r.evals_per_step for r in RECORDS if r.evals_per_step is not None}
#: Solvers that step to the save times (`control.pid_controller(step_ts=...)`).
STEP_TO_SAVES = frozenset(r.name for r in RECORDS if r.steps_to_saves)
