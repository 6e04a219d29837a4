"""What every experiment returns, and how its outputs are written."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import tempfile
from pathlib import Path

from .._checks import Check
from .._trajectory import versions


@dataclasses.dataclass
class Report:
    """Result of `flows check <experiment>`: the checks, the files written and a summary."""

    name: str
    checks: list[Check]
    files: list[Path]
    results: dict


class OutputDir:
    """Collects an experiment's outputs in a hidden temporary folder next to `final`, and
    moves it into place only when everything has been written (`commit`). A crash leaves
    no half-written results folder behind as if complete."""

    def __init__(self, final: Path):
        self.final = Path(final)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = Path(tempfile.mkdtemp(prefix=f".{self.final.name}.", dir=self.final.parent))

    def path(self, name: str) -> Path:
        return self.tmp / name

    def commit(self) -> list[Path]:
        names = sorted(p.name for p in self.tmp.iterdir())
        if self.final.exists():
            old = self.final.with_name(f".{self.final.name}.old")
            if old.exists():
                shutil.rmtree(old)
            os.replace(self.final, old)
            os.replace(self.tmp, self.final)
            shutil.rmtree(old)
        else:
            os.replace(self.tmp, self.final)
        return [self.final / n for n in names]

    def abort(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def write_results_json(path: Path, name: str, config: dict, checks, extra: dict) -> None:
    payload = {
        "experiment": name,
        "config": config,
        "versions": versions(),
        "checks": [c.to_dict() for c in checks],
        **extra,
    }
    path.write_text(json.dumps(payload, indent=2, default=_default))


def _default(o):
    try:
        import numpy as np

        if isinstance(o, np.ndarray):
            return o.tolist()
        if isinstance(o, np.generic):
            return o.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(o, Path):
        return str(o)
    return str(o)


def new_figure(nrows: int = 1, ncols: int = 1, **kwargs):
    """A figure and its axes, without pyplot: no global backend switch, no figure manager,
    so library plotting neither leaks figures nor breaks a notebook's inline backend."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=kwargs.pop("figsize", None))
    return fig, fig.subplots(nrows, ncols, **kwargs)


def mpl_rcparams():
    """matplotlib's rcParams (imported lazily, like the rest of the plotting)."""
    import matplotlib

    return matplotlib.rcParams
