"""Theorem 2 (3) decided by extending the experiment: while a row 'slope of T_d vs ln m =
(2α−1)/2' is undecided (finite size), the largest width of the sweep at its α is doubled
and run (every seed, each with its companion solve) as long as the predicted cost of the
next width fits in what is left of `cfg.extend_budget_s` (`flows.claims.extend`), shared
by every α: α = `cfg.extend_alpha` first, then the others in the sweep's order.

The budget is counted in CPU seconds *estimated from the work done*, not timed: a width
costs `SECONDS_PER_EVALUATION` × m × n for every field evaluation of its runs (`vf_evals`
of each seed's solve; the companion solve's share and the metrics are in the rate). A timed
budget (CPU seconds of the process, until 2026-12-06) made the rows depend on the machine:
two `flows check` runs of one commit on one machine, `--jobs 1` and `--jobs 2`, extended
α = 0.75 to m = 8000 in one and not at all in the other (its slope's exponent −0.45 against
−0.29); a row near the budget's edge stopped one width earlier under load, and compilation,
paid by the first α to run a new width and not at all on a warm cache, moved it too.
Estimated, the extension — and the rows it decides — is the same on every machine, load
and `--jobs`. The rate is this machine's (a quiet 2-core x86-64, 2026-12-06: 40–49 ns for
α = 1 and 1.25 at m = 1000–8000, n = 100, tsit5 with its companion at rtol/10, compilation
excluded); the CPU time a run really took stays in each row (`cpu_s`)."""

from __future__ import annotations

import dataclasses

from flows.claims import Extension, extend

from .config import Config
from .runs import descent_time_sweep
from .sweep_checks import check_slope_lnm
from .trends import row_metrics

__all__ = ["SECONDS_PER_EVALUATION", "extend_descent_time", "width_cost"]

#: Estimated CPU seconds per neuron-sample of one field evaluation (see the module docstring).
SECONDS_PER_EVALUATION = 45e-9


def width_cost(rows: list[dict], alpha: float, m: int, n: int) -> float:
    """The estimated CPU seconds of the runs at (α, m) in `rows` on n samples: Σ `vf_evals`
    × m × n × `SECONDS_PER_EVALUATION` (deterministic: a function of the runs alone)."""
    evals = sum(r["vf_evals"] for r in rows if r["alpha"] == alpha and r["m"] == m)
    return SECONDS_PER_EVALUATION * float(evals) * m * n


def extend_descent_time(
    cfg: Config, rows: list[dict], twin_rows: list[dict], *, progress: bool = False
) -> dict[float, Extension]:
    """Extend the sweep at every α whose row is undecided (finite size), α =
    `cfg.extend_alpha` first, then the others in the sweep's order, all from one budget
    (`cfg.extend_budget_s` CPU s): rows appended to `rows`, companion rows to `twin_rows`,
    each marked `extension`. An α the budget no longer reaches gets a record that says so
    (not extended, what the next width would cost). {} when there is no budget
    (`--quick`) or fewer than three widths (the slope row is then not applicable, not a
    limit to extend). The cost of the next width is the last width's estimated cost
    (`width_cost`) × 2 (a run costs ∝ m)."""
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

    work = [0.0]  # the estimated CPU seconds spent so far: `extend`'s clock

    def run(m: float) -> None:
        one = dataclasses.replace(cfg, sweep_m=(int(m),), sweep_alpha=(alpha,))
        if progress:
            print(f"  [multistage] extension: α = {alpha}, m = {int(m)}", flush=True)
        new_twins: list[dict] = []
        new = descent_time_sweep(one, metrics=row_metrics, companion=new_twins, progress=progress)
        rows.extend(r | {"extension": True} for r in new)
        twin_rows.extend(r | {"extension": True} for r in new_twins)
        work[0] += width_cost(new, alpha, int(m), cfg.sweep_n)

    top = max(cfg.sweep_m)
    last = width_cost(rows, alpha, top, cfg.sweep_n)
    # what is left of the shared budget (a tiny positive number once it is spent: `extend`
    # then runs nothing and says what the next width would take)
    _, ext = extend(
        claim,
        judge,  # type: ignore[arg-type]
        run,
        cfg.sweep_m,
        budget_s=max(left, 1e-9),
        last_seconds=last if last > 0 else None,
        clock=lambda: work[0],
        unit="CPU s",
    )
    shared = (
        f"; one budget of {cfg.extend_budget_s:g} CPU s for every α, α = {cfg.extend_alpha} "
        "first (`flows check --budget CPU_S`; CPU s estimated from each run's field "
        "evaluations, the same on every machine)"
    )
    return dataclasses.replace(ext, budget_s=cfg.extend_budget_s, stopped=ext.stopped + shared)
