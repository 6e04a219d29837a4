"""What the significance check and the global-error estimate cost a run.

Every flow now measures, at θ(0) and at its last save, the error its loss cannot be known
below (`flows.loss_floors`: one compiled program of two gradients and four
losses each), and at its last save the floor of every observable
(`observable_resolutions`: one reverse pass of the observables function per component,
four probes, and its t-derivative). This times those calls against the run they belong
to (`flows.simulate` on the multistage net, `flows simulate multistage`'s defaults: n =
1000 paper data, α = 1, Tsit5 at rtol 1e-6, 401 saves, `multistage_observables`: 18
scalars, several of them through ∇L, so their floors differentiate twice), warm,
alternated `--repeats` times in one process, and the run with `global_error=True` (the
companion solve at tolerances /10) against the plain run. The observables' floors'
compile (once per observables function and shapes) is reported apart.

Targets: the check ≤ 2 % of a run; the global
error ≤ 2.5× a run. Writes `benchmarks/results/significance.md` and `.json`.

    python benchmarks/bench_significance.py [--widths 1000,5000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import flows
from flows.experiments.multistage import Config, make_data
from flows.experiments.multistage.observables import multistage_observables
from flows.models import TwoLayer

OUT = Path(__file__).parent / "results" / "significance"
RTOL, ATOL, N_SAVE = 1e-6, 1e-9, 401


def _wall(fn) -> tuple[object, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(widths, repeats: int, t1: float) -> dict:
    rows = []
    for m in widths:
        cfg = Config(m=m, alpha=1.0, target="f1", data="paper", n=1000, seed=0, t1=t1)
        data = make_data(cfg)
        problem = flows.make_problem(TwoLayer(m=m, d=data.d, alpha=1.0), data, key=0)
        kw = dict(t1=t1, rtol=RTOL, atol=ATOL, n_save=N_SAVE, observables=multistage_observables)
        traj = flows.simulate(problem, **kw)  # compiles the solve and the floors' program
        end = {"a": traj.params["a"][-1], "w": traj.params["w"][-1]}
        last = {k: v[-1] for k, v in traj.observables.items()}
        last = {k: v for k, v in last.items() if k not in ("loss", "energy", "energy_residual")}

        def obs_floors(problem=problem, end=end, last=last):
            return flows.observable_resolutions(
                problem, multistage_observables, end, t1, RTOL, ATOL, values=last
            )

        records, obs_compile = _wall(obs_floors)  # compiles the observables' floors
        runs, floors, obs, ge_ratio = [], [], [], []

        def plain(problem=problem, kw=kw):
            return flows.simulate(problem, **kw)

        def floors_only(problem=problem, end=end):
            flows.loss_floors(problem, problem.theta0, RTOL, ATOL)
            return flows.loss_floors(problem, end, RTOL, ATOL)

        def with_error(problem=problem, kw=kw):
            return flows.simulate(problem, global_error=True, **kw)

        for _ in range(repeats):
            _, w_run = _wall(plain)
            _, w_floor = _wall(floors_only)
            _, w_obs = _wall(obs_floors)
            _, w_ge = _wall(with_error)
            runs.append(w_run)
            floors.append(w_floor)
            obs.append(w_obs)
            ge_ratio.append(w_ge / w_run)
        runs_a = np.array(runs)
        rows.append(
            {
                "m": m,
                "t1": t1,
                "run_wall_s": float(np.median(runs)),
                "floors_wall_s": float(np.median(floors)),
                "floors_share": float(np.median(np.array(floors) / runs_a)),
                "obs_floors_wall_s": float(np.median(obs)),
                "obs_floors_share": float(np.median(np.array(obs) / runs_a)),
                "obs_floors_compile_s": obs_compile,
                "check_share": float(np.median((np.array(floors) + np.array(obs)) / runs_a)),
                "observables_with_floor": sum(r["resolved"] is not None for r in records.values()),
                "observables_unresolved": sorted(
                    k for k, r in records.items() if r["resolved"] is False
                ),
                "global_error_ratio": float(np.median(ge_ratio)),
                "floor_final": traj.stats.resolution["floor"],
                "loss_final": float(traj.loss[-1]),
            }
        )
    return {"machine": platform.processor() or platform.machine(), "rows": rows}


def write(result: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# Cost of the significance check and of the global-error estimate",
        "",
        "`benchmarks/bench_significance.py`: multistage net, n = 1000, α = 1, Tsit5 at rtol",
        "1e-6, 401 saves, warm, medians of alternated repeats in one process. `loss floors` =",
        "the two `loss_floors` calls every flow makes (θ(0) and the last save); `observable",
        "floors` = `observable_resolutions` of `multistage_observables` at the last save",
        "(its compile, once per observables function and shapes, apart); `check` = both,",
        "over the run; `global error` = a run with its companion solve at tolerances /10,",
        "over the plain run.",
        "",
        "| m | t1 | run, wall s | loss floors, s | observable floors, s (compile) | check / run "
        "| observables with a floor (unresolved) | global error / run | final loss | its floor |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        bad = ", ".join(r["observables_unresolved"]) or "none"
        lines.append(
            f"| {r['m']} | {r['t1']:g} | {r['run_wall_s']:.3f} | {r['floors_wall_s']:.4f} | "
            f"{r['obs_floors_wall_s']:.4f} ({r['obs_floors_compile_s']:.2f}) | "
            f"{100 * r['check_share']:.2f} % | {r['observables_with_floor']} ({bad}) | "
            f"{r['global_error_ratio']:.2f}× | {r['loss_final']:.6g} | {r['floor_final']:.2g} |"
        )
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="1000,5000")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--t1", type=float, default=20.0)
    a = ap.parse_args()
    result = run([int(w) for w in a.widths.split(",")], a.repeats, a.t1)
    write(result)
    print(OUT.with_suffix(".md").read_text())


if __name__ == "__main__":
    main()
