"""Theorem 2 (3) decided by extending the experiment: while a row 'slope of T_d vs ln m =
(2α−1)/2' is undecided (finite size), the largest width of the sweep at its α is doubled
and run (every seed, each with its companion solve) as long as the predicted cost of the
next width fits in what is left of `cfg.extend_budget_s` (`flows.claims.extend`), shared
by every α: α = `cfg.extend_alpha` first, then the others in the sweep's order.

The budget is counted in CPU seconds of this process (`time.process_time`, every thread),
which a loaded machine moves far less than wall time, but not at all only ideally: α = 1's
two doublings took 78 CPU s on a quiet fresh clone and 90 CPU s beside a test run
(2026-12-06), and the α after it then got one doubling fewer (a row near the budget's
edge may stop one width earlier; each row says how far it went). On two quiet cores the
wall time is about 0.5–1× the CPU time."""

from __future__ import annotations

import dataclasses
import time

from flows.claims import Extension, extend

from .config import Config
from .runs import descent_time_sweep
from .sweep_checks import check_slope_lnm
from .trends import row_metrics

__all__ = ["extend_descent_time"]


def extend_descent_time(
    cfg: Config, rows: list[dict], twin_rows: list[dict], *, progress: bool = False
) -> dict[float, Extension]:
    """Extend the sweep at every α whose row is undecided (finite size), α =
    `cfg.extend_alpha` first, then the others in the sweep's order, all from one budget
    (`cfg.extend_budget_s` CPU s): rows appended to `rows`, companion rows to `twin_rows`,
    each marked `extension`. An α the budget no longer reaches gets a record that says so
    (not extended, what the next width would cost). {} when there is no budget
    (`--quick`) or fewer than three widths (the slope row is then not applicable, not a
    limit to extend). The cost of the next width is the last width's CPU time × 2 (a run
    costs ∝ m)."""
    if cfg.extend_budget_s <= 0 or len(set(cfg.sweep_m)) < 3:
        return {}
    order = sorted(cfg.sweep_alpha, key=lambda a: (a != cfg.extend_alpha, cfg.sweep_alpha.index(a)))
    out: dict[float, Extension] = {}
    spent = 0.0
    for alpha in order:
        left = cfg.extend_budget_s - spent
        out[alpha] = _extend_one(cfg, alpha, rows, twin_rows, left, progress)
        spent += out[alpha].spent_s
    return out


def _extend_one(
    cfg: Config, alpha: float, rows: list[dict], twin_rows: list[dict], left: float, progress: bool
) -> Extension:
    claim = f"slope of T_d vs ln m = (2α−1)/2 at α = {alpha}"

    def judge(vals) -> object:
        return check_slope_lnm(rows, cfg, alpha, tuple(int(v) for v in vals))[0]

    def run(m: float) -> None:
        one = dataclasses.replace(cfg, sweep_m=(int(m),), sweep_alpha=(alpha,))
        if progress:
            print(f"  [multistage] extension: α = {alpha}, m = {int(m)}", flush=True)
        new_twins: list[dict] = []
        new = descent_time_sweep(one, metrics=row_metrics, companion=new_twins, progress=progress)
        rows.extend(r | {"extension": True} for r in new)
        twin_rows.extend(r | {"extension": True} for r in new_twins)

    top = max(cfg.sweep_m)
    last = sum(r.get("cpu_s", 0.0) for r in rows if r["alpha"] == alpha and r["m"] == top)
    # what is left of the shared budget (a tiny positive number once it is spent: `extend`
    # then runs nothing and says what the next width would take)
    _, ext = extend(
        claim,
        judge,  # type: ignore[arg-type]
        run,
        cfg.sweep_m,
        budget_s=max(left, 1e-9),
        last_seconds=last if last > 0 else None,
        clock=time.process_time,
        unit="CPU s",
    )
    shared = (
        f"; one budget of {cfg.extend_budget_s:g} CPU s for every α, α = {cfg.extend_alpha} "
        "first (`flows check --budget CPU_S`)"
    )
    return dataclasses.replace(ext, budget_s=cfg.extend_budget_s, stopped=ext.stopped + shared)
