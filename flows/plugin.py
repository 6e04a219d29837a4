"""What a paper plug-in is written in, beyond the engine (`flows`) and the claim kit
(`flows.claims`).

The four papers under `flows/experiments/` import only from `flows`, `flows.claims`,
`flows.models`, this module and their own package (`tests/test_layering.py` enforces it),
so a paper outside the repository has everything they have:

- **validation** of a config's values, each `ConfigError` naming the field and what to try:
  `as_float`, `as_int`, `as_bool`, `as_choice`, `as_seed`, `as_tolerance`,
  `as_real_array`; labels: `check_labels`, `check_sign_labels`;
- **command-line flags** as data (`Flag`) with argparse types built on those validators
  (`typed`, `real`, `positive`, `count`, `seed`, `tolerance`, `tolerance_flags`) and the
  refusal of a flag that does not apply to the chosen method (`refuse_inapplicable`);
- **sweep grids**: `Axis`, `grid_items`, `grid_points`, `grid_type`, `combine_records`,
  `no_duplicates`, `parse_seeds`, `parse_prng_seeds`, `to_float`, `to_int`, `error_text`
  (the sweep itself is `flows.sweep` / `flows.AbstractSweepSpec`);
- **solver names and error norms** a config may name: `SOLVER_METHODS`,
  `resolve_solver_name`, `ERROR_NORMS`, `check_error_norm`;
- **memory**: `check_memory`, `two_layer_bytes` (refuse a run that cannot fit, up front);
- **the η rule** of the GD/SGD baselines: `ETA_FACTOR`, `eta_checked`, `merge_eta`;
- **compilation**: `callback_free` (trace a program whose arguments the plug-in has
  validated without equinox's host callbacks, so the persistent cache keeps it);
- **output folders and reports**: `OutputDir` (writes only what it can prove it wrote),
  `add_owned_file`, `check_output_path`, `hdf5_hazard`, `MANIFEST`, `REPORT_NAME`,
  `INDEX_NAME`, `experiment_report`, `Curve`.
"""

from ._cli.flags import Flag as Flag
from ._cli.flags import count as count
from ._cli.flags import positive as positive
from ._cli.flags import real as real
from ._cli.flags import refuse_inapplicable as refuse_inapplicable
from ._cli.flags import seed as seed
from ._cli.flags import tolerance as tolerance
from ._cli.flags import tolerance_flags as tolerance_flags
from ._cli.flags import typed as typed
from ._compile import callback_free as callback_free
from ._io import INDEX_NAME as INDEX_NAME
from ._io import MANIFEST as MANIFEST
from ._io import REPORT_NAME as REPORT_NAME
from ._io import OutputDir as OutputDir
from ._io import add_owned_file as add_owned_file
from ._io import check_output_path as check_output_path
from ._io import hdf5_hazard as hdf5_hazard
from ._report.html import Curve as Curve
from ._report.html import experiment_report as experiment_report
from ._solve.losses import check_labels as check_labels
from ._solve.losses import check_sign_labels as check_sign_labels
from ._solve.resources import check_memory as check_memory
from ._solve.resources import two_layer_bytes as two_layer_bytes
from ._solvers import ERROR_NORMS as ERROR_NORMS
from ._solvers import SOLVER_METHODS as SOLVER_METHODS
from ._solvers import check_error_norm as check_error_norm
from ._solvers import resolve_solver_name as resolve_solver_name
from ._sweep.engine import fmt_number as fmt_number
from ._sweep.engine import grouped as grouped
from ._sweep.engine import mean_sd as mean_sd
from ._sweep.grid import Axis as Axis
from ._sweep.grid import grid_items as grid_items
from ._sweep.grid import grid_points as grid_points
from ._sweep.grid import grid_type as grid_type
from ._sweep.grid import no_duplicates as no_duplicates
from ._sweep.grid import parse_prng_seeds as parse_prng_seeds
from ._sweep.grid import parse_seeds as parse_seeds
from ._sweep.grid import to_float as to_float
from ._sweep.grid import to_int as to_int
from ._sweep.points import combine_records as combine_records
from ._sweep.points import error_text as error_text
from ._validate import as_bool as as_bool
from ._validate import as_choice as as_choice
from ._validate import as_float as as_float
from ._validate import as_int as as_int
from ._validate import as_real_array as as_real_array
from ._validate import as_seed as as_seed
from ._validate import as_tolerance as as_tolerance
from .claims._eta import ETA_FACTOR as ETA_FACTOR
from .claims._eta import eta_checked as eta_checked
from .claims._eta import merge_eta as merge_eta

__all__ = [
    "callback_free",
    "ETA_FACTOR",
    "eta_checked",
    "merge_eta",
    "Flag",
    "count",
    "positive",
    "real",
    "refuse_inapplicable",
    "seed",
    "tolerance",
    "tolerance_flags",
    "typed",
    "INDEX_NAME",
    "MANIFEST",
    "REPORT_NAME",
    "OutputDir",
    "add_owned_file",
    "check_output_path",
    "hdf5_hazard",
    "check_labels",
    "check_sign_labels",
    "Curve",
    "experiment_report",
    "check_memory",
    "two_layer_bytes",
    "ERROR_NORMS",
    "SOLVER_METHODS",
    "check_error_norm",
    "resolve_solver_name",
    "Axis",
    "combine_records",
    "error_text",
    "fmt_number",
    "grid_items",
    "grid_points",
    "grid_type",
    "grouped",
    "mean_sd",
    "no_duplicates",
    "parse_prng_seeds",
    "parse_seeds",
    "to_float",
    "to_int",
    "as_bool",
    "as_choice",
    "as_float",
    "as_int",
    "as_real_array",
    "as_seed",
    "as_tolerance",
]
