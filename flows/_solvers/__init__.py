"""The solvers `flows.simulate` knows by name and what the solves ask of a solver.

`record` (what is known of a named solver) and `registry` (the records, and the tables
built from them: `SOLVERS`, `IMPLICIT_SOLVERS`, `SOLVER_METHODS`, `EVALS_PER_STEP`,
`STEP_TO_SAVES`); `choose` ('auto', a name or an object resolved and checked against the
problem); `control` (first step, error norm, PID controller, stepping to saves); `family`
(what differs between solver families: own evaluation counts, run-time tolerances, the
first step's stability cap, what a finished solve reports); `cache` (the evaluation
counter and the compiled solves the runs share). The solver classes: `_rkc` (RKC2),
`_eserk` (ESERK4), `_rock` (ROCK4), `_implicit` (Kvaerno5 and its matrix-free form), on
`_stabilized` (their common step); `_etd` (ETDRK4: exponential time differencing with
the Hessian's outlier as its linear part); `_krylov` (EXPRB43/32, not named). Re-exports only.
"""

from ._eserk import ESERK4
from ._implicit import ChunkedLU, is_matrix_free, with_chunked_jacobian
from ._rkc import RKC2
from ._rock import ROCK4
from ._stabilized import (
    ERROR_NORMS,
    AbstractStabilizedSolver,
)
from .cache import (
    EVAL_COUNTER,
    EvalCounter,
    cached,
)
from .choose import (
    AUTO_FOURTH_ORDER_MAX_RTOL,
    AUTO_PILOT_STEP,
    AUTO_PILOT_STEPS,
    AUTO_RKC_MIN_RTOL,
    AUTO_STIFF_RHO_SPAN,
    FLOAT32_IMPLICIT_MIN_RTOL,
    FLOAT32_MIN_RTOL,
    MAX_IMPLICIT_PARAMS,
    SolverChoice,
    auto_solver,
    describe_solver,
    make_solver,
    outlier_spectrum,
    resolve_solver,
    resolve_solver_name,
    solver_key,
    spectral_radius,
)
from .control import (
    FIRST_STEP_MAX,
    FIRST_STEP_STABILITY,
    check_error_norm,
    error_norm_fn,
    initial_step,
    pid_controller,
    steps_to_saves,
)
from .family import (
    counts_own_evals,
    has_stability_cap,
    runtime_solver,
    runtime_tolerances,
    solver_report,
)
from .record import (
    SolverRecord,
)
from .registry import (
    EVALS_PER_STEP,
    IMPLICIT_SOLVERS,
    RECORD_BY_NAME,
    RECORDS,
    SOLVER_METHODS,
    SOLVERS,
    STEP_TO_SAVES,
)

__all__ = [
    "ChunkedLU",
    "ERROR_NORMS",
    "AbstractStabilizedSolver",
    "EVAL_COUNTER",
    "EvalCounter",
    "cached",
    "is_matrix_free",
    "with_chunked_jacobian",
    "AUTO_FOURTH_ORDER_MAX_RTOL",
    "AUTO_PILOT_STEP",
    "AUTO_PILOT_STEPS",
    "AUTO_RKC_MIN_RTOL",
    "AUTO_STIFF_RHO_SPAN",
    "FLOAT32_IMPLICIT_MIN_RTOL",
    "FLOAT32_MIN_RTOL",
    "MAX_IMPLICIT_PARAMS",
    "SolverChoice",
    "auto_solver",
    "describe_solver",
    "make_solver",
    "resolve_solver",
    "resolve_solver_name",
    "solver_key",
    "outlier_spectrum",
    "spectral_radius",
    "FIRST_STEP_MAX",
    "FIRST_STEP_STABILITY",
    "check_error_norm",
    "error_norm_fn",
    "initial_step",
    "pid_controller",
    "steps_to_saves",
    "counts_own_evals",
    "has_stability_cap",
    "runtime_solver",
    "runtime_tolerances",
    "solver_report",
    "SolverRecord",
    "EVALS_PER_STEP",
    "IMPLICIT_SOLVERS",
    "RECORD_BY_NAME",
    "RECORDS",
    "SOLVER_METHODS",
    "SOLVERS",
    "STEP_TO_SAVES",
    "ESERK4",
    "RKC2",
    "ROCK4",
]
