"""Benchmark: the event flow's cost per gradient against a gradient-descent step (issue 49,
item 5: "≤ 3× a GD step per gradient").

One process; per problem, rounds interleaved (event flow, then GD on the same problem), the
median of the rounds reported:

- teacher nets (`bench_nonsmooth`'s cases 1–2: leaky ReLU, k = 10, loss clock, rtol 1e-6):
  large init (100 samples, to t = 1e8, no sliding) and outlier data (61 samples, to
  t = 1e5, sliding);
- the bias-plateau check's digits deep ReLU net (depth 4, width 16, 100 samples: 4800 pairs, rtol
  1e-6, max norm, its slots) to t = 5, 20 and 40 (from t ≈ 35 up to 14 pairs slide).

Per run: steps, events, margin evaluations per event (`root_evals`), field evaluations
(6 per Tsit5 step + 1 per event, `stats.vf_evals`), wall (compilation excluded,
`stats.wall_s`), µs per field evaluation, GD's µs per step (`flows.gradient_descent`,
η = horizon / 5000 steps on the physical clock, 1e-3 on the digits net), and their ratio.
Writes `benchmarks/results/event_step.md` and `.json`.

    python benchmarks/bench_event_step.py [--rounds 3] [--digits-t 5,20,40]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np

import flows
from flows.experiments import bias_plateau as bp
from flows.experiments import linear_teacher as lt
from flows.experiments.bias_plateau.config import Config
from flows.experiments.bias_plateau.runs import RELU_MAX_KINKS
from flows.models import DeepFCN, LeakyReLUNet


def teacher(data, init: float, t1: float):
    model = LeakyReLUNet(k=10, d=2, slope=0.1, init_scale=init)
    pb = flows.make_problem(model, data.train, key=0, loss_fn=flows.logistic)
    kw = dict(t1=t1, ts=flows.log_save_times(t1, 41, first=0.1), clock="loss", save_params="all")
    return pb, lambda: flows.simulate_nonsmooth(pb, rtol=1e-6, atol=1e-9, **kw)


def digits(t1: float):
    cfg = Config()
    data = bp.digits_data("train", n_per_class=cfg.digits_n_per_class)
    model = DeepFCN(d=data.d, k=10, depth=4, width=16, activation="relu", delta=cfg.deep_delta)
    pb = flows.make_problem(model, data, key=cfg.seed, loss_fn=bp.class_sum_cross_entropy)
    return pb, lambda: flows.simulate_nonsmooth(
        pb, t1=t1, n_save=41, rtol=1e-6, atol=1e-9, throw=False, save_params="all",
        error_norm="max", slots=RELU_MAX_KINKS,
    )  # fmt: skip


def gd_step_us(pb, eta: float, steps: int) -> float:
    start = time.perf_counter()
    flows.gradient_descent(pb, learning_rate=eta, t1=eta * steps, n_save=11)
    return 1e6 * (time.perf_counter() - start) / steps


def measure(name: str, pb, event, eta: float, rounds: int) -> dict:
    start = time.perf_counter()
    tr = event()  # compiles
    first_call_s = time.perf_counter() - start
    gd_step_us(pb, eta, 5000)  # compiles
    walls, gds = [], []
    for _ in range(rounds):
        tr = event()
        walls.append(tr.stats["wall_s"])
        gds.append(gd_step_us(pb, eta, 5000))
    s = tr.stats.to_dict()
    wall, gd = statistics.median(walls), statistics.median(gds)
    per_eval = 1e6 * wall / s["vf_evals"]
    row = {
        "run": name,
        "result": s["result"],
        "steps": s["steps"],
        "events": s["events"],
        "sliding_entries": s.get("sliding_entries", 0),
        "root_evals_per_event": s["root_evals"] / max(s["events"], 1),
        "vf_evals": s["vf_evals"],
        "wall_s": wall,
        "walls_s": walls,
        "first_call_s": first_call_s,
        "us_per_eval": per_eval,
        "gd_us_per_step": gd,
        "ratio": per_eval / gd,
    }
    print(
        f"{name}: {row['steps']} steps, {row['events']} events, "
        f"{row['root_evals_per_event']:.1f} margin evaluations per event, wall {wall:.3f} s, "
        f"{per_eval:.1f} µs per evaluation, GD {gd:.2f} µs per step: {row['ratio']:.2f}×",
        flush=True,
    )
    return row


def write(rows: list[dict], rounds: int, out: Path) -> None:
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {platform.system()}",
        "python": platform.python_version(),
        "rounds": rounds,
    }
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    lines = [
        "# The event flow's cost per gradient against a gradient-descent step",
        "",
        f"Written by `python benchmarks/bench_event_step.py` ({meta['date']}, "
        f"{meta['machine']}, Python {meta['python']}). Median of {rounds} rounds, event "
        "flow and GD interleaved on the same problem in one process; walls exclude "
        "compilation (first call: trace, compile and one run). Evaluations: 6 per Tsit5 "
        "step and 1 per event (the margins, root finding and the decision's solves are "
        "not counted in them: they are what the ratio carries).",
        "",
        "| run | steps | events | sliding entries | margin evals / event | field evals "
        "| wall s | µs / eval | GD µs / step | ratio | first call s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['steps']} | {r['events']} | {r['sliding_entries']} "
            f"| {r['root_evals_per_event']:.1f} | {r['vf_evals']} | {r['wall_s']:.3g} "
            f"| {r['us_per_eval']:.1f} | {r['gd_us_per_step']:.2f} | **{r['ratio']:.2f}×** "
            f"| {r['first_call_s']:.1f} |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--digits-t", default="5,20,40", help="the digits net's horizons")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "event_step"))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be ≥ 1")
    try:
        horizons = [float(t) for t in args.digits_t.split(",") if t.strip()]
    except ValueError:
        ap.error(f"--digits-t must be comma-separated numbers; got {args.digits_t!r}")
    rows = []
    large = lt.symmetric_gaussians(100, 2, seed=0)
    pb, ev = teacher(large, 1.0, 1e8)
    rows.append(measure("teacher net, large init", pb, ev, 1e-2, args.rounds))
    outlier = lt.antipodal_with_outlier(60, 2, outlier=np.asarray((-1.0, 3.0)))
    pb, ev = teacher(outlier, 1e-4, 1e5)
    rows.append(measure("teacher net, outlier", pb, ev, 1e-2, args.rounds))
    for t1 in horizons:
        pb, ev = digits(t1)
        rows.append(measure(f"digits deep ReLU to t = {t1:g}", pb, ev, 1e-3, args.rounds))
    write(rows, args.rounds, Path(args.out))


if __name__ == "__main__":
    main()
