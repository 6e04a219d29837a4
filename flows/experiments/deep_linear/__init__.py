"""*Exact solutions to the nonlinear dynamics of learning in deep linear neural networks*
(Saxe, McClelland & Ganguli, ICLR 2014) as a plug-in: its model, data, observables, one
check per claim, figures and experiment (`flows check|simulate deep-linear`)."""

from .checks import SOURCE as SOURCE
from .checks import check_balancedness as check_balancedness
from .checks import check_certificate as check_certificate
from .checks import check_closed_form as check_closed_form
from .checks import check_half_times as check_half_times
from .checks import check_mode_order as check_mode_order
from .checks import check_random_init as check_random_init
from .checks import half_time_tolerance as half_time_tolerance
from .config import Config as Config
from .config import default_config as default_config
from .config import geometric_spectrum as geometric_spectrum
from .data import teacher_data as teacher_data
from .experiment import EXPERIMENT as EXPERIMENT
from .experiment import FILES as FILES
from .experiment import NAME as NAME
from .experiment import DeepLinearExperiment as DeepLinearExperiment
from .experiment import check_runs as check_runs
from .experiment import make_data as make_data
from .experiment import run as run
from .experiment import run_flow as run_flow
from .figures import plot_loss as plot_loss
from .figures import plot_modes as plot_modes
from .model import TwoLayerLinear as TwoLayerLinear
from .observables import Theory as Theory
from .observables import crossing_times as crossing_times
from .observables import deep_linear_observables as deep_linear_observables
from .observables import effective_strength as effective_strength
from .observables import mode_strengths as mode_strengths
