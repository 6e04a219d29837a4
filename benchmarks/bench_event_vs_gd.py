"""Event flow against gradient descent at matched error, measured at several horizons.

The net is the bias-plateau check's digits deep ReLU net (depth 4, width 16, output bias,
δ = 1e-3, 10 digits per class), run as the check runs it (`exact_relu_flow`: max norm,
`RELU_MAX_KINKS` pair slots to start with). For each horizon t in `--horizons`:

- the event flow at rtol 1e-6 (atol 1e-9) is run to t (one compiled program: the horizon
  is data), its wall (`stats.wall_s`, compilation excluded) and θ error at t measured;
- gradient descent is run to the largest horizon at η = 0.0125, then η/4, η/16, … (θ saved
  at every horizon), until at every horizon some η has reached the event flow's error or
  the next run would exceed `--gd-budget` seconds (or at the step sizes of `--etas`, every
  one of them, largest first: a longer ladder step where the 4× ladder's next run is
  beyond the budget but a smaller one is not); GD's wall to t is its wall to the
  largest horizon × t/T (a GD step costs the same all along the run: its wall per step
  is in the table).

Errors: max|Δθ| / max|θ| at t against the event flow at rtol 1e-10 (atol 1e-13), one run
to the largest horizon saving θ at every horizon.

At each horizon the ratio is **measured** where some GD run reached the event flow's error
(GD wall of the largest such η / event-flow wall: an upper bound on GD's cost at matched
error, the next larger η, which did not reach it, a lower bound), and a **measured lower
bound** where none did (the wall of the smallest η run: GD needs more). Beside it, the
first-order estimate (GD's error ∝ η, from its last two runs) of GD's wall at matched
error, labelled as an estimate.

Writes `benchmarks/results/event_vs_gd.md` and `.json`.

    python benchmarks/bench_event_vs_gd.py [--horizons 5,10,20,40] [--gd-budget 900]
        [--etas 0.0125,0.003125,...]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import numpy as np

import flows
from flows.experiments import bias_plateau as bp
from flows.models import DeepFCN

OUT = Path(__file__).parent / "results" / "event_vs_gd"
RTOL, REF_RTOL, ETA0 = 1e-6, 1e-10, 0.0125
COLUMNS = (
    "t", "event-flow error", "event-flow wall s", "GD η", "GD error", "GD wall s",
    "GD wall / event wall", "GD order (last two)", "first-order estimate",
)  # fmt: skip
HEADER = "| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS)


def theta_at(tr, i: int) -> np.ndarray:
    return np.concatenate([np.asarray(tr.params[k][i]).ravel() for k in sorted(tr.params)])


def rel_err(th: np.ndarray, ref: np.ndarray) -> float:
    return float(np.max(np.abs(th - ref)) / np.max(np.abs(ref)))


def problem():
    from flows.experiments.bias_plateau.config import Config

    cfg = Config()
    data = bp.digits_data("train", n_per_class=cfg.digits_n_per_class)
    model = DeepFCN(
        d=data.d, k=10, depth=4, width=cfg.digits_width, activation="relu", delta=cfg.deep_delta
    )
    return flows.make_problem(model, data, key=cfg.seed, loss_fn=bp.class_sum_cross_entropy)


def event(pb, rtol: float, t1: float, ts=None):
    from flows.experiments.bias_plateau.runs import RELU_MAX_KINKS

    tr = flows.simulate_nonsmooth(
        pb,
        t1=t1,
        ts=ts if ts is not None else np.asarray([0.0, t1]),
        rtol=rtol,
        atol=rtol * 1e-3,
        throw=False,
        save_params="all",
        error_norm="max",
        slots=RELU_MAX_KINKS,
    )
    if not tr.stats.ok:
        raise SystemExit(f"event flow at rtol {rtol:g} to t = {t1:g} failed: {tr.stats.reason}")
    return tr


def run(horizons: tuple[float, ...], gd_budget: float, etas: tuple[float, ...] = ()) -> dict:
    pb = problem()
    T = max(horizons)
    ts = np.asarray([0.0, *horizons])
    start = time.perf_counter()
    ref = event(pb, REF_RTOL, T, ts)
    ref_wall = time.perf_counter() - start
    ref_theta = {h: theta_at(ref, i + 1) for i, h in enumerate(horizons)}
    print(f"reference rtol {REF_RTOL:g} to t = {T:g}: {ref_wall:.0f} s", flush=True)

    ev = {}
    event(pb, RTOL, min(horizons))  # compile
    for h in horizons:
        tr = event(pb, RTOL, h)
        s = tr.stats
        ev[h] = {
            "wall_s": s.wall_s,
            "err": rel_err(theta_at(tr, 1), ref_theta[h]),
            "steps": s["steps"],
            "vf_evals": s["vf_evals"],
        }
        print(f"event flow to t = {h:g}: {ev[h]}", flush=True)

    # GD's save times must include every horizon: T/η a multiple of the save spacing
    spacing = math.gcd(*(round(h * 1000) for h in (T, *horizons))) / 1000
    n_save = round(T / spacing) + 1
    ladder = sorted(etas, reverse=True)
    gd, eta = [], ladder.pop(0) if ladder else ETA0
    while True:
        tr = flows.gradient_descent(pb, learning_rate=eta, t1=T, n_save=n_save, save_params="all")
        times = np.asarray(tr.param_times)
        errs = {}
        for h in horizons:
            (i,) = np.flatnonzero(np.isclose(times, h, rtol=0, atol=eta / 2))
            errs[h] = rel_err(theta_at(tr, int(i)), ref_theta[h])
        wall = tr.stats.wall_s
        gd.append(
            {
                "eta": eta,
                "steps": tr.stats["steps"],
                "wall_s": wall,
                "err": errs,
                "wall_per_step_us": 1e6 * wall / tr.stats["steps"],
            }
        )
        print(f"GD η = {eta:g}: {wall:.1f} s, errors {errs}", flush=True)
        if etas:  # an explicit ladder: run every step size
            if not ladder:
                break
            eta = ladder.pop(0)
            continue
        matched = all(any(g["err"][h] <= ev[h]["err"] for g in gd) for h in horizons)
        if matched or 4 * wall > gd_budget:
            break
        eta /= 4

    rows = []
    for h in horizons:
        target, ev_wall = ev[h]["err"], ev[h]["wall_s"]
        reached = [g for g in gd if g["err"][h] <= target]
        missed = [g for g in gd if g["err"][h] > target]
        row = {"t": h, "event_wall_s": ev_wall, "event_err": target}
        # the largest η that reached it (the cheapest measured), else the smallest η run
        g, kind = (reached[0], "measured") if reached else (missed[-1], "lower bound")
        row |= {
            "gd_eta": g["eta"],
            "gd_err": g["err"][h],
            "gd_wall_s": g["wall_s"] * h / T,
            "ratio": g["wall_s"] * h / T / ev_wall,
            "kind": kind,
        }
        if reached and missed:  # the next larger η missed: GD's cost lies between the two
            row["ratio_low"] = missed[-1]["wall_s"] * h / T / ev_wall
        if len(gd) >= 2:  # first-order estimate from GD's last two runs at this horizon
            e1, e2 = gd[-2]["err"][h], gd[-1]["err"][h]
            step = math.log(gd[-2]["eta"] / gd[-1]["eta"])
            row["gd_order"] = math.log(e1 / e2) / step if e1 > 0 and e2 > 0 else math.nan
            last = gd[-1]
            need = last["err"][h] / target  # η smaller by this, at first order
            row["ratio_first_order"] = last["wall_s"] * max(need, 0) * h / T / ev_wall
        rows.append(row)
    return {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {__import__('os').cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "horizons": list(horizons),
        "reference": {"rtol": REF_RTOL, "wall_s": ref_wall},
        "event_rtol": RTOL,
        "event": {str(h): v for h, v in ev.items()},
        "gd_ladder": "explicit (--etas)" if etas else "0.0125 ÷ 4 until matched or over budget",
        "gd": [{**g, "err": {str(h): e for h, e in g["err"].items()}} for g in gd],
        "rows": rows,
    }


def render(res: dict) -> str:
    def f(v):
        return "—" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.3g}"

    gd_rows = "\n".join(
        f"| {g['eta']:.4g} | {g['steps']} | {g['wall_s']:.1f} | {g['wall_per_step_us']:.1f} | "
        + " | ".join(f"{g['err'][str(h)]:.2e}" for h in res["horizons"])
        + " |"
        for g in res["gd"]
    )
    rows = "\n".join(
        f"| {r['t']:g} | {r['event_err']:.2e} | {r['event_wall_s']:.2f} | {r['gd_eta']:.3g} | "
        f"{r['gd_err']:.2e} | {r['gd_wall_s']:.1f} | **{r['ratio']:.3g}×** ({r['kind']}"
        + (f"; ≥ {r['ratio_low']:.3g}×" if "ratio_low" in r else "")
        + f") | {f(r.get('gd_order'))} | {f(r.get('ratio_first_order'))}× |"
        for r in res["rows"]
    )
    hs = res["horizons"]
    return f"""# Event flow against gradient descent at matched error, by horizon

