"""Benchmark: the two-layer gradient field against its floor (one tanh per sample and neuron),
autodiff and fused, with each compiled program's memory, against the width m.

The floor is the least work any ∇L of f(x) = Σ_k a_k tanh(w_k x) must do: one tanh per
sample and neuron (n·m of them), here `Σ tanh(X Wᵀ)`. Each field is timed as a solve uses
it, inside one compiled loop of 10 evaluations (`jax.lax.fori_loop`, the parameters moved
a little each time so nothing is hoisted), in rounds that interleave the variants (this
machine is shared: ratios within a round are what count; the median over rounds is
reported). Variants, all through `flows.make_problem` on the paper's data (n = 1000, d = 1,
f₁), float64:
- `floor`: Σ tanh(X Wᵀ);
- `autodiff` / `fused`: one gradient, `vector_field='autodiff'` / `'fused'`;
- `hvp autodiff` / `hvp fused`: one Hessian-vector product (`jax.jvp` of the gradient: what
  the stabilized solvers' power iteration and the Krylov methods evaluate);
- `auto`: the field `vector_field='auto'` (the default) picks at this m.
Memory: XLA's own account of each compiled gradient (`memory_analysis()`: temporaries, i.e.
the peak working set above its arguments and outputs), exact, not sampled.

Writes `benchmarks/results/field_floor.{md,json}`.

    python benchmarks/bench_field_floor.py [--m 1000,10000,100000] [--rounds 5] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from datetime import date
from pathlib import Path

import numpy as np

DEFAULT_M = (1000, 5000, 10000, 20000, 100000)
EVALS = 10
VARIANTS = ("floor", "autodiff", "fused", "hvp autodiff", "hvp fused")


def _programs(m: int):
    """The compiled ten-evaluation loops of every variant at width m, θ(0), and each
    gradient program's temporary bytes; `auto`: the field 'auto' resolves to."""
    import jax
    import jax.numpy as jnp

    import flows
    from flows.models import TwoLayer

    data = flows.paper_data("f1", n=1000)
    model = TwoLayer(m=m, d=1, alpha=1.0)
    fields = ("autodiff", "fused")
    probs = {f: flows.make_problem(model, data, key=0, vector_field=f) for f in fields}
    auto = flows.make_problem(model, data, key=0).vector_field
    x = probs["autodiff"].x
    theta0 = probs["autodiff"].theta0
    direction = jax.tree_util.tree_map(jnp.ones_like, theta0)

    def floor(th):
        return {"a": jnp.sum(jnp.tanh(x @ th["w"].T)) * th["a"], "w": th["w"]}

    one = {
        "floor": floor,
        "autodiff": lambda th: probs["autodiff"].grad(th),
        "fused": lambda th: probs["fused"].grad(th),
        "hvp autodiff": lambda th: jax.jvp(probs["autodiff"].grad, (th,), (direction,))[1],
        "hvp fused": lambda th: jax.jvp(probs["fused"].grad, (th,), (direction,))[1],
    }

    def loop(f):
        def ten(theta):
            def body(_, th):
                g = f(th)
                return jax.tree_util.tree_map(lambda p, gi: p - 1e-12 * gi, th, g)

            return jax.lax.fori_loop(0, EVALS, body, theta)

        return jax.jit(ten)

    programs = {k: loop(f) for k, f in one.items()}
    memory = {}
    for k in ("autodiff", "fused"):
        ma = jax.jit(one[k]).lower(theta0).compile().memory_analysis()
        memory[k] = None if ma is None else int(ma.temp_size_in_bytes)
    return programs, theta0, memory, auto


def measure(m: int, rounds: int) -> dict:
    import jax

    programs, theta0, memory, auto = _programs(m)
    for p in programs.values():
        jax.block_until_ready(p(theta0))  # compile, and a first run
    times: dict[str, list[float]] = {k: [] for k in programs}
    for r in range(rounds):
        order = list(programs) if r % 2 == 0 else list(reversed(programs))
        for k in order:
            start = time.perf_counter()
            jax.block_until_ready(programs[k](theta0))
            times[k].append((time.perf_counter() - start) / EVALS)
    per_round = {k: np.array(v) for k, v in times.items()}
    ratio = {k: float(np.median(per_round[k] / per_round["floor"])) for k in programs}
    return {
        "m": m,
        "n": 1000,
        "seconds": {k: float(np.median(v)) for k, v in times.items()},
        "ratio_to_floor": ratio,
        "temp_bytes": memory,
        "auto": auto,
        "n_by_m_f64_bytes": 1000 * m * 8,
    }


def _md(rows: list[dict], rounds: int) -> str:
    import jax

    head = (
        "# The two-layer gradient field against its floor\n\n"
        f"Written by `python benchmarks/bench_field_floor.py` ({date.today()}, "
        f"{platform.machine()}, jax {jax.__version__}). Paper data (n = 1000, d = 1, f₁), "
        "α = 1, float64. Each cell: the median over "
        f"{rounds} interleaved rounds of one evaluation's share of a compiled loop of "
        f"{EVALS}; in brackets its ratio to the floor Σ tanh(X Wᵀ) of the same round "
        "(median of the per-round ratios). `temporaries`: XLA's account of the compiled "
        "gradient's working set above its arguments and outputs. `auto`: the field "
        "`vector_field='auto'` (the default) takes.\n\n"
        "| m | floor (ms) | autodiff (ms) | fused (ms) | HVP autodiff (ms) | HVP fused (ms) "
        "| temporaries autodiff / fused (MiB) | one n×m array (MiB) | auto |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
    )
    lines = []
    for r in rows:
        s, q, mem = r["seconds"], r["ratio_to_floor"], r["temp_bytes"]

        def cell(k, s=s, q=q):
            return f"{1e3 * s[k]:.3g} ({q[k]:.2f}×)"

        def mib(b):
            return "?" if b is None else f"{b / 2**20:.1f}"

        lines.append(
            f"| {r['m']} | {1e3 * s['floor']:.3g} | {cell('autodiff')} | {cell('fused')} | "
            f"{cell('hvp autodiff')} | {cell('hvp fused')} | "
            f"{mib(mem['autodiff'])} / {mib(mem['fused'])} | "
            f"{r['n_by_m_f64_bytes'] / 2**20:.1f} | {r['auto']} |"
        )
    return head + "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--m", default=",".join(map(str, DEFAULT_M)), help="widths, comma-separated")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds per width")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results"))
    args = ap.parse_args()
    import flows  # noqa: F401  (float64 on: the toolkit enables it on import)

    rows = []
    for m in (int(v) for v in args.m.split(",")):
        rows.append(measure(m, args.rounds))
        r = rows[-1]
        print(
            f"m={m:>6}: "
            + ", ".join(f"{k} {r['ratio_to_floor'][k]:.2f}×" for k in VARIANTS[1:])
            + f" the floor ({1e3 * r['seconds']['floor']:.2f} ms); auto → {r['auto']}",
            flush=True,
        )
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "field_floor.json").write_text(json.dumps(rows, indent=1) + "\n")
    (out / "field_floor.md").write_text(_md(rows, args.rounds))
    print(f"wrote {out / 'field_floor.md'}")


if __name__ == "__main__":
    main()
