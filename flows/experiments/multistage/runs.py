"""The runs of `flows check multistage`: the main run, its stage times, and the small
descent-time sweep on Assumption 1–2 data."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

from flows import (
    Dataset,
    Trajectory,
    assumption_data,
    detect_stages_from_loss,
    first_crossing,
    make_problem,
    moments,
    simulate,
)
from flows.models import TwoLayer
from reduced import multistage as ms

from .config import NAME, Config
from .data import Units, make_data, save_times
from .observables import multistage_observables

__all__ = ["run_main", "run_target", "stage_times", "descent_time_sweep"]


def run_main(
    cfg: Config,
    *,
    progress: bool = False,
    data: Dataset | None = None,
    global_error: bool = False,
) -> tuple[Trajectory, Units]:
    """The main run of `cfg` (on `data` instead of `make_data(cfg)` when given); with
    `global_error`, with its companion solve (`flows.simulate`)."""
    data = make_data(cfg) if data is None else data
    units = Units.of(moments(data))
    model = TwoLayer(m=cfg.m, d=data.d, alpha=cfg.alpha)
    problem = make_problem(model, data, key=cfg.seed)
    traj = simulate(
        problem,
        t1=cfg.t1,
        ts=save_times(cfg, units),
        solver=cfg.solver,
        rtol=cfg.rtol,
        atol=cfg.atol,
        observables=multistage_observables,
        save_params="ends",
        progress=progress,
        global_error=global_error,
    )
    traj.config["experiment"] = {"name": NAME, **dataclasses.asdict(cfg)}
    return traj, units


def run_target(cfg: Config, target: str, *, global_error: bool = False) -> tuple[Trajectory, Units]:
    """One run of the paper's target figure: `target` on the paper's data (`target_n`
    points), width `target_m`, horizon `target_t1`, the main run's α, seed and solver;
    `global_error`: with its companion solve."""
    tcfg = dataclasses.replace(
        cfg, m=cfg.target_m, n=cfg.target_n, t1=cfg.target_t1, target=target, data="paper"
    )
    # One name for the three targets' data sets: the name is a static field of the
    # problem, so distinct names would compile the same solve three times (≈ 7 s each).
    # The target stays in the data's metadata and in the run's config.
    data = make_data(tcfg)
    data = dataclasses.replace(
        data, name="paper-target-figure", meta={**data.meta, "target": target}
    )
    return run_main(tcfg, data=data, global_error=global_error)


def stage_times(traj: Trajectory, units: Units, m: int, alpha: float, beta: float) -> dict:
    """T_p (Table 1, predicted), T_d (measured: first τ ≥ T_p with 1 − K̂ ≤ β), T_sp (eq. 63),
    and the loss-only detector's stage ends, all in the theorems' time τ."""
    tau = units.tau(traj.times)
    o = traj.observables
    out = {"T_p": ms.plateau_time(m, alpha) if alpha > 0.5 and m > 1 else float("nan")}
    start = out["T_p"] if math.isfinite(out["T_p"]) else 0.0
    out["T_d"] = first_crossing(tau, 1.0 - o["K_hat"], beta, after=start)
    out["T_sp"] = (
        ms.secondary_plateau_end(out["T_d"], m, beta) if math.isfinite(out["T_d"]) else float("nan")
    )
    det = detect_stages_from_loss(tau, o["loss"])
    out.update({f"loss_{k}": det[k] for k in ("plateau_end", "descent_end", "next_descent")})
    return out


def descent_time_sweep(
    cfg: Config,
    *,
    progress: bool = False,
    metrics: Callable[[Trajectory, Units, Config], dict] | None = None,
    companion: list[dict] | None = None,
) -> list[dict]:
    """T_d for every (α, m, seed) of the sweep, on Assumption 1–2 data (f₂, `sweep_n`
    points in `sweep_d` dimensions); `metrics(traj, units, cfg_of_the_run)` adds the
    finite-size quantities of each run to its row (`trends.row_metrics`).

    `companion`: a list to fill with the same rows from each run's companion solve at
    tolerances 10× tighter (`simulate(…, global_error=True)`), in the same order — the
    sweep's checks run on them give its rows numerical error bars (`with_error_bars`). A
    run whose companion failed adds a row of NaNs there (its checks then say so)."""
    data = assumption_data("f2", n=cfg.sweep_n, d=cfg.sweep_d)
    units = Units.of(moments(data))
    rows = []
    for alpha in cfg.sweep_alpha:
        for m in cfg.sweep_m:
            t1 = ms.descent_time_leading(m, alpha) + 8.0
            for seed in cfg.sweep_seeds:
                problem = make_problem(TwoLayer(m=m, d=data.d, alpha=alpha), data, key=seed)
                start, cpu = time.perf_counter(), time.process_time()
                traj = simulate(
                    problem,
                    t1=t1,
                    n_save=401,
                    solver=cfg.solver,
                    rtol=cfg.rtol,
                    atol=cfg.atol,
                    observables=multistage_observables,
                    save_params="none",
                    global_error=companion is not None,
                )
                run_cfg = dataclasses.replace(cfg, m=m, alpha=alpha, seed=seed)
                row = _sweep_row(traj, units, run_cfg, data.d, metrics)
                row["wall_s"] = time.perf_counter() - start
                row["cpu_s"] = time.process_time() - cpu  # every thread of this process
                rows.append(row)
                if companion is not None:
                    ge = traj.global_error
                    tight = ge.companion if ge is not None else None
                    if tight is not None:
                        companion.append(_sweep_row(tight, units, run_cfg, data.d, metrics))
                    else:
                        blank = {
                            k: float("nan")
                            for k, v in row.items()
                            if isinstance(v, float) and k not in ("alpha", "m", "seed", "d")
                        }
                        companion.append(row | blank)
                if progress:
                    print(
                        f"  sweep α={alpha} m={m} seed={seed}: T_d = {row['T_d']:.4g}", flush=True
                    )
    return rows


def _sweep_row(traj: Trajectory, units: Units, run_cfg: Config, d: int, metrics) -> dict:
    """One row of `descent_time_sweep` (`run_cfg`: the sweep's config at the run's m, α,
    seed)."""
    st = stage_times(traj, units, run_cfg.m, run_cfg.alpha, run_cfg.beta)
    row = {
        "alpha": run_cfg.alpha,
        "m": run_cfg.m,
        "seed": run_cfg.seed,
        "d": d,
        "T_d": st["T_d"],
        "vf_evals": traj.stats["vf_evals"],
    }
    if metrics is not None:
        row |= metrics(traj, units, run_cfg)
    return row
