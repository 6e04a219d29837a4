"""*Towards Understanding Learning in Neural Networks with Linear Teachers*,
as a plug-in: its data, observables and experiment (claims, figures, `run`)."""

from .data import (  # noqa: F401
    Separability as Separability,
)
from .data import (
    SeparableData as SeparableData,
)
from .data import (
    antipodal_with_outlier as antipodal_with_outlier,
)
from .data import (
    binary_dataset as binary_dataset,
)
from .data import (
    check_separable as check_separable,
)
from .data import (
    digits_pair as digits_pair,
)
from .data import (
    symmetric_gaussians as symmetric_gaussians,
)
from .data import (
    teacher_ball as teacher_ball,
)
from .experiment import (
    EXPERIMENT as EXPERIMENT,
)
from .experiment import (
    FILES as FILES,
)
from .experiment import (
    MAX_INIT as MAX_INIT,
)
from .experiment import (  # noqa: F401
    NAME as NAME,
)
from .experiment import (
    RELU_EXAMPLE as RELU_EXAMPLE,
)
from .experiment import (
    SOURCE as SOURCE,
)
from .experiment import (
    Config as Config,
)
from .experiment import (
    LinearTeacherExperiment as LinearTeacherExperiment,
)
from .experiment import (
    certificate_checks as certificate_checks,
)
from .experiment import (
    check_clustering as check_clustering,
)
from .experiment import (
    check_digits as check_digits,
)
from .experiment import (
    check_outlier as check_outlier,
)
from .experiment import (
    check_par_prediction as check_par_prediction,
)
from .experiment import (
    check_par_share as check_par_share,
)
from .experiment import (
    check_sgd as check_sgd,
)
from .experiment import (
    check_smoothed_margin as check_smoothed_margin,
)
from .experiment import (
    check_theorem51 as check_theorem51,
)
from .experiment import (
    check_theorem51_runs as check_theorem51_runs,
)
from .experiment import (
    default_config as default_config,
)
from .experiment import (
    network_np as network_np,
)
from .experiment import (
    par_prediction as par_prediction,
)
from .experiment import (
    plot_boundaries as plot_boundaries,
)
from .experiment import (
    plot_clustering as plot_clustering,
)
from .experiment import (
    plot_outlier as plot_outlier,
)
from .experiment import (
    plot_par as plot_par,
)
from .experiment import (
    plot_sgd as plot_sgd,
)
from .experiment import (
    property_test as property_test,
)
from .experiment import (
    run as run,
)
from .experiment import (
    run_digits as run_digits,
)
from .experiment import (
    run_flow as run_flow,
)
from .experiment import (
    run_outlier as run_outlier,
)
from .experiment import (
    run_sgd as run_sgd,
)
from .experiment import (
    theorem51_violations as theorem51_violations,
)
from .observables import (  # noqa: F401
    LOG2 as LOG2,
)
from .observables import (
    clustering as clustering,
)
from .observables import (
    evaluate as evaluate,
)
from .observables import (
    linear_region_outside as linear_region_outside,
)
from .observables import (
    teacher_observables as teacher_observables,
)
from .sweep import (
    AXES as AXES,
)
from .sweep import (
    CURVES as CURVES,
)
from .sweep import (
    FINALS as FINALS,
)
from .sweep import (
    SCALARS as SCALARS,
)
from .sweep import (
    STATS as STATS,
)
from .sweep import (
    TeacherSweep as TeacherSweep,
)
from .sweep import (
    TeacherSweepConfig as TeacherSweepConfig,
)
from .sweep import (  # noqa: F401
    parse_inits as parse_inits,
)
from .sweep import (
    parse_prng_seeds as parse_prng_seeds,
)
from .sweep import (
    parse_slopes as parse_slopes,
)
from .sweep import (
    plot_teacher_sweep as plot_teacher_sweep,
)
from .sweep import (
    run_point as run_point,
)
from .sweep import (
    teacher_sweep as teacher_sweep,
)
