"""What `simulate(solver='auto')` picks, and what its pick costs against the others.

'auto' measures ρ·(t1 − t0) at θ(0) and, where that is stiff (≥ 250), samples the Hessian
again after a pilot of 20 gradient-descent steps of 0.5/ρ: its second eigenvalue λ₂ there
(Lanczos, `flows.outlier_spectrum`) says whether the stiffness is one outlier (then
ETDRK4 at rtol ≥ 1e-6) or a bulk (then RKC2, ROCK4 below 1e-6) — `flows.auto_solver`.

For each problem and rtol this runs, in one process, 'auto' and every solver it chooses
between (Tsit5, RKC2, ROCK4, ETDRK4), warm (a first run compiles), and reports the
evaluations (gradients, with the Hessian-vector products apart), the error of θ at the
saves against Dopri8 at rtol 1e-12 relative to max |θ| (err/rtol), the wall of the solve
(best of `--repeats`) and of the measurement behind 'auto' (warm, and its first,
compiling call). Problems:

- `multistage m`: `TwoLayer(m, d=1, α=1)`, tanh, target f₁ on the paper data (n = 1000),
  key 0, t = 20 — at θ(0) every |eigenvalue| is in [17.4, 18.9] (m = 200: a bulk), from
  t ≈ 0.3 one outlier 26–34 over a bulk ≤ 0.31; and m = 200 at α = 0.5 (initial weights
  of standard deviation m^{−1/2} instead of m^{−1}: ρ(θ(0)) ≈ 81, a stiffer outlier);
- `linear outlier`, `linear bulk`: least squares, 20 parameters, Hessian eigenvalues
  exactly {100, 0.1 … 1} and 10 … 100 (a whitened Gaussian design, key 0), t = 20.

    python benchmarks/bench_auto.py [--widths 200,1000] [--repeats 2] [--rewrite]

Writes `benchmarks/results/auto.md` and `.json`.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import flows
from flows.models import TwoLayer

OUT = Path(__file__).parent / "results" / "auto"
T1, N_SAVE = 20.0, 5
RTOLS = (1e-3, 1e-4, 1e-6, 1e-8)
SOLVERS = ("tsit5", "rkc", "rock4", "etdrk4")


def multistage(m: int, alpha: float = 1.0):
    return flows.make_problem(TwoLayer(m=m, d=1, alpha=alpha), flows.paper_data("f1"), key=0)


def linear(eigenvalues) -> flows.Problem:
    """Least squares on 500 samples whose design has exactly these covariance eigenvalues
    (whitened, then coloured in a random basis; key 0)."""
    rng = np.random.default_rng(0)
    d = len(eigenvalues)
    basis, _ = np.linalg.qr(rng.normal(size=(d, d)))
    x = rng.normal(size=(500, d))
    x = x @ np.linalg.cholesky(np.linalg.inv(x.T @ x / 500))
    x = x @ np.linalg.cholesky(basis @ np.diag(eigenvalues) @ basis.T).T
    data = flows.Dataset(x=x, y=rng.normal(size=500), name="linear")
    return flows.make_problem(lambda p, xx: xx @ p, data, theta0=jnp.zeros(d))


def _theta(traj) -> np.ndarray:
    return np.concatenate(
        [np.asarray(v).reshape(len(traj.param_times), -1) for v in traj.params.values()], axis=1
    )


def run_problem(name: str, problem, repeats: int) -> dict:
    ref = _theta(
        flows.simulate(problem, solver="dopri8", rtol=1e-12, atol=1e-15, t1=T1, n_save=N_SAVE)
    )
    scale = float(np.max(np.abs(ref)))
    rows = []
    start = time.perf_counter()
    auto = flows.measure_stiffness(problem, 0.0, T1, 1e-4)
    measure_first = time.perf_counter() - start
    start = time.perf_counter()
    flows.measure_stiffness(problem, 0.0, T1, 1e-4)
    measure_warm = time.perf_counter() - start
    for rtol in RTOLS:
        chosen = flows.auto_solver(rtol, auto["rho_span"], auto.get("bulk_span"))
        before = flows.auto_solver(rtol, auto["rho_span"])  # the rule without the pilot
        for solver in SOLVERS:
            kw = dict(solver=solver, rtol=rtol, atol=rtol * 1e-3, t1=T1, n_save=N_SAVE)
            flows.simulate(problem, **kw)  # compiles
            walls = []
            for _ in range(repeats):
                t = time.perf_counter()
                traj = flows.simulate(problem, **kw)
                walls.append(time.perf_counter() - t)
            err = float(np.max(np.abs(_theta(traj) - ref))) / scale
            rows.append(
                {
                    "problem": name,
                    "rtol": rtol,
                    "solver": solver,
                    "auto": solver == chosen,
                    "before": solver == before,
                    "vf_evals": int(traj.stats["vf_evals"]),
                    "jvp_evals": int(traj.stats.get("jvp_evals", 0) or 0),
                    "err_over_rtol": err / rtol,
                    "wall_s": min(walls),
                }
            )
            print(rows[-1], flush=True)
    return {
        "problem": name,
        "n_params": int(problem.n_params),
        "measurement": {k: v for k, v in auto.items() if k != "rule"},
        "rule": auto["rule"],
        "measure_first_s": measure_first,
        "measure_warm_s": measure_warm,
        "rows": rows,
    }


def write(result: dict) -> None:
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.with_suffix(".json").write_text(json.dumps(result, indent=1))
    lines = [
        "# `solver='auto'`: its pick against the solvers it chooses between",
        "",
        "Written by `benchmarks/bench_auto.py` (see its docstring for the problems). One",
        f"process, warm runs (best of {result['repeats']}), {result['machine']}, load average",
        f"{result['load']}. err/rtol: θ at the saves against Dopri8 (rtol 1e-12), relative to",
        "max |θ|. **auto** marks the pick, *before* the pick of the rule without the pilot",
        "(ρ·(t1 − t0) at θ(0) only: RKC2 at rtol ≥ 1e-6, ROCK4 below). Evaluations are",
        "gradients; Hessian-vector products (RKC2's and ROCK4's power iterations) apart.",
        "",
    ]
    for p in result["problems"]:
        meas = p["measurement"]
        lines += [
            f"## {p['problem']} ({p['n_params']} parameters)",
            "",
            f"ρ(θ(0)) = {meas['rho']:.4g}, ρ·T = {meas['rho_span']:.4g}"
            + (
                f"; after the pilot (t = {meas['pilot_time']:.3g}) the Hessian's two largest"
                f" eigenvalues λ₁ = {meas['outlier_rate']:.4g}, λ₂ = {meas['bulk_rate']:.4g},"
                f" λ₂·T = {meas['bulk_span']:.4g}"
                if "bulk_span" in meas
                else ""
            )
            + f". The measurement: {p['measure_warm_s'] * 1e3:.0f} ms warm, "
            f"{p['measure_first_s']:.2f} s at its first (compiling) call.",
            "",
            "| rtol | solver | evaluations | HVPs | err/rtol | wall (s) |",
            "|---:|:---|---:|---:|---:|---:|",
        ]
        for r in p["rows"]:
            tag = "**auto**" if r["auto"] else ""
            tag += (" " if tag else "") + ("*before*" if r["before"] else "")
            lines.append(
                f"| {r['rtol']:.0e} | {r['solver']} {tag} | {r['vf_evals']} | {r['jvp_evals']} | "
                f"{r['err_over_rtol']:.3g} | {r['wall_s']:.3f} |"
            )
        lines.append("")
    OUT.with_suffix(".md").write_text("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="200,1000")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--rewrite", action="store_true", help="rewrite the .md from the .json")
    args = ap.parse_args()
    if args.rewrite:
        write(json.loads(OUT.with_suffix(".json").read_text()))
        return
    problems = [(f"multistage m = {m}", multistage(int(m))) for m in args.widths.split(",")]
    problems.append(("multistage m = 200, α = 0.5", multistage(200, alpha=0.5)))
    problems += [
        ("linear outlier", linear(np.r_[100.0, np.linspace(0.1, 1.0, 19)])),
        ("linear bulk", linear(np.linspace(10.0, 100.0, 20))),
    ]
    out = {
        "machine": platform.processor() or platform.machine(),
        "load": " ".join(f"{v:.2f}" for v in os.getloadavg()),
        "repeats": args.repeats,
        "versions": flows.versions(),
        "problems": [run_problem(name, p, args.repeats) for name, p in problems],
    }
    write(out)


if __name__ == "__main__":
    main()
