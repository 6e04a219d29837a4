"""Deprecated: the plug-in interface moved to `flows.plugin` (`AbstractExperiment`,
`Report`, `Simulated`, `write_results_json`, `OutputDir`, `REPORT_NAME`) and the figure
style to `flows.figures`. The old names resolve here for one release, each with a
`DeprecationWarning` naming its new place; this module then goes.
"""

from __future__ import annotations

import importlib
import warnings

__all__: list[str] = []

#: old name → its new module, where it has the same name except as `_RENAMED` says
_MOVED: dict[str, str] = {
    **dict.fromkeys(
        "AbstractExperiment Report Simulated write_results_json OutputDir REPORT_NAME "
        "write_report".split(),
        "flows.plugin",
    ),
    **dict.fromkeys(
        "COLORS COLUMN_WIDTH CYCLE STYLE TEXT_WIDTH VECTOR_SUFFIX figure_size figure_style "
        "new_figure save_figure".split(),
        "flows.figures",
    ),
    **dict.fromkeys("INDEX_NAME MANIFEST check_output_path".split(), "flows._io"),
    "_default": "flows.plugin",
}
_RENAMED = {"_default": "_json_default"}  # the JSON encoder of results.json


def __getattr__(name: str):
    if name not in _MOVED:
        raise AttributeError(f"module 'flows.experiments.base' has no attribute {name!r}")
    module, attr = _MOVED[name], _RENAMED.get(name, name)
    warnings.warn(
        f"flows.experiments.base.{name} is deprecated and will be removed in the next "
        f"release: it is {module}.{attr}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module), attr)
