"""flows — exact gradient flows of small neural networks, compared with reduced models
and theorem bounds.

Importing `flows` switches JAX to float64 (`jax_enable_x64`): gradient flows are
integrated in double precision by default.
"""

from importlib.metadata import PackageNotFoundError as _NotFound
from importlib.metadata import version as _version

import jax as _jax

try:
    __version__ = _version("flows-theory")
except _NotFound:  # pragma: no cover - running from a source tree that was never installed
    __version__ = "0+unknown"

_jax.config.update("jax_enable_x64", True)

from . import claims as claims  # noqa: E402
from . import models as models  # noqa: E402
from ._compile import disable_compilation_cache as disable_compilation_cache  # noqa: E402
from ._compile import enable_compilation_cache as enable_compilation_cache  # noqa: E402
from ._errors import ConfigError as ConfigError  # noqa: E402
from ._errors import SolverError as SolverError  # noqa: E402
from ._errors import WriteError as WriteError  # noqa: E402
from ._io import write_atomic as write_atomic  # noqa: E402
from ._io import write_netcdf as write_netcdf  # noqa: E402
from ._nonsmooth import KINK_OBSERVABLES as KINK_OBSERVABLES  # noqa: E402
from ._nonsmooth import simulate_nonsmooth as simulate_nonsmooth  # noqa: E402
from ._solve.arguments import ControllerSpec as ControllerSpec  # noqa: E402
from ._solve.arguments import SaveSpec as SaveSpec  # noqa: E402
from ._solve.arguments import stop_at_loss as stop_at_loss  # noqa: E402
from ._solve.arguments import stop_when_converged as stop_when_converged  # noqa: E402
from ._solve.baselines import gradient_descent as gradient_descent  # noqa: E402
from ._solve.baselines import sgd_to_epsilon as sgd_to_epsilon  # noqa: E402
from ._solve.batch import simulate_batch as simulate_batch  # noqa: E402
from ._solve.clocks import CLOCKS as CLOCKS  # noqa: E402
from ._solve.clocks import AbstractClock as AbstractClock  # noqa: E402
from ._solve.clocks import LogClock as LogClock  # noqa: E402
from ._solve.clocks import LossClock as LossClock  # noqa: E402
from ._solve.clocks import PhysicalClock as PhysicalClock  # noqa: E402
from ._solve.clocks import log_save_times as log_save_times  # noqa: E402
from ._solve.data import TARGETS as TARGETS  # noqa: E402
from ._solve.data import DataMoments as DataMoments  # noqa: E402
from ._solve.data import Dataset as Dataset  # noqa: E402
from ._solve.data import assumption_data as assumption_data  # noqa: E402
from ._solve.data import from_arrays as from_arrays  # noqa: E402
from ._solve.data import moments as moments  # noqa: E402
from ._solve.data import paper_data as paper_data  # noqa: E402
from ._solve.global_error import GLOBAL_ERROR_FACTOR as GLOBAL_ERROR_FACTOR  # noqa: E402
from ._solve.losses import cross_entropy as cross_entropy  # noqa: E402
from ._solve.losses import logistic as logistic  # noqa: E402
from ._solve.losses import squared_error as squared_error  # noqa: E402
from ._solve.problem import Problem as Problem  # noqa: E402
from ._solve.problem import make_problem as make_problem  # noqa: E402
from ._solve.settings import measure_stiffness as measure_stiffness  # noqa: E402
from ._solve.significance import loss_floors as loss_floors  # noqa: E402
from ._solve.significance import (  # noqa: E402
    observable_resolutions as observable_resolutions,
)
from ._solve.simulate import simulate as simulate  # noqa: E402
from ._solve.stages import average_decay_rate as average_decay_rate  # noqa: E402
from ._solve.stages import detect_stages_from_loss as detect_stages_from_loss  # noqa: E402
from ._solve.stages import first_crossing as first_crossing  # noqa: E402
from ._solve.stats import Result as Result  # noqa: E402
from ._solve.stats import SolveStats as SolveStats  # noqa: E402
from ._solve.trajectory import GlobalError as GlobalError  # noqa: E402
from ._solve.trajectory import Trajectory as Trajectory  # noqa: E402
from ._solve.trajectory import machine as machine  # noqa: E402
from ._solve.trajectory import versions as versions  # noqa: E402
from ._solvers import ESERK4 as ESERK4  # noqa: E402
from ._solvers import EVALS_PER_STEP as EVALS_PER_STEP  # noqa: E402
from ._solvers import FIRST_STEP_STABILITY as FIRST_STEP_STABILITY  # noqa: E402
from ._solvers import FLOAT32_MIN_RTOL as FLOAT32_MIN_RTOL  # noqa: E402
from ._solvers import IMPLICIT_SOLVERS as IMPLICIT_SOLVERS  # noqa: E402
from ._solvers import MAX_IMPLICIT_PARAMS as MAX_IMPLICIT_PARAMS  # noqa: E402
from ._solvers import RKC2 as RKC2  # noqa: E402
from ._solvers import ROCK4 as ROCK4  # noqa: E402
from ._solvers import SOLVERS as SOLVERS  # noqa: E402
from ._solvers import STEP_TO_SAVES as STEP_TO_SAVES  # noqa: E402
from ._solvers import AbstractStabilizedSolver as AbstractStabilizedSolver  # noqa: E402
from ._solvers import auto_solver as auto_solver  # noqa: E402
from ._solvers import initial_step as initial_step  # noqa: E402
from ._solvers import make_solver as make_solver  # noqa: E402
from ._solvers import outlier_spectrum as outlier_spectrum  # noqa: E402
from ._solvers import pid_controller as pid_controller  # noqa: E402
from ._solvers import spectral_radius as spectral_radius  # noqa: E402
from ._solvers import steps_to_saves as steps_to_saves  # noqa: E402
from ._solvers._etd import ETDRK4 as ETDRK4  # noqa: E402
from ._solvers._etd import etd_eval_counts as etd_eval_counts  # noqa: E402
from ._solvers._krylov import EXPRB32 as EXPRB32  # noqa: E402
from ._solvers._krylov import EXPRB43 as EXPRB43  # noqa: E402
from ._solvers._krylov import krylov_eval_counts as krylov_eval_counts  # noqa: E402
from ._solvers._stabilized import rkc_eval_counts as rkc_eval_counts  # noqa: E402
from ._sweep.engine import AbstractSweepSpec as AbstractSweepSpec  # noqa: E402
from ._sweep.engine import SweepResult as SweepResult  # noqa: E402
from ._sweep.engine import sweep as sweep  # noqa: E402
from ._sweep.points import load_sweep as load_sweep  # noqa: E402
from .claims._checks import Check as Check  # noqa: E402
from .claims._checks import format_table as format_table  # noqa: E402
from .models._kinks import PiecewiseLinear as PiecewiseLinear  # noqa: E402

