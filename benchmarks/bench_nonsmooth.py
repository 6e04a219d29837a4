"""Benchmark: the exact flow through ReLU-family kinks (`flows.simulate_nonsmooth`) against
independent references, the smooth solver run through the kinks, and gradient descent.

One process, four problems (a fifth alone), each run once to compile and then timed:

1. linear-teacher, large init (k = 10, α = 0.1, init 1, 2-D symmetric Gaussians, n = 100),
   loss clock to t = 1e8: the event flow at rtol 1e-6 and the plain Tsit5 flow through the
   kinks (`flows.simulate`), both against the event flow at rtol 1e-9 (rtol × 1e-3).
2. outlier data (App. J, k = 10, init 1e-4, 60 points + outlier), loss clock to t = 1e5:
   the same three, the plain flow with a step budget (it stalls in the sliding mode).
3. deep ReLU net (depth 4, width 16, output bias, δ = 1e-3) on 8×8 digits (10 per class),
   to t = `--deep-t1` (default 5; its full horizon is case 4): the event flow at rtol
   1e-3 … 1e-6 and GD at η = 0.05, 0.0125, 0.003125, all against the event flow at rtol
   1e-10: error in θ, evaluations, wall.
4. (`--only-digits`, into `nonsmooth_digits.*`) the same net to the check's horizon
   t = `--digits-t1` (80): event flow at rtol 1e-6 and GD at the three η against the event
   flow at rtol 1e-9, both in the max norm, θ saved at 41 times.
5. the bias-plateau check's deep ReLU net (same shape, §4 data) to its horizon
   t = `--synthetic-t1` (150): the event flow at rtol 1e-6 and 1e-7 (the step size
   controlled in the RMS and in the max norm), GD at the same three
   η and the smoothed net σ_ε (`--eps`, Kvaerno5 rtol 1e-9) against the event flow at
   rtol 1e-9 (`--only-synthetic` runs this case alone, into `nonsmooth_synthetic.*`).

Errors: max|Δθ| / max|θ| at t1 (and, case 4, its maximum over the save times), and max
over save times of |ΔL| / L. Writes
`benchmarks/results/nonsmooth.md` and `.json`.

    python benchmarks/bench_nonsmooth.py [--deep-t1 5] [--synthetic-t1 150] [--eps 1e-2,1e-3]
        [--skip-synthetic] [--only-synthetic] [--only-digits [--digits-t1 80]]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import numpy as np

import flows
from flows.experiments import bias_plateau as bp
from flows.experiments import linear_teacher as lt
from flows.models import DeepFCN, LeakyReLUNet


def theta(tr) -> np.ndarray:
    return np.concatenate([tr.param(k).ravel() for k in sorted(tr.params)])


def errors(tr, ref) -> tuple[float, float, float]:
    """(max|Δθ|/max|θ| at t1, the same maximized over the save times where both runs
    stored θ at the same times (else nan), max over save times of |ΔL|/L)."""
    th, th_ref = theta(tr), theta(ref)
    e_theta = float(np.max(np.abs(th - th_ref)) / np.max(np.abs(th_ref)))
    n = min(len(tr.loss), len(ref.loss))
    e_loss = float(np.max(np.abs(tr.loss[:n] - ref.loss[:n]) / np.abs(ref.loss[:n])))
    e_theta_t = float("nan")
    if len(tr.param_times) > 2 and np.array_equal(tr.param_times, ref.param_times):
        e_theta_t = max(
            float(np.max(np.abs(theta_at(tr, i) - (r := theta_at(ref, i)))) / np.max(np.abs(r)))
            for i in range(1, len(ref.param_times))
        )
    return e_theta, e_theta_t, e_loss


def theta_at(tr, i: int) -> np.ndarray:
    return np.concatenate([tr.params[k][i].ravel() for k in sorted(tr.params)])


def timed(fn):
    fn()  # compile
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def row(name, tr, wall, ref) -> dict:
    s = tr.stats
    ok = s.ok
    e_th, e_tht, e_l = errors(tr, ref) if ok else (float("nan"),) * 3
    return {
        "run": name,
        "result": s["result"] if ok else s.reason[:60],
        "t_reached": s["t_reached"],
        "steps": s["steps"],
        "rejected_share": s["rejected_steps"] / max(s["steps"], 1),
        "vf_evals": s["vf_evals"],
        "wall_s": wall,
        "err_theta": e_th,
        "err_theta_max_t": e_tht,
        "err_loss": e_l,
        "crossings": s.to_dict().get("crossings", -1),
        "sliding_entries": s.to_dict().get("sliding_entries", -1),
    }


def teacher_case(name, data, init, t1):
    model = LeakyReLUNet(k=10, d=2, slope=0.1, init_scale=init)
    pb = flows.make_problem(model, data.train, key=0, loss_fn=flows.logistic)
    ts = flows.log_save_times(t1, 41, first=0.1)
    kw = dict(t1=t1, ts=ts, clock="loss", save_params="all")
    ref = flows.simulate_nonsmooth(pb, rtol=1e-9, atol=1e-12, **kw)
    rows = []
    tr, wall = timed(lambda: flows.simulate_nonsmooth(pb, rtol=1e-6, atol=1e-9, **kw))
    rows.append(row(f"{name}: event flow, rtol 1e-6", tr, wall, ref))
    tr, wall = timed(
        lambda: flows.simulate(
            pb, rtol=1e-6, atol=1e-9, max_steps=20_000, throw=False, count_evals=False, **kw
        )
    )
    rows.append(row(f"{name}: Tsit5 through the kinks, rtol 1e-6", tr, wall, ref))
    return rows


def deep_case(t1: float) -> list[dict]:
    data = bp.digits_data("train", n_per_class=10)
    model = DeepFCN(d=data.d, k=10, depth=4, width=16, activation="relu", delta=1e-3)
    pb = flows.make_problem(model, data, key=0, loss_fn=bp.class_sum_cross_entropy)
    ref = flows.simulate_nonsmooth(pb, t1=t1, n_save=11, rtol=1e-10, atol=1e-13, throw=False)
    assert ref.stats.ok, f"reference failed: {ref.stats.reason}"
    rows = []
    for rtol in (1e-3, 1e-4, 1e-6):
        tr, wall = timed(
            lambda r=rtol: flows.simulate_nonsmooth(
                pb, t1=t1, n_save=11, rtol=r, atol=r * 1e-3, throw=False
            )
        )
        rows.append(row(f"deep ReLU: event flow, rtol {rtol:g}", tr, wall, ref))
    for eta in (0.05, 0.0125, 0.003125):
        tr, wall = timed(
            lambda e=eta: flows.gradient_descent(pb, learning_rate=e, t1=t1, n_save=11)
        )
        rows.append(row(f"deep ReLU: GD η = {eta:g}", tr, wall, ref))
    return rows


def synthetic_deep_case(t1: float, eps: tuple[float, ...]) -> list[dict]:
    """The bias-plateau check's deep ReLU net (depth 4, width 16, δ = 1e-3, §4 data) to
    its horizon: the event flow at rtol 1e-6 and 1e-7, GD at three η and the smoothed net
    σ_ε (Kvaerno5, rtol 1e-9) against the event flow at rtol 1e-9."""
    from flows.experiments.bias_plateau.config import Config
    from flows.experiments.bias_plateau.runs import RELU_MAX_KINKS, synthetic_deep_data

    cfg = Config()
    data = synthetic_deep_data(cfg, cfg.seed)
    model = DeepFCN(d=data.d, k=cfg.k, depth=4, width=16, activation="relu", delta=1e-3)
    pb = flows.make_problem(model, data, key=cfg.seed, loss_fn=bp.class_sum_cross_entropy)
    kinks = dict(slots=RELU_MAX_KINKS)

    def event(rtol, t, norm="rms"):
        return flows.simulate_nonsmooth(
            pb,
            t1=t,
            n_save=31,
            rtol=rtol,
            atol=rtol * 1e-3,
            throw=False,
            save_params="all",
            error_norm=norm,
            **kinks,
        )

    def timed_t1(fn):
        fn(1.0)  # compile (the horizon is data, not structure)
        start = time.perf_counter()
        out = fn(t1)
        return out, time.perf_counter() - start

    ref = event(1e-9, t1)
    assert ref.stats.ok, f"reference failed: {ref.stats.reason}"
    rows = []
    for norm in ("rms", "max"):
        for rtol in (1e-6, 1e-7):
            tr, wall = timed_t1(lambda t, r=rtol, nm=norm: event(r, t, nm))
            name = f"deep ReLU §4 data to t = {t1:g}: event flow, rtol {rtol:g}, {norm} norm"
            rows.append(row(name, tr, wall, ref))
            print(rows[-1], flush=True)
    for eta in (0.05, 0.0125, 0.003125):
        tr, wall = timed_t1(
            lambda t, e=eta: flows.gradient_descent(
                pb, learning_rate=e, t1=t, n_save=31, save_params="all"
            )
        )
        rows.append(row(f"deep ReLU §4 data to t = {t1:g}: GD η = {eta:g}", tr, wall, ref))
        print(rows[-1], flush=True)
    for e in eps:
        smooth = flows.make_problem(
            DeepFCN(
                d=data.d, k=cfg.k, depth=4, width=16, activation="relu", delta=1e-3, smoothing=e
            ),
            data,
            theta0=pb.theta0,
            loss_fn=bp.class_sum_cross_entropy,
        )
        tr, wall = timed_t1(
            lambda t, sp=smooth: flows.simulate(
                sp, t1=t, n_save=31, rtol=1e-9, atol=1e-12, solver="kvaerno5", throw=False
            )
        )
        rows.append(row(f"deep ReLU §4 data to t = {t1:g}: smoothed ε = {e:g}", tr, wall, ref))
        print(rows[-1], flush=True)
    return rows


def digits_deep_case(t1: float) -> list[dict]:
    """The deep ReLU net of case 3 (digits, depth 4, width 16) to the check's horizon
    (`digits_t1` = 80), as the bias-plateau experiment runs it (`exact_relu_flow`: max
    norm, 32 pair slots to start with, doubled when more pairs meet a kink at once): the
    event flow at rtol 1e-6 and GD at three η against the same flow at rtol 1e-9, θ saved
    at 41 times. Event-flow wall excludes compilation (`stats.wall_s`; the slots grow
    mid-run, a second compilation)."""
    from flows.experiments.bias_plateau.config import Config
    from flows.experiments.bias_plateau.runs import RELU_MAX_KINKS

    cfg = Config()
    data = bp.digits_data("train", n_per_class=cfg.digits_n_per_class)
    model = DeepFCN(d=data.d, k=10, depth=4, width=16, activation="relu", delta=cfg.deep_delta)
    pb = flows.make_problem(model, data, key=cfg.seed, loss_fn=bp.class_sum_cross_entropy)

    def event(rtol):
        return flows.simulate_nonsmooth(
            pb,
            t1=t1,
            n_save=41,
            rtol=rtol,
            atol=rtol * 1e-3,
            throw=False,
            save_params="all",
            error_norm="max",
            slots=RELU_MAX_KINKS,
        )

    ref = event(1e-9)
    assert ref.stats.ok, f"reference failed: {ref.stats.reason}"
    name = f"deep ReLU digits to t = {t1:g}"
    tr = event(1e-6)
    rows = [row(f"{name}: event flow, rtol 1e-6, max norm", tr, tr.stats.wall_s, ref)]
    rows[-1]["slot_growth"] = tr.stats["slot_growth"]
    print(rows[-1], flush=True)
    for eta in (0.05, 0.0125, 0.003125):
        tr, wall = timed(
            lambda e=eta: flows.gradient_descent(
                pb, learning_rate=e, t1=t1, n_save=41, save_params="all"
            )
        )
        rows.append(row(f"{name}: GD η = {eta:g}", tr, wall, ref))
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--deep-t1", type=float, default=5.0)
    ap.add_argument(
        "--synthetic-t1", type=float, default=150.0, help="the §4 deep ReLU net's horizon"
    )
    ap.add_argument("--eps", default="1e-2,1e-3", help="smoothing ε values ('' for none)")
    ap.add_argument("--only-synthetic", action="store_true", help="run the §4 deep ReLU case alone")
    ap.add_argument("--digits-t1", type=float, default=80.0, help="the digits net's horizon")
    ap.add_argument(
        "--only-digits", action="store_true", help="run the digits net to its horizon alone"
    )
    ap.add_argument("--skip-synthetic", action="store_true", help="leave out the §4 deep ReLU case")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "nonsmooth"))
    args = ap.parse_args()
    eps = tuple(float(e) for e in args.eps.split(",") if e.strip())
    if args.only_digits:
        write(digits_deep_case(args.digits_t1), Path(args.out + "_digits"))
        return
    if args.only_synthetic:
        write(synthetic_deep_case(args.synthetic_t1, eps), Path(args.out + "_synthetic"))
        return
    rows = []
    rows += teacher_case("large init", lt.symmetric_gaussians(100, 2, seed=0), 1.0, 1e8)
    for r in rows:
        print(r, flush=True)
    outlier = lt.antipodal_with_outlier(60, 2, outlier=np.asarray((-1.0, 3.0)))
    rows += teacher_case("outlier", outlier, 1e-4, 1e5)
    for r in rows[2:]:
        print(r, flush=True)
    deep = deep_case(args.deep_t1)
    for r in deep:
        print(r, flush=True)
    rows += deep
    if not args.skip_synthetic:
        rows += synthetic_deep_case(args.synthetic_t1, eps)
    write(rows, Path(args.out))


def write(rows: list[dict], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = {"machine": platform.platform(), "processor": platform.processor()}
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    cols = list(rows[0])
    lines = [
        "# Exact flow through kinks: event flow vs Tsit5 through the kinks vs GD",
        "",
        f"{meta['machine']}; errors against the event flow at a 1000× tighter rtol "
        "(linear teacher), rtol 1e-10 (deep ReLU, digits, to t = 5) or rtol 1e-9 (deep "
        "ReLU, §4 data and digits, to the bias-plateau check's horizons). Walls exclude "
        "compilation; measured on a shared 2-core machine (other jobs running).",
        "",
        "| " + " | ".join(cols) + " |",
        "|" + "---|" * len(cols),
    ]
    for r in rows:
        lines.append(
            "| "
            + " | ".join(f"{v:.3g}" if isinstance(v, float) else str(v) for v in r.values())
            + " |"
        )
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {out.with_suffix('.md')}")


if __name__ == "__main__":
    main()
