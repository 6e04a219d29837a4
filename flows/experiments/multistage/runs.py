"""The runs of `flows check multistage`: the main run, its stage times, and the small
descent-time sweep on Assumption 1–2 data."""

from __future__ import annotations

import dataclasses
import math
import time

from reduced import multistage as ms

from ..._data import assumption_data, moments
from ..._problem import make_problem
from ..._simulate import simulate
from ..._stages import detect_stages_from_loss, first_crossing
from ..._trajectory import Trajectory
from ...models import TwoLayer
from .config import NAME, Config
from .data import Units, make_data, save_times
from .observables import multistage_observables

__all__ = ["run_main", "stage_times", "descent_time_sweep"]


def run_main(cfg: Config, *, progress: bool = False) -> tuple[Trajectory, Units]:
    data = make_data(cfg)
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
    )
    traj.config["experiment"] = {"name": NAME, **dataclasses.asdict(cfg)}
    return traj, units


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


def descent_time_sweep(cfg: Config, *, progress: bool = False) -> list[dict]:
    """T_d for every (α, m, seed) of the sweep, on Assumption 1–2 data (f₂, `sweep_n` points)."""
    data = assumption_data("f2", n=cfg.sweep_n)
    units = Units.of(moments(data))
    rows = []
    for alpha in cfg.sweep_alpha:
        for m in cfg.sweep_m:
            t1 = ms.descent_time_leading(m, alpha) + 8.0
            for seed in cfg.sweep_seeds:
                problem = make_problem(TwoLayer(m=m, d=1, alpha=alpha), data, key=seed)
                start = time.perf_counter()
                traj = simulate(
                    problem,
                    t1=t1,
                    n_save=801,
                    solver=cfg.solver,
                    rtol=cfg.rtol,
                    atol=cfg.atol,
                    observables=multistage_observables,
                    save_params="none",
                )
                st = stage_times(traj, units, m, alpha, cfg.beta)
                rows.append(
                    {
                        "alpha": alpha,
                        "m": m,
                        "seed": seed,
                        "T_d": st["T_d"],
                        "vf_evals": traj.stats["vf_evals"],
                        "wall_s": time.perf_counter() - start,
                    }
                )
                if progress:
                    print(f"  sweep α={alpha} m={m} seed={seed}: T_d = {st['T_d']:.4g}", flush=True)
    return rows