__all__ = [
    "claims",
    "models",
    "disable_compilation_cache",
    "enable_compilation_cache",
    "ConfigError",
    "SolverError",
    "WriteError",
    "write_atomic",
    "write_netcdf",
    "KINK_OBSERVABLES",
    "simulate_nonsmooth",
    "ControllerSpec",
    "SaveSpec",
    "stop_at_loss",
    "stop_when_converged",
    "gradient_descent",
    "sgd_to_epsilon",
    "simulate_batch",
    "CLOCKS",
    "AbstractClock",
    "LogClock",
    "LossClock",
    "PhysicalClock",
    "log_save_times",
    "TARGETS",
    "DataMoments",
    "Dataset",
    "assumption_data",
    "from_arrays",
    "moments",
    "paper_data",
    "GLOBAL_ERROR_FACTOR",
    "cross_entropy",
    "logistic",
    "squared_error",
    "Problem",
    "make_problem",
    "loss_floors",
    "observable_resolutions",
    "simulate",
    "average_decay_rate",
    "detect_stages_from_loss",
    "first_crossing",
    "Result",
    "SolveStats",
    "GlobalError",
    "Trajectory",
    "versions",
    "machine",
    "ESERK4",
    "EVALS_PER_STEP",
    "FIRST_STEP_STABILITY",
    "FLOAT32_MIN_RTOL",
    "IMPLICIT_SOLVERS",
    "MAX_IMPLICIT_PARAMS",
    "RKC2",
    "EXPRB43",
    "ETDRK4",
    "etd_eval_counts",
    "EXPRB32",
    "krylov_eval_counts",
    "ROCK4",
    "SOLVERS",
    "STEP_TO_SAVES",
    "AbstractStabilizedSolver",
    "auto_solver",
    "initial_step",
    "make_solver",
    "pid_controller",
    "outlier_spectrum",
    "measure_stiffness",
    "spectral_radius",
    "steps_to_saves",
    "rkc_eval_counts",
    "AbstractSweepSpec",
    "SweepResult",
    "sweep",
    "load_sweep",
    "Check",
    "format_table",
    "PiecewiseLinear",
]
