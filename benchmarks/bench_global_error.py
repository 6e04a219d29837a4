"""How good and how costly `simulate(…, global_error=True)` is, on the papers' default runs.

For each paper, the first solve that `flows simulate <paper>` makes (`flows.simulate` for
the smooth flows, `flows.simulate_nonsmooth` for linear-teacher's leaky-ReLU net) is
captured (problem and settings) and solved three ways, side by side in one process:

1. as the paper solves it, with `global_error=True` (the estimate: the difference from a
   companion solve at tolerances 10× tighter; `cost` = (plain + companion) / plain run
   wall time, compiled programs warm);
2. a reference: for the smooth flows by an independent method, Dopri8 at rtol 1e-12,
   atol 1e-14; for the event flow (one integrator: its Tsit5 between located switches)
   the same flow at rtol 1e-11, atol 1e-14. The true global error of 1 is its
   difference from this.

Reported per run: the largest estimate and the largest true error over the save times,
for the loss and for the stored parameters, their ratio (target: within a factor 3) and
the cost (target ≤ 2.5); the cost is the median of three timings.

Writes `benchmarks/results/global_error.md` and `global_error.json`.

    python benchmarks/bench_global_error.py [--papers multistage,deep-linear,bias-plateau]
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

import flows
from flows.experiments import EXPERIMENTS

OUT = Path(__file__).parent / "results"
REFERENCE = {"solver": "dopri8", "rtol": 1e-12, "atol": 1e-14}
REFERENCE_EVENTS = {"rtol": 1e-11, "atol": 1e-14}
REPEATS = 3
# A run small enough for a benchmark; the paper's own default where it is already small.
OPTIONS = {
    "multistage": {"m": 1000},
    "deep-linear": {},
    "bias-plateau": {},
    "linear-teacher": {},
}


def capture_first_solve(name: str) -> tuple[object, flows.Problem, dict] | None:
    """(solve function, problem, keyword arguments) of the first `flows.simulate` or
    `flows.simulate_nonsmooth` call that `flows simulate <name>` makes; None when none."""
    originals = {"simulate": flows.simulate, "simulate_nonsmooth": flows.simulate_nonsmooth}
    seen: list = []

    class Captured(Exception):
        pass

    def recorder(fn):
        def record(problem, **kw):
            seen.append((fn, problem, kw))
            raise Captured

        return record

    patched = []
    for mod in list(sys.modules.values()):
        if not getattr(mod, "__name__", "").startswith("flows.experiments"):
            continue
        for attr, fn in originals.items():
            if getattr(mod, attr, None) is fn:
                setattr(mod, attr, recorder(fn))
                patched.append((mod, attr, fn))
    try:
        EXPERIMENTS[name].simulate(OPTIONS.get(name, {}))
    except Captured:
        pass
    finally:
        for mod, attr, fn in patched:
            setattr(mod, attr, fn)
    return seen[0] if seen else None


def measure(name: str) -> dict:
    got = capture_first_solve(name)
    if got is None:
        return {"paper": name, "skipped": "no flows.simulate / simulate_nonsmooth call"}
    solve, problem, kw = got
    kw = {k: v for k, v in kw.items() if k not in ("progress", "global_error")}
    events = solve is flows.simulate_nonsmooth
    solve(problem, **kw)  # compile (and warm) the program
    costs = []
    for _ in range(REPEATS):
        run = solve(problem, **kw, global_error=True)
        costs.append(run.global_error.cost)
    ref = solve(problem, **(kw | (REFERENCE_EVENTS if events else REFERENCE)))
    ge = run.global_error
    assert ge is not None and not ge.missing, ge.missing if ge else "no estimate"
    true_loss = np.abs(run.observables["loss"] - ref.observables["loss"])
    true_par = max(float(np.max(np.abs(run.params[k] - ref.params[k]))) for k in run.params)
    est_par = max(ge.max_param(k) for k in run.params)
    return {
        "paper": name,
        "flow": "event flow (simulate_nonsmooth)" if events else "smooth (simulate)",
        "reference": REFERENCE_EVENTS if events else REFERENCE,
        "settings": {k: str(v) for k, v in kw.items() if k not in ("observables", "ts")},
        "loss_estimate": ge.max("loss"),
        "loss_true": float(np.max(true_loss)),
        "loss_ratio": ge.max("loss") / float(np.max(true_loss)),
        "param_estimate": est_par,
        "param_true": true_par,
        "param_ratio": est_par / true_par,
        "cost": float(np.median(costs)),
        "costs": costs,
        "steps": int(run.stats["steps"]),
        "companion_steps": int(ge.companion.stats["steps"]) if ge.companion else None,
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--papers", default=",".join(OPTIONS))
    args = ap.parse_args(argv)
    rows = [measure(n) for n in args.papers.split(",")]
    lines = [
        "# Global-error estimate (`simulate(…, global_error=True)`)",
        "",
        f"flows {flows.__version__}, {platform.machine()}, CPU. Estimate: difference from a "
        "companion solve at tolerances 10× tighter. True: difference from Dopri8 at rtol "
        "1e-12 (the event flow: itself at rtol 1e-11). Largest over the save times; "
        "parameters: largest over every stored entry. Cost: (run + companion) / run wall "
        f"time, programs compiled, median of {REPEATS}.",
        "",
        "| paper | loss: estimate / true (ratio) | θ: estimate / true (ratio) | cost | steps "
        "(companion) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        if "skipped" in r:
            lines.append(f"| {r['paper']} | {r['skipped']} | | | |")
            continue
        lines.append(
            f"| {r['paper']} | {r['loss_estimate']:.2e} / {r['loss_true']:.2e} "
            f"({r['loss_ratio']:.2f}) | {r['param_estimate']:.2e} / {r['param_true']:.2e} "
            f"({r['param_ratio']:.2f}) | {r['cost']:.2f} | {r['steps']} "
            f"({r['companion_steps']}) |"
        )
    OUT.mkdir(exist_ok=True)
    (OUT / "global_error.md").write_text("\n".join(lines) + "\n")
    (OUT / "global_error.json").write_text(json.dumps(rows, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
