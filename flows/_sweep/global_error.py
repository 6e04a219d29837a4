"""Error bars on a sweep's numbers (`flows.sweep(…, global_error=True)`, `flows sweep …
--global-error`): every batch of points is computed twice, as asked and with every adaptive
solve inside it at tolerances `GLOBAL_ERROR_FACTOR` times tighter
(`flows._solve.companion.tolerances_scaled`), and each number a point records gets a
variable `<name>_error`: the two computations' difference times
`error_calibration()` (2.78), as `simulate(…, global_error=True)` estimates a single
run's error. A point computed without any adaptive solve (gradient descent: its error is
its step size's), or whose companion failed, has NaN error bars and a note saying why.

The solve statistics, counts and durations a point records get none (they are not results
of the flow). The folder's settings record the factor, so a folder swept without error
bars is not resumed with them (nor the other way round)."""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from .._solve.companion import tolerances_scaled
from .._solve.global_error import GLOBAL_ERROR_FACTOR, error_calibration
from .points import _DURATION_NAMES as DURATION_NAMES
from .points import SOLVE_STATS, combine_records
from .spec import AbstractSweepSpec

__all__ = ["ERROR_SUFFIX", "WithGlobalError", "estimated"]

#: The suffix of a variable's error bar: `T_d` → `T_d_error`.
ERROR_SUFFIX = "_error"


def estimated(name: str, kind: str | None) -> bool:
    """Whether the point variable `name` (of value kind `kind`) gets an error bar: every
    number but the solve statistics, counts and durations, and error bars themselves."""
    if name in SOLVE_STATS or name.endswith(ERROR_SUFFIX) or kind == "count":
        return False
    return name not in DURATION_NAMES


class WithGlobalError(AbstractSweepSpec):
    """`spec`'s sweep with an error bar on each of its numbers (module docstring); every
    other part of the sweep (axes, batches, labels, figure, summary) is `spec`'s."""

    def __init__(self, spec: AbstractSweepSpec, factor: float = GLOBAL_ERROR_FACTOR):
        self.spec, self.factor = spec, float(factor)
        self.calibration = error_calibration(self.factor)
        # the spec's own description of the sweep (class-level there), as this instance's
        vars(self).update(
            experiment=spec.experiment,
            axes=spec.axes,
            figure_name=spec.figure_name,
            brief_fields=spec.brief_fields,
            batch_size=spec.batch_size,
        )
        inner = spec.variables()
        self.errors = {k: k + ERROR_SUFFIX for k in inner if estimated(k, spec.value_kind(k))}

    # what the error bars add
    def settings(self) -> dict:
        return {**self.spec.settings(), "global_error_factor": self.factor}

    def upgrade_settings(self, saved: dict) -> dict:
        return self.spec.upgrade_settings(saved)

    def variables(self) -> dict[str, tuple[str, ...]]:
        inner = self.spec.variables()
        return {**inner, **{e: inner[k] for k, e in self.errors.items()}}

    def value_kind(self, name: str) -> str | None:
        if name in self.errors.values():
            return "error"
        return self.spec.value_kind(name)

    def blank_record(self, point: tuple) -> dict:
        rec = self.spec.blank_record(point)
        for k, e in self.errors.items():
            rec[e] = np.full(np.shape(rec[k]), np.nan) if np.ndim(rec[k]) else math.nan
        return rec

    def run_batch(self, points: list[tuple], pad_to: int = 0) -> list[dict]:
        records = self.spec.run_batch(points, pad_to)
        with tolerances_scaled(1.0 / self.factor) as count:
            companions = self.spec.run_batch(points, pad_to)
        for rec, comp in zip(records, companions, strict=True):
            why = ""
            if count.n == 0:
                why = "no adaptive solve behind these numbers (no tolerance to tighten)"
            elif comp.get("status") != "ok":
                why = f"the companion at rtol/{self.factor:g} failed: {comp.get('error', '')}"
            for k, e in self.errors.items():
                if why or rec.get("status") != "ok":
                    rec[e] = np.full(np.shape(rec[k]), np.nan) if np.ndim(rec[k]) else math.nan
                    continue
                diff = np.abs(np.asarray(rec[k], float) - np.asarray(comp[k], float))
                err = self.calibration * diff
                rec[e] = err if np.ndim(err) else float(err)
            if why and rec.get("status") == "ok":
                note = rec.get("note", "")
                rec["note"] = (
                    f"{note}; error bars not estimated: {why}"
                    if note
                    else (f"error bars not estimated: {why}")
                )
        return records

    # everything else is the spec's
    def dims(self) -> dict[str, int]:
        return self.spec.dims()

    def check(self, points: list[tuple]) -> None:
        self.spec.check(points)

    def batch_key(self, point: tuple) -> Hashable:
        return self.spec.batch_key(point)

    def point_id(self, point: tuple) -> str:
        return self.spec.point_id(point)

    def point_label(self, rec: Mapping) -> str:
        return self.spec.point_label(rec)

    def describe(self) -> str:
        return (
            self.spec.describe() + f"; error bars from a companion at rtol/{self.factor:g}, "
            f"×{self.calibration:.3g}"
        )

    def point_text(self, rec: Mapping) -> str:
        return self.spec.point_text(rec)

    def combine(self, records: Iterable[dict]):
        """The spec's own combination (its descriptions and attributes) with the error
        bars added, each described, and the settings with the factor."""
        records = list(records)
        ds = self.spec.combine(records)
        full = combine_records(self, records)
        for k, e in self.errors.items():
            ds[e] = full[e]
            ds[e].attrs["description"] = (
                f"global-error estimate of {k}: |run − companion at rtol/{self.factor:g}| × "
                f"{self.calibration:.3g} (NaN: not estimated, see the point's note)"
            )
        ds.attrs["config"] = full.attrs["config"]
        return ds

    def plot(self, sweep_nc: Path, png: Path) -> Any:
        return self.spec.plot(sweep_nc, png)

    def summary_table(self, records: list[dict]) -> list[str]:
        return self.spec.summary_table(records)

    def summary_notes(self, records: list[dict], plotted: Any) -> list[str]:
        return self.spec.summary_notes(records, plotted)
