"""*Plateau in Monotonic Linear Interpolation — A "Biased" View of Loss Landscape
for Deep Networks*,
as a plug-in: its data, observables and experiment (claims, figures, `run`)."""

from .data import (
    DIGITS_SPLIT_SEED as DIGITS_SPLIT_SEED,
)
from .data import (
    DIGITS_TEST_FRACTION as DIGITS_TEST_FRACTION,
)
from .data import (
    as_jax_labels as as_jax_labels,
)
from .data import (
    balance_reason as balance_reason,
)
from .data import (  # noqa: F401
    class_counts as class_counts,
)
from .data import (
    class_sum_cross_entropy as class_sum_cross_entropy,
)
from .data import (
    digits_data as digits_data,
)
from .data import (
    is_balanced as is_balanced,
)
from .data import (
    mean_cross_entropy as mean_cross_entropy,
)
from .data import (
    orthogonal_data as orthogonal_data,
)
from .data import (
    scale_to_unit_ball as scale_to_unit_ball,
)
from .experiment import (
    ALPHA1_C as ALPHA1_C,
)
from .experiment import (
    EXPERIMENT as EXPERIMENT,
)
from .experiment import (
    FILES as FILES,
)
from .experiment import (  # noqa: F401
    NAME as NAME,
)
from .experiment import (
    SOURCE as SOURCE,
)
from .experiment import (
    BiasPlateauExperiment as BiasPlateauExperiment,
)
from .experiment import (
    Config as Config,
)
from .experiment import (
    DeepRun as DeepRun,
)
from .experiment import (
    HomogeneousRun as HomogeneousRun,
)
from .experiment import (
    check_error_interval as check_error_interval,
)
from .experiment import (
    check_homogeneous_sweep as check_homogeneous_sweep,
)
from .experiment import (
    check_learning_order as check_learning_order,
)
from .experiment import (
    check_loss_bound as check_loss_bound,
)
from .experiment import (
    check_measured_plateau as check_measured_plateau,
)
from .experiment import (
    check_top_bias as check_top_bias,
)
from .experiment import (
    check_trend as check_trend,
)
from .experiment import (
    checked_interval as checked_interval,
)
from .experiment import (
    crossing_times as crossing_times,
)
from .experiment import (
    deep_runs as deep_runs,
)
from .experiment import (
    default_config as default_config,
)
from .experiment import (
    homogeneous_checks as homogeneous_checks,
)
from .experiment import (
    homogeneous_sweep as homogeneous_sweep,
)
from .experiment import (
    init_spread as init_spread,
)
from .experiment import (
    learned_gaps as learned_gaps,
)
from .experiment import (
    learned_times as learned_times,
)
from .experiment import (
    plot_bias_order as plot_bias_order,
)
from .experiment import (
    plot_four_class as plot_four_class,
)
from .experiment import (
    plot_interpolation as plot_interpolation,
)
from .experiment import (
    plot_trends as plot_trends,
)
from .experiment import (
    reduced_trajectory as reduced_trajectory,
)
from .experiment import (
    run as run,
)
from .experiment import (
    run_homogeneous as run_homogeneous,
)
from .experiment import (
    synthetic_deep_data as synthetic_deep_data,
)
from .experiment import (
    theorem1_checks as theorem1_checks,
)
from .experiment import (
    theorem1_of as theorem1_of,
)
from .experiment import (
    train_deep as train_deep,
)
from .experiment import (
    trend_checks as trend_checks,
)
from .experiment import (
    trend_sweep as trend_sweep,
)
from .interpolation import (
    InterpolationCurve as InterpolationCurve,
)
from .interpolation import (
    Plateau as Plateau,
)
from .interpolation import (  # noqa: F401
    alpha_grid as alpha_grid,
)
from .interpolation import (
    interpolate as interpolate,
)
from .interpolation import (
    plateau as plateau,
)
from .observables import (
    classification_observables as classification_observables,
)
from .observables import (
    homogeneous_observables as homogeneous_observables,
)
from .observables import (  # noqa: F401
    top_gap as top_gap,
)
from .sweep import (
    AXES as AXES,
)
from .sweep import (
    CURVES as CURVES,
)
from .sweep import (  # noqa: F401
    MAX_DEPTH as MAX_DEPTH,
)
from .sweep import (
    SCALARS as SCALARS,
)
from .sweep import (
    PlateauSweep as PlateauSweep,
)
from .sweep import (
    PlateauSweepConfig as PlateauSweepConfig,
)
from .sweep import (
    parse_deltas as parse_deltas,
)
from .sweep import (
    parse_depths as parse_depths,
)
from .sweep import (
    parse_prng_seeds as parse_prng_seeds,
)
from .sweep import (
    plateau_sweep as plateau_sweep,
)
from .sweep import (
    plot_plateau_sweep as plot_plateau_sweep,
)
from .sweep import (
    run_point as run_point,
)
