"""Does the calibrated global-error estimate (`simulate(…, global_error=True)`) cover the
true error? Per save, on runs with true errors.

Runs (11): the four papers' first solves (as `flows simulate <paper>` makes them; the
multistage net at m = 1000) with Tsit5 and ROCK4 (linear-teacher's leaky-ReLU net: its
event flow, one integrator, Tsit5 between located kinks), two of them again at rtol 1e-8,
and a run whose observable is a difference of two large, nearly equal terms: a tanh
two-layer net with ‖w_k‖ ≈ 3 and a_k² = ‖w_k‖² + 10⁻³, observable Σa² − Σ‖w‖² (terms
≈ 1800, difference ≈ 0.2).

Estimate: `traj.global_error` (the difference from a companion solve at tolerances 10×
tighter, times `flows.claims.error_calibration()`). True error: the difference from a
reference solve, Dopri8 at rtol 1e-12, atol 1e-14 (the event flow: itself at rtol 1e-11,
atol 1e-14). A save counts per observable (scalar, or the largest entry) and per stored
parameter (largest entry); saves where the true error is 0 (t = 0) or below 1000·eps·|value|
(not resolved by the reference) are left out, and counted. A paper's error measures (the
observables its function names in `error_measures`: a conserved quantity's drift, exactly 0
for the flow, whose value and "true error" are round-off) are left out, and named.

Reported per run: coverage (estimate ≥ true), the median and largest over-estimate
(estimate / true), and the raw (uncalibrated) difference's median and 5th percentile ratio.
Targets: coverage ≥ 95 %, median over-estimate ≤ 3×.

Writes `benchmarks/results/global_error_coverage.md` and `.json`.

    python benchmarks/bench_global_error_coverage.py [--runs multistage,cancel]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import flows
from flows.claims import GLOBAL_ERROR_SAFETY, error_calibration

sys.path.insert(0, str(Path(__file__).parent))
from bench_global_error import capture_first_solve  # noqa: E402

OUT = Path(__file__).parent / "results"
REFERENCE = {"solver": "dopri8", "rtol": 1e-12, "atol": 1e-14}
REFERENCE_EVENTS = {"rtol": 1e-11, "atol": 1e-14}
EPS = np.finfo(float).eps
PAPERS = ("multistage", "deep-linear", "bias-plateau", "linear-teacher")
#: Runs repeated at a tighter tolerance (the calibration must not depend on rtol).
TIGHT = {"deep-linear": 1e-8, "bias-plateau": 1e-8}


def _split(problem, theta, t):
    a, w = theta["a"], theta["w"]
    return {
        "sum_a2": jnp.sum(a**2),
        "sum_w2": jnp.sum(w**2),
        "split": jnp.sum(a**2) - jnp.sum(w**2),
    }


def _cancellation_problem():
    rng = np.random.default_rng(0)
    m, d, n = 200, 5, 100
    x = rng.normal(size=(n, d))
    y = np.tanh(x @ rng.normal(size=d))
    w = 3.0 * rng.normal(size=(m, d)) / np.sqrt(d)
    a = np.sign(rng.normal(size=m)) * np.sqrt(np.sum(w**2, 1) + 1e-3)
    model = flows.models.TwoLayer(m=m, d=d, alpha=0.0)
    return flows.make_problem(model, flows.from_arrays(x, y), theta0={"a": a, "w": w})


def runs() -> list[tuple[str, object, object, dict, dict]]:
    """(label, solve, problem, keywords, reference keywords) of every run."""
    out = []
    for name in PAPERS:
        got = capture_first_solve(name)
        if got is None:
            continue
        solve, problem, kw = got
        kw = {k: v for k, v in kw.items() if k not in ("progress", "global_error")}
        if solve is flows.simulate_nonsmooth:
            out.append((f"{name} (event flow, tsit5)", solve, problem, kw, REFERENCE_EVENTS))
            continue
        for s in ("tsit5", "rock4"):
            out.append((f"{name} ({s})", solve, problem, kw | {"solver": s}, REFERENCE))
        if name in TIGHT:
            tight = kw | {"solver": "tsit5", "rtol": TIGHT[name], "atol": TIGHT[name] * 1e-3}
            out.append((f"{name} (tsit5, rtol {TIGHT[name]:g})", solve, problem, tight, REFERENCE))
    problem = _cancellation_problem()
    kw = {"t1": 5.0, "rtol": 1e-6, "atol": 1e-9, "n_save": 201, "observables": _split}
    for s in ("tsit5", "rock4"):
        label = f"Σa² − Σ‖w‖² ≈ 0.2 of terms ≈ 1800 ({s})"
        out.append((label, flows.simulate, problem, kw | {"solver": s}, REFERENCE))
    return out


def _per_save(est, true, ref):
    est, true, ref = (np.asarray(v, float) for v in (est, true, ref))
    if est.ndim > 1:
        axes = tuple(range(1, est.ndim))
        est, true, ref = est.max(axes), true.max(axes), ref.max(axes)
    return est, true, ref


def measure(label, solve, problem, kw, ref_kw) -> dict:
    t0 = time.perf_counter()
    run = solve(problem, **kw, global_error=True)
    ref = solve(problem, **(kw | ref_kw))
    ge = run.global_error
    assert ge is not None and not ge.missing, ge.missing if ge else "no estimate"
    cal = float(run.config["global_error"]["calibration"])
    pairs = []
    # a paper's error measures (a conserved quantity's drift, 0 for the exact flow): their
    # value is round-off, and so is their "true error"; the toolkit gives them no error bar
    measures = frozenset(getattr(kw.get("observables"), "error_measures", ()))
    for k, v in run.observables.items():
        if (
            k not in measures
            and k in ge.observables
            and k in ref.observables
            and np.shape(v) == np.shape(ref.observables[k])
        ):
            r = np.asarray(ref.observables[k], float)
            pairs.append(_per_save(ge.observables[k], np.abs(np.asarray(v, float) - r), np.abs(r)))
    for k, v in run.params.items():
        if k in ge.params and k in ref.params:
            r = np.asarray(ref.params[k], float)
            pairs.append(_per_save(ge.params[k], np.abs(np.asarray(v, float) - r), np.abs(r)))
    est = np.concatenate([p[0] for p in pairs])
    true = np.concatenate([p[1] for p in pairs])
    size = np.concatenate([p[2] for p in pairs])
    ok = (true > 0) & (true > 1e3 * EPS * size)
    ratio = est[ok] / true[ok]
    return {
        "run": label,
        "saves": int(ok.sum()),
        "left_out": int((~ok).sum()),
        "error_measures_left_out": sorted(measures & set(run.observables)),
        "coverage": float(np.mean(ratio >= 1)),
        "median_over": float(np.median(ratio)),
        "max_over": float(np.max(ratio)),
        "min_ratio": float(np.min(ratio)),
        "raw_median": float(np.median(ratio / cal)),
        "raw_p5": float(np.percentile(ratio / cal, 5)),
        "calibration": cal,
        "steps": int(run.stats["steps"]),
        "companion_steps": int(ge.companion.stats["steps"]) if ge.companion else None,
        "wall_s": time.perf_counter() - t0,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", default="", help="comma-separated substrings of run labels")
    args = ap.parse_args(argv)
    wanted = [w for w in args.runs.split(",") if w]
    rows = []
    for label, *rest in runs():
        if wanted and not any(w in label for w in wanted):
            continue
        try:
            rows.append(measure(label, *rest))
        except Exception as e:  # noqa: BLE001 - a run that fails is reported, not hidden
            rows.append({"run": label, "failed": f"{type(e).__name__}: {str(e)[:200]}"})
        print(rows[-1], flush=True)
    failed = [r for r in rows if "failed" in r]
    rows = [r for r in rows if "failed" not in r]
    pooled_cov = sum(r["coverage"] * r["saves"] for r in rows) / sum(r["saves"] for r in rows)
    lines = [
        "# Global-error estimate: does it cover the true error?",
        "",
        f"flows {flows.__version__}, {platform.machine()}, CPU. Estimate: |run − companion at "
        f"tolerances 10× tighter| × {error_calibration():.3g} (Richardson for a global error "
        f"proportional to the tolerance, ×10/9, times the safety factor {GLOBAL_ERROR_SAFETY:g}). "
        "True: |run − Dopri8 at rtol 1e-12| (the event flow: itself at rtol 1e-11). Per save "
        "and per observable / stored parameter (largest entry); saves with a true error of 0 "
        "or below 1000·eps·|value| left out (counted); a paper's error measures (a "
        "conserved quantity's drift: deep-linear `balance_drift`, multistage `w_perp_*`, "
        "round-off in value and in error) left out. Targets: coverage ≥ 95 %, median "
        "over-estimate ≤ 3×.",
        "",
        "| run | saves (left out) | coverage | median over-estimate | max over-estimate | "
        "raw difference / true: median, 5th percentile | steps (companion) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['saves']} ({r['left_out']}) | {100 * r['coverage']:.1f} % | "
            f"{r['median_over']:.2f} | {r['max_over']:.3g} | {r['raw_median']:.2f}, "
            f"{r['raw_p5']:.2f} | {r['steps']} ({r['companion_steps']}) |"
        )
    lines += [f"| {r['run']} | failed: {r['failed']} | | | | | |" for r in failed]
    lines += [
        "",
        f"Pooled coverage {100 * pooled_cov:.1f} % over {sum(r['saves'] for r in rows)} saves; "
        f"worst run {100 * min(r['coverage'] for r in rows):.1f} %; largest median "
        f"over-estimate {max(r['median_over'] for r in rows):.2f}×.",
    ]
    OUT.mkdir(exist_ok=True)
    if not wanted:
        (OUT / "global_error_coverage.md").write_text("\n".join(lines) + "\n")
        (OUT / "global_error_coverage.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
