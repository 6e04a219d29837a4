"""Benchmark: cost per vector-field evaluation and per solver step against the width m, and
peak memory, for the two-layer net on the paper's data (n = 1000 points, d = 1, f₁).

For each m (default 1000 … 100 000) a fresh subprocess (so its peak resident memory is
that run's alone) times, after compilation:
- one gradient, autodiff and fused, float64 (and fused float32): the median of `--reps`
  jitted loops of 10 evaluations each;
- one Tsit5 step of the exact flow (fused field, rtol 1e-6) from θ(0) to t = 2, i.e. the
  plateau, where the step count hardly depends on m: wall / steps.
Fits the exponent p of cost ∝ m^p (least squares on log–log) and writes
`benchmarks/results/scaling.md`.

    python benchmarks/bench_scaling.py [--m 1000,5000,...] [--reps 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

DEFAULT_M = (1000, 5000, 10000, 20000, 50000, 100000)


def _time_grad(prob, reps: int) -> float:
    import jax

    @jax.jit
    def ten(theta):
        def body(_, th):
            g = prob.grad(th)
            return jax.tree_util.tree_map(lambda p, gi: p - 1e-12 * gi, th, g)

        return jax.lax.fori_loop(0, 10, body, theta)

    jax.block_until_ready(ten(prob.theta0))
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        jax.block_until_ready(ten(prob.theta0))
        times.append((time.perf_counter() - start) / 10)
    return float(np.median(times))


def measure(m: int, reps: int) -> dict:
    """Runs in a subprocess: one width, every variant; returns seconds and peak RSS."""
    import flows
    from flows.models import TwoLayer

    data = flows.paper_data("f1", n=1000)
    model = TwoLayer(m=m, d=1, alpha=1.0)
    out = {"m": m, "baseline_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    for label, kw in (
        ("autodiff_f64", {}),
        ("fused_f64", {"vector_field": "fused"}),
        ("fused_f32", {"vector_field": "fused", "dtype": "float32"}),
    ):
        prob = flows.make_problem(model, data, key=0, **kw)
        out[f"grad_{label}_s"] = _time_grad(prob, reps)
    prob = flows.make_problem(model, data, key=0, vector_field="fused")
    kw = dict(t1=2.0, n_save=2, save_params="none", rtol=1e-6, atol=1e-9)
    flows.simulate(prob, **kw)  # compile
    tr = flows.simulate(prob, **kw)
    out["tsit5_steps"] = tr.stats["steps"]
    out["tsit5_step_s"] = tr.stats["wall_s"] / tr.stats["steps"]
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out["run_rss_mib"] = out["peak_rss_mib"] - out["baseline_rss_mib"]  # above imports + data
    out["activations_mib"] = 1000 * m * 8 / 2**20  # one n×m float64 array
    return out


def _fit_exponent(ms, ys) -> float:
    return float(np.polyfit(np.log(ms), np.log(ys), 1)[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", default=",".join(map(str, DEFAULT_M)))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)  # internal: child process
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.reps)))
        return
    ms = [int(v) for v in args.m.split(",")]
    rows = []
    for m in ms:
        res = subprocess.run(
            [sys.executable, __file__, "--one", str(m), "--reps", str(args.reps)],
            capture_output=True,
            text=True,
            check=True,
        )
        rows.append(json.loads(res.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(
            f"m={m:>6}: grad autodiff {1e3 * r['grad_autodiff_f64_s']:.2f} ms, fused "
            f"{1e3 * r['grad_fused_f64_s']:.2f} ms, "
            f"fused f32 {1e3 * r['grad_fused_f32_s']:.2f} ms; "
            f"Tsit5 step {1e3 * r['tsit5_step_s']:.2f} ms; peak RSS {r['peak_rss_mib']:.0f} MiB",
            flush=True,
        )
    keys = [
        ("grad_autodiff_f64_s", "gradient, autodiff, float64"),
        ("grad_fused_f64_s", "gradient, fused, float64"),
        ("grad_fused_f32_s", "gradient, fused, float32"),
        ("tsit5_step_s", "Tsit5 step (fused, float64)"),
        ("run_rss_mib", "peak resident memory above the imports"),
    ]
    m_arr = np.array([r["m"] for r in rows], float)
    fits = {k: _fit_exponent(m_arr, [r[k] for r in rows]) for k, _ in keys}
    import jax

    lines = [
        "# Cost per evaluation and per step against the width m",
        "",
        f"Two-layer tanh net, paper data (n = 1000, d = 1, f₁), α = 1. Each m in its own "
        f"process (peak RSS is that run's). Median of {args.reps} timed loops after "
        f"compilation. Machine: {platform.machine()}, {os.cpu_count()} cpu(s), "
        f"jax {jax.__version__}.",
        "",
        "| m | grad autodiff f64 (ms) | grad fused f64 (ms) | grad fused f32 (ms) "
        "| Tsit5 step (ms) | fused / autodiff | peak RSS (MiB) | above imports (MiB) "
        "| one n×m f64 array (MiB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['m']} | {1e3 * r['grad_autodiff_f64_s']:.3f} | "
            f"{1e3 * r['grad_fused_f64_s']:.3f} | {1e3 * r['grad_fused_f32_s']:.3f} | "
            f"{1e3 * r['tsit5_step_s']:.3f} | "
            f"{r['grad_fused_f64_s'] / r['grad_autodiff_f64_s']:.2f} | "
            f"{r['peak_rss_mib']:.0f} | {r['run_rss_mib']:.0f} | {r['activations_mib']:.0f} |"
        )
    lines += ["", "Fitted exponent p of cost ∝ m^p over the whole range:", ""]
    lines += [f"- {label}: p = {fits[k]:.3f}" for k, label in keys]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / ".scaling.md.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, out / "scaling.md")
    tmpj = out / ".scaling.json.tmp"
    tmpj.write_text(json.dumps({"rows": rows, "exponents": fits}, indent=1))
    os.replace(tmpj, out / "scaling.json")
    print("\n".join(lines[-len(keys) - 2 :]))


if __name__ == "__main__":
    main()