Generated by `benchmarks/bench_event_vs_gd.py` on {res["date"]} ({res["machine"]}). The
bias-plateau check's digits deep ReLU net; errors max|Δθ| / max|θ| at t against the event
flow at rtol {res["reference"]["rtol"]:g} ({res["reference"]["wall_s"]:.0f} s to t =
{max(hs):g}); the event flow at rtol {res["event_rtol"]:g}, max norm, compilation excluded.

## Gradient descent, to t = {max(hs):g} (θ error at each horizon)

| η | steps | wall s | µs / step | {" | ".join(f"error at t = {h:g}" for h in hs)} |
|---|---|---|---|{"---|" * len(hs)}
{gd_rows}

## Wall at matched error

GD's wall to t is its wall to t = {max(hs):g} × t/{max(hs):g}. "measured": the largest η
whose error at t is ≤ the event flow's (after "≥", the ratio for the next larger η, which
did not reach it: GD's true cost at matched error lies between); "lower bound": no GD run
reached the event flow's error, the smallest η's ratio is a measured lower bound. The last
column is an estimate: GD's last run carried to the event flow's error at first order
(error ∝ η; the order seen between its last two runs beside it).

{HEADER}
{rows}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--horizons", default="5,10,20,40", help="times t (comma-separated)")
    ap.add_argument(
        "--gd-budget", type=float, default=900.0, help="longest GD run, seconds (default 900)"
    )
    ap.add_argument(
        "--etas",
        default="",
        help="GD step sizes to run, every one (comma-separated; default: "
        "0.0125, then ÷4 until matched or over budget)",
    )
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    horizons = tuple(sorted(float(h) for h in args.horizons.split(",")))
    etas = tuple(float(e) for e in args.etas.split(",") if e.strip())
    res = run(horizons, args.gd_budget, etas)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    out.with_suffix(".md").write_text(render(res))
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
