"""*Analyzing Multi-Stage Loss Curves: Plateau and Descent Mechanisms in Neural
Networks*,
as a plug-in: its data, observables and experiment (claims, figures, `run`)."""

from .experiment import (
    DESCENT_CLAIMS as DESCENT_CLAIMS,
)
from .experiment import (
    EXPERIMENT as EXPERIMENT,
)
from .experiment import (
    FILES as FILES,
)
from .experiment import (
    GTRSIM_C as GTRSIM_C,
)
from .experiment import (
    LESSSIM_C as LESSSIM_C,
)
from .experiment import (  # noqa: F401
    NAME as NAME,
)
from .experiment import (
    SECONDARY_CLAIMS as SECONDARY_CLAIMS,
)
from .experiment import (
    SOURCE as SOURCE,
)
from .experiment import (
    THEOREM_CLAIMS as THEOREM_CLAIMS,
)
from .experiment import (
    Config as Config,
)
from .experiment import (
    MultistageExperiment as MultistageExperiment,
)
from .experiment import (
    Units as Units,
)
from .experiment import (
    cfg_d as cfg_d,
)
from .experiment import (
    check_run as check_run,
)
from .experiment import (
    check_sweep as check_sweep,
)
from .experiment import (
    default_config as default_config,
)
from .experiment import (
    descent_time_sweep as descent_time_sweep,
)
from .experiment import (
    make_data as make_data,
)
from .experiment import (
    plot_descent_time as plot_descent_time,
)
from .experiment import (
    plot_K as plot_K,
)
from .experiment import (
    plot_stages as plot_stages,
)
from .experiment import (
    run as run,
)
from .experiment import (
    run_main as run_main,
)
from .experiment import (
    save_times as save_times,
)
from .experiment import (
    stage_times as stage_times,
)
from .observables import (
    multistage_observables as multistage_observables,
)
from .observables import (  # noqa: F401
    relative_w2 as relative_w2,
)
from .sweep import (
    ATOL_INIT_FRACTION as ATOL_INIT_FRACTION,
)
from .sweep import (
    AXES as AXES,
)
from .sweep import (
    CURVES as CURVES,
)
from .sweep import (
    MIN_INIT_STD as MIN_INIT_STD,
)
from .sweep import (  # noqa: F401
    SCALARS as SCALARS,
)
from .sweep import (
    DescentSweepResult as DescentSweepResult,
)
from .sweep import (
    MultistageSweep as MultistageSweep,
)
from .sweep import (
    SweepConfig as SweepConfig,
)
from .sweep import (
    batch_key as batch_key,
)
from .sweep import (
    combined_dataset as combined_dataset,
)
from .sweep import (
    descent_observables as descent_observables,
)
from .sweep import (
    descent_sweep as descent_sweep,
)
from .sweep import (
    horizon as horizon,
)
from .sweep import (
    parse_alphas as parse_alphas,
)
from .sweep import (
    parse_grid as parse_grid,
)
from .sweep import (
    parse_widths as parse_widths,
)
from .sweep import (
    plot_descent_sweep as plot_descent_sweep,
)
from .sweep import (
    point_id as point_id,
)
from .sweep import (
    run_points as run_points,
)
from .sweep import (
    upgrade_config as upgrade_config,
)
