"""Benchmark: the error norm of the step-size controller on a wide net (RMS vs max).

diffrax's `PIDController` (and the toolkit's default, `error_norm="rms"`) bounds the
root-mean-square of the scaled local error over all parameters. On the multi-stage default
(m = 5000, 10 000 parameters) the error sits in a few neurons, so the largest parameter's
error can exceed rtol by up to sqrt(10 000) = 100×. This script measures, for the
stabilized and implicit solvers and Tsit5, the largest parameter error at t1 against a
Dopri8 rtol 1e-11 reference, with `error_norm="rms"` and `"max"`, and the vector-field
evaluations each needs (counted by the solve's host callback: rejected steps and, for
`kvaerno5-cg`, Hessian-vector products included).

    python benchmarks/bench_error_norm.py            # m = 5000, t = 20 (~12 min, 2 cores)
    python benchmarks/bench_error_norm.py --quick    # m = 200, t = 2 (smoke test)

Writes `benchmarks/results/error_norm.md` and `.json` (rows, config, solver settings,
versions, machine); `--quick` appends `_quick`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import flows
from flows.models import TwoLayer

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # provenance helpers of the work-precision package
    sys.path.insert(0, str(HERE))

from work_precision.methods import traj_final  # noqa: E402
from work_precision.run import machine, versions  # noqa: E402

#: (solver, rtol) of the rows; each is run with both norms except Tsit5 (the reference
#: point of the issue's target, with the default norm only).
FULL_ROWS = [
    ("tsit5", 1e-4),
    ("tsit5", 1e-5),
    ("tsit5", 1e-6),
    ("rkc", 1e-5),
    ("rkc", 1e-6),
    ("eserk4", 1e-5),
    ("eserk4", 1e-6),
    ("eserk4", 1e-7),
    ("kvaerno5-cg", 1e-4),
    ("kvaerno5-cg", 1e-6),
]
QUICK_ROWS = [("tsit5", 1e-5), ("rkc", 1e-5), ("eserk4", 1e-6), ("kvaerno5-cg", 1e-4)]
ATOL_FACTOR = 1e-3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="m = 200, t = 2 (smoke test)")
    ap.add_argument("--out", default=str(HERE / "results"), help="output folder")
    args = ap.parse_args()
    m, t1 = (200, 2.0) if args.quick else (5000, 20.0)
    rows_spec = QUICK_ROWS if args.quick else FULL_ROWS
    config = {"model": "TwoLayer", "m": m, "d": 1, "alpha": 1.0, "target": "f1"}
    config |= {"data": "paper_data('f1')", "key": 0, "t1": t1}
    problem = flows.make_problem(TwoLayer(m=m, d=1, alpha=1.0), flows.paper_data("f1"), key=0)
    kw = dict(t1=t1, n_save=2, save_params="ends", throw=False)
    start = time.perf_counter()
    ref_traj = flows.simulate(problem, solver="dopri8", rtol=1e-11, atol=1e-13, **kw)
    ref = traj_final(ref_traj)
    scale = float(np.max(np.abs(ref)))
    print(f"reference: {time.perf_counter() - start:.0f} s, max|θ_ref| = {scale:.3g}", flush=True)
    rows = []
    for solver, rtol in rows_spec:
        for norm in ("rms",) if solver == "tsit5" else ("rms", "max"):
            start = time.perf_counter()
            tr = flows.simulate(
                problem,
                solver=solver,
                rtol=rtol,
                atol=ATOL_FACTOR * rtol,
                error_norm=norm,
                count_evals=True,
                **kw,
            )
            st = tr.stats
            ok = st["result"] == "successful"
            err = float(np.max(np.abs(traj_final(tr) - ref))) if ok else float("nan")
            rows.append(
                {
                    "solver": solver,
                    "rtol": rtol,
                    "atol": ATOL_FACTOR * rtol,
                    "error_norm": norm,
                    "vf_evals": int(st["vf_evals"]),
                    "jvp_evals": int(st.get("jvp_evals", 0)),
                    "steps": int(st["steps"]),
                    "rejected_steps": int(st["rejected_steps"]),
                    "max_abs_error": err,
                    "rel_error": err / scale,
                    "wall_s_incl_compile": time.perf_counter() - start,
                    "result": st["result"],
                }
            )
            r = rows[-1]
            print(
                f"{solver:12s} rtol {rtol:.0e} {norm:3s}: {r['vf_evals']:6d} evals, "
                f"{r['rejected_steps']:4d} rejected, max error {err:.2e} "
                f"({r['rel_error'] / rtol:.2g}× rtol relative)",
                flush=True,
            )
    write(Path(args.out), "_quick" if args.quick else "", config, scale, rows)


def write(out: Path, suffix: str, config: dict, scale: float, rows: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    settings = {"atol": f"{ATOL_FACTOR:g}·rtol", "reference": "dopri8 rtol 1e-11 atol 1e-13"}
    record = {"config": config, "settings": settings, "versions": versions()}
    record |= {"machine": machine(), "max_abs_theta_ref": scale, "rows": rows}
    (out / f"error_norm{suffix}.json").write_text(json.dumps(record, indent=1))
    lines = [
        f"# Error norm of the step-size controller: RMS vs max (m = {config['m']}, "
        f"t = {config['t1']:g})",
        "",
        "Produced by `python benchmarks/bench_error_norm.py`. Multi-stage default net "
        f"(TwoLayer, m = {config['m']}, α = 1, f₁, paper data, key 0), atol = 1e-3·rtol. "
        "Error: max |θ(t1) − θ_ref(t1)| over all parameters against Dopri8 rtol 1e-11; "
        f"relative: ÷ max |θ_ref| = {scale:.3g}. Evaluations: host-callback count "
        "(rejected steps and Hessian-vector products included). Versions and machine: the "
        ".json of the same name.",
        "",
        "| solver | rtol | error norm | evals | of which HVPs | steps | rejected "
        "| max abs error | relative error / rtol |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['solver']} | {r['rtol']:.0e} | {r['error_norm']} | {r['vf_evals']} "
            f"| {r['jvp_evals']} | {r['steps']} | {r['rejected_steps']} "
            f"| {r['max_abs_error']:.2e} | {r['rel_error'] / r['rtol']:.2g} |"
        )
    (out / f"error_norm{suffix}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
