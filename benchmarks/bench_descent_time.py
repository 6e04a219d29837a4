"""The descent-time figure of the multi-stage paper, at the paper's size, timed.

Runs `flows.experiments.multistage.descent_sweep` twice (resumable: rerun the same
command after an interruption):
1. the paper's grid m ∈ {1000, 5000, 10000, 15000, 20000, 50000, 100000} ×
   α ∈ {0.75, 1.0, 1.25, 1.5, 1.75, 2.0}, target f₁, the paper's data (1000 points on
   [−15, 15]); T_d is measured in the theorems' time τ = ‖b‖·t (the data's units) and its
   slopes are compared with (2α − 1)/2 (against ln m) and ln m
   (against α);
2. the same grid on data satisfying Assumptions 1–2 (f₁ on whitened 1-D points, n = 100),
   where the slope of T_d against ln m should match (2α − 1)/2 directly (target: within
   10 %).
3. a precision check: the paper-data points with m ≤ 5000 again in the other precision
   (float64 when the sweeps ran in float32), and the largest relative difference of T_d.
Writes `benchmarks/results/descent_time.md` (wall time of each sweep, slopes, T_d table)
and the two figures beside it; the sweep folders (point files, sweep.nc) go to `--work`.

    python benchmarks/bench_descent_time.py [--solver tsit5] [--rtol 1e-5] [--dtype float32]
                                            [--quick]

Why Tsit5 (RKC2 until 2026-12): on this grid the flow is not stiff at rtol 1e-5 — RKC2 took
no stabilized step (m = 2·10⁴ and 10⁵, α = 2: 44 of 44 and 45 of 45 accepted steps were its
non-stiff Tsit5 steps; ρ ≈ 22, ρ·t₁ ≈ 30), so it was Tsit5 plus its 30 power iterations
per run: 5.4 min for the paper sweep against 4.6 with Tsit5 (one run each, same code), and
T_d within 1.7e-5 (RKC2) and 1.6e-5 (Tsit5) of a float64 Tsit5 rtol 1e-9 reference at
m = 5000, α ∈ {0.75, 1.25, 2}.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import shutil
import time
from pathlib import Path

import numpy as np

from flows.experiments import multistage

PAPER_M = (1000, 5000, 10000, 15000, 20000, 50000, 100000)
PAPER_ALPHA = (0.75, 1.0, 1.25, 1.5, 1.75, 2.0)


def _table(ds, label: str) -> list[str]:
    lines = [f"T_d (τ units) on {label}; rows α, columns m:", ""]
    ms = [int(v) for v in ds["m"].values]
    lines.append("| α \\ m | " + " | ".join(str(m) for m in ms) + " |")
    lines.append("|---|" + "---:|" * len(ms))
    td = ds["T_d"].mean("seed")
    for a in ds["alpha"].values:
        vals = [float(td.sel(m=m, alpha=a)) for m in ms]
        lines.append(
            f"| {a:g} | " + " | ".join(f"{v:.3f}" if math.isfinite(v) else "—" for v in vals) + " |"
        )
    return lines


def _slopes(result, tol: float | None) -> list[str]:
    out = [
        "| α | fitted slope of T_d vs ln m | theory (2α−1)/2 | relative gap |",
        "|---|---:|---:|---:|",
    ]
    for a, v in sorted(result.slopes["T_d_vs_ln_m"].items(), key=lambda kv: float(kv[0])):
        fit, th = v["fit"], v["theory"]
        gap = (fit - th) / th
        mark = "" if tol is None else (" ✓" if abs(gap) <= tol else " ✗")
        out.append(f"| {float(a):g} | {fit:.4f} | {th:.4f} | {100 * gap:+.1f} %{mark} |")
    out += ["", "| m | fitted slope of T_d vs α | theory ln m |", "|---|---:|---:|"]
    for m, v in sorted(result.slopes["T_d_vs_alpha"].items(), key=lambda kv: int(kv[0])):
        out.append(f"| {int(m)} | {v['fit']:.4f} | {v['theory']:.4f} |")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--solver", default="tsit5")
    ap.add_argument("--rtol", type=float, default=1e-5)
    ap.add_argument("--atol", type=float, default=1e-14)  # ≪ the smallest init, 1e-10
    ap.add_argument("--vector-field", default="fused")
    ap.add_argument(
        "--dtype",
        default="float32",
        choices=["float32", "float64"],
        help="precision of the timed sweeps (default float32: ~2.4x faster per evaluation "
        "at m = 100 000; the precision check below measures what it changes in T_d)",
    )
    # 1: on CPU a vmapped RKC batch runs every member at the largest stage count of the
    # batch and gained nothing in our measurements; batch on an accelerator
    ap.add_argument("--batch-size", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="m ≤ 5000, three α (smoke test)")
    ap.add_argument(
        "--paper-max-m",
        type=int,
        default=None,
        help="largest width of the paper-data sweep (default: all of PAPER_M); the sweep "
        "is resumable, so a later run without it adds the missing widths",
    )
    ap.add_argument("--work", default="results/descent_time_sweeps")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    ms = PAPER_M[:2] if args.quick else PAPER_M
    alphas = PAPER_ALPHA[:3] if args.quick else PAPER_ALPHA
    paper_ms = [m for m in ms if args.paper_max_m is None or m <= args.paper_max_m]
    common = dict(
        alpha=list(alphas),
        seeds=[0],
        target="f1",
        solver=args.solver,
        rtol=args.rtol,
        atol=args.atol,
        vector_field=args.vector_field,
        batch_size=args.batch_size,
    )
    tag = f"{args.dtype}_atol{args.atol:g}"
    other = "float64" if args.dtype == "float32" else "float32"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    runs = {}
    for name, kw in (
        ("paper", dict(data="paper", n=1000, m=paper_ms)),
        ("assumption", dict(data="assumption", n=100, m=list(ms))),
    ):
        start = time.perf_counter()
        res = multistage.descent_sweep(
            Path(args.work) / f"{name}_{tag}{suffix}", dtype=args.dtype, **common, **kw
        )
        runs[name] = (res, time.perf_counter() - start)
        if res.figure is not None:
            shutil.copyfile(res.figure, out / f"descent_time_{name}{suffix}.png")
    # the precision check: the small widths of the paper grid in the other precision
    check_ms = [m for m in paper_ms if m <= 5000]
    check = multistage.descent_sweep(
        Path(args.work) / f"paper_{other}_atol{args.atol:g}{suffix}",
        dtype=other,
        data="paper",
        n=1000,
        m=check_ms,
        plot=False,
        **common,
    )
    td_main = runs["paper"][0].dataset()["T_d"].sel(m=check_ms)
    td_other = check.dataset()["T_d"]
    rel = float(np.nanmax(np.abs(td_main.values - td_other.values) / np.abs(td_other.values)))
    import jax

    lines = [
        "# Descent-time figure of the multi-stage paper (T_d against α and ln m)",
        "",
        f"Grid m = {list(ms)} (paper data: {paper_ms}) × α = {list(alphas)}, seed 0, "
        f"target f₁. Solver "
        f"{args.solver}, rtol {args.rtol:g}, atol {args.atol:g}, vector field "
        f"{args.vector_field}, {args.dtype}, batches of ≤ {args.batch_size} runs of one "
        "width (vmap). "
        f"Machine: {platform.machine()}, {os.cpu_count()} cpu(s), jax {jax.__version__}. "
        "Wall times include compilation; a point's wall time is its batch's divided by the "
        "batch size. Points already in the work folder are not rerun (then the wall time "
        "below is the resumed part only).",
        "",
    ]
    lines += [
        f"Precision check: the paper-data points with m ∈ {check_ms} (all α) rerun in "
        f"{other}: largest relative difference of T_d between {args.dtype} and {other}: "
        f"**{rel:.1e}**.",
        "",
    ]
    for name, label, tol in (
        ("paper", "the paper's data (1000 points on [−15, 15]; τ = ‖b‖·t)", None),
        ("assumption", "Assumption 1–2 data (n = 100 whitened points)", 0.10),
    ):
        res, wall = runs[name]
        ds = res.dataset()
        evals = ds["vf_evals"].values
        lines += [
            f"## {label}",
            "",
            f"- wall time of the sweep: **{wall / 60:.1f} min** ({res.n_run} points run, "
            f"{res.n_skipped} resumed from disk, {len(res.failed)} failed, "
            f"{len(res.not_reached)} without T_d in the horizon)",
            f"- vector-field evaluations per run: median "
            f"{np.nanmedian(evals):.0f}, max {np.nanmax(evals):.0f}",
            f"- figure: `descent_time_{name}{suffix}.png`",
            "",
        ]
        lines += _slopes(res, tol) + [""] + _table(ds, label) + [""]
    tmp = out / f".descent_time{suffix}.md.tmp"
    tmp.write_text("\n".join(lines) + "\n")
    os.replace(tmp, out / f"descent_time{suffix}.md")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
