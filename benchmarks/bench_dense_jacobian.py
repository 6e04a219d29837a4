"""Kvaerno5 with its dense Jacobian formed in chunks, where all tangents at once do not fit.

The multi-stage net at m = 1000 (n = 1000 paper data, 2000 parameters): lineax forms the
2000 × 2000 Jacobian (32 MB) by pushing all 2000 tangents through the field at once,
about 30 GiB; `flows.simulate` now forms it `chunk` columns at a time where that does not
fit (`ChunkedLU`). This runs 'kvaerno5' there through `flows.simulate` (t = 20 by default), records
the chunk it took, its steps, evaluations, wall and error against ETDRK4 at rtol 1e-10,
with 'kvaerno5-cg' (matrix-free) beside it in the same process.

    python benchmarks/bench_dense_jacobian.py [--m 1000] [--rtols 1e-4,1e-6] [--t1 20]

Writes `benchmarks/results/dense_jacobian.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np

import flows
from flows.models import TwoLayer

OUT = Path(__file__).parent / "results" / "dense_jacobian"


def _theta(traj) -> np.ndarray:
    return np.concatenate(
        [np.asarray(v).reshape(len(traj.param_times), -1) for v in traj.params.values()], axis=1
    )


def run(m: int, rtols, t1: float) -> dict:
    problem = flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), flows.paper_data("f1"), key=0)
    kw = dict(t1=t1, n_save=5)
    ref = _theta(flows.simulate(problem, solver="etdrk4", rtol=1e-10, atol=1e-13, **kw))
    scale = float(np.max(np.abs(ref)))
    rows = []
    for rtol in rtols:
        for solver in ("kvaerno5", "kvaerno5-cg"):
            start = time.perf_counter()
            traj = flows.simulate(problem, solver=solver, rtol=rtol, atol=rtol * 1e-3, **kw)
            wall = time.perf_counter() - start
            linear = traj.config["solver_settings"]["root_finder"]["settings"]["linear_solver"]
            rows.append(
                {
                    "solver": solver,
                    "rtol": rtol,
                    "linear_solver": linear,
                    "steps": int(traj.stats.steps),
                    "rejected": int(traj.stats.rejected_steps),
                    "vf_evals": int(traj.stats.vf_evals),
                    "err_over_rtol": float(np.max(np.abs(_theta(traj) - ref))) / scale / rtol,
                    "wall_s": wall,
                }
            )
            print(rows[-1], flush=True)
    return {"m": m, "t1": t1, "n_params": int(problem.n_params), "rows": rows}


def write(result: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = [
        f"# Kvaerno5 on the multi-stage net, m = {result['m']} ({result['n_params']} parameters)",
        "",
        "Written by `benchmarks/bench_dense_jacobian.py`. One process, first calls (compile",
        f"included), {result['machine']}, {result['memory_gib']:.3g} GiB, load average",
        f"{result['load']}. t = {result['t1']:g}; err/rtol: θ at 5 saves against ETDRK4 at",
        "rtol 1e-10, relative to max |θ|. Before `ChunkedLU`, 'kvaerno5' was refused here",
        "(it asked for 30 GiB: all tangents at once).",
        "",
        "| solver | rtol | linear solver | steps (rejected) | evaluations | err/rtol | wall s |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for r in result["rows"]:
        ls = r["linear_solver"]
        name = ls.get("class", ls) if isinstance(ls, dict) else ls
        chunk = ls.get("settings", {}).get("chunk") if isinstance(ls, dict) else None
        label = f"{name} (chunk {chunk})" if chunk else str(name)
        lines.append(
            f"| {r['solver']} | {r['rtol']:.0e} | {label} | {r['steps']} ({r['rejected']}) | "
            f"{r['vf_evals']} | {r['err_over_rtol']:.3g} | {r['wall_s']:.1f} |"
        )
    OUT.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--m", type=int, default=1000)
    ap.add_argument("--rtols", default="1e-4,1e-6")
    ap.add_argument("--t1", type=float, default=20.0)
    args = ap.parse_args()
    result = run(args.m, [float(r) for r in args.rtols.split(",")], args.t1)
    result |= {
        "machine": platform.processor() or platform.machine(),
        "memory_gib": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30,
        "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "versions": flows.versions(),
    }
    write(result)


if __name__ == "__main__":
    main()
