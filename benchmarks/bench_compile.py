"""What compilation costs a command, and what the persistent cache and run-time tolerances
save. Side by side in one run (these machines are noisy: compare the ratios).

1. `flows simulate multistage --m 200 --t1 5` as a command (a fresh process each), CPU
   seconds (user + system of the child) and wall: with the cache off (`--no-cache`), with
   an empty cache folder (cold: compiles and writes), and again (warm: reads), repeated
   `--repeat` times in turn, beside a floor measured in the same rounds: a bare Python
   that imports JAX and runs one operation (no command can go below it; it drifts with
   the machine, so the warm command is also given as a multiple of it). The warm command
   also runs in a pseudo-terminal, as a person runs it: with its default live status line,
   and with `--progress` (the solve's in-loop meter, a program JAX does not cache).
2. In one process, `flows.simulate` on a two-layer tanh net of width 200 over 6 rtols ×
   3 seeds: how many flow programs were compiled (one expected: tolerances and θ(0) are
   run-time values) and the CPU seconds of the first run against the others.

Writes `benchmarks/results/compile.md` and `compile.json`.

    python benchmarks/bench_compile.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OUT = Path(__file__).parent / "results"
#: Issue 33: a second run of COMMAND (warm cache) takes at most this many CPU seconds.
TARGET_WARM_CPU_S = 3.0
COMMAND = ["simulate", "multistage", "--m", "200", "--t1", "5", "--no-report", "--overwrite"]


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run_on_terminal(extra: list[str], cache_dir: Path, out: Path) -> dict:
    """COMMAND and its options `extra` in a pseudo-terminal, as a person runs it: its live
    progress on (the status line by default; the solve's in-loop meter with `--progress`).
    CPU seconds of the child from `wait4`."""
    import pty
    import select

    env = {**os.environ, "FLOWS_CACHE_DIR": str(cache_dir), "TERM": "xterm"}
    env.pop("FLOWS_NO_CACHE", None)
    argv = [sys.executable, "-m", "flows", *COMMAND, *extra, "--out", str(out)]
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child
        os.execve(sys.executable, argv, env)
    while True:  # drain the terminal until the child closes it
        if select.select([fd], [], [], 0.5)[0]:
            try:
                if not os.read(fd, 65536):
                    break
            except OSError:
                break
    _, status, usage = os.wait4(pid, 0)
    os.close(fd)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"command on a terminal failed ({status})")
    return {"cpu_s": usage.ru_utime + usage.ru_stime, "wall_s": wall}


def run_command(extra: list[str], cache_dir: Path, out: Path) -> dict:
    env = {**os.environ, "FLOWS_CACHE_DIR": str(cache_dir)}
    env.pop("FLOWS_NO_CACHE", None)
    cpu0, t0 = _child_cpu(), time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "flows", *extra, *COMMAND, "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {"cpu_s": cpu, "wall_s": wall}


FLOOR = "import jax, jax.numpy as jnp; jnp.zeros(3).block_until_ready()"


def run_floor() -> dict:
    cpu0, t0 = _child_cpu(), time.perf_counter()
    subprocess.run([sys.executable, "-c", FLOOR], check=True)
    return {"cpu_s": _child_cpu() - cpu0, "wall_s": time.perf_counter() - t0}


def commands(repeat: int) -> dict:
    rows: dict[str, list[dict]] = {
        "import jax (floor)": [],
        "no cache": [],
        "cold cache": [],
        "warm cache": [],
        "warm cache, on a terminal (live status line)": [],
        "warm cache, on a terminal with --progress (in-loop meter)": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(repeat):
            rows["import jax (floor)"].append(run_floor())
            cache = Path(tmp) / f"cache{i}"
            out = Path(tmp) / "out"
            rows["no cache"].append(run_command(["--no-cache"], cache, out))
            rows["cold cache"].append(run_command([], cache, out))
            rows["warm cache"].append(run_command([], cache, out))
            rows["warm cache, on a terminal (live status line)"].append(
                run_on_terminal([], cache, out)
            )
            rows["warm cache, on a terminal with --progress (in-loop meter)"].append(
                run_on_terminal(["--progress"], cache, out)
            )
            found = [p for p in cache.rglob("*") if p.is_file()]
            size = sum(p.stat().st_size for p in found)
            files = len(found)
            programs = sum(1 for p in found if p.parent.name == "flows-programs")
    summary = {
        k: {
            "cpu_s": statistics.median(r["cpu_s"] for r in v),
            "wall_s": statistics.median(r["wall_s"] for r in v),
            "runs": v,
        }
        for k, v in rows.items()
    }
    summary["cache_folder"] = {"bytes": size, "files": files, "kept_programs": programs}
    return summary


def rtol_sweep() -> dict:
    import numpy as np

    import flows
    from flows.models import TwoLayer

    rtols = [1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9]
    seeds = [0, 1, 2]
    cpu, compiled = [], 0
    for seed in seeds:
        # a two-layer tanh net of width 200 on 100 points (θ(0) from the seed)
        rng = np.random.default_rng(0)
        x = rng.uniform(-1, 1, size=(100, 1))
        data = flows.from_arrays(x, np.tanh(3 * x))
        problem = flows.make_problem(TwoLayer(m=200, d=1, alpha=1.0), data, seed)
        for rtol in rtols:
            t0 = time.process_time()
            traj = flows.simulate(problem, t1=5.0, rtol=rtol, atol=rtol * 1e-3)
            cpu.append(time.process_time() - t0)
            # a compilation takes seconds; a reused program is a dictionary lookup (~1e-5 s)
            compiled += traj.stats["compile_s"] > 0.1
    return {
        "runs": len(cpu),
        "flow_programs_compiled": int(compiled),
        "first_cpu_s": cpu[0],
        "others_cpu_s_median": statistics.median(cpu[1:]),
        "rtols": rtols,
        "seeds": seeds,
    }


def rows_shown(c: dict) -> list[str]:
    return [k for k in c if k != "cache_folder"]


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    import jax

    res = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "python": platform.python_version(),
        "jax": jax.__version__,
        "command": "flows " + " ".join(COMMAND),
        "commands": commands(args.repeat),
        "rtol_sweep": rtol_sweep(),
    }
    OUT.mkdir(exist_ok=True)
    (OUT / "compile.json").write_text(json.dumps(res, indent=2) + "\n")
    c, s = res["commands"], res["rtol_sweep"]
    base = c["no cache"]["cpu_s"]
    lines = [
        "# Compilation: persistent cache and run-time tolerances",
        "",
        f"Generated by `benchmarks/bench_compile.py` on {res['date']} ({res['machine']}, "
        f"Python {res['python']}, jax {res['jax']}); medians of {args.repeat} runs of each, "
        "in turn.",
        "",
        f"## `{res['command']}` as a command",
        "",
        "| cache | CPU s | wall s | CPU vs no cache |",
        "|---|---|---|---|",
    ]
    for k in rows_shown(c):
        lines.append(
            f"| {k} | {c[k]['cpu_s']:.2f} | {c[k]['wall_s']:.2f} | {c[k]['cpu_s'] / base:.2f} |"
        )
    warm = c["warm cache"]["cpu_s"]
    lines += [
        "",
        f"Issue 33's target for the warm command, ≤ {TARGET_WARM_CPU_S:g} CPU s end to end: "
        f"**{'met' if warm <= TARGET_WARM_CPU_S else 'not met'}** ({warm:.2f}); "
        f"{warm / c['import jax (floor)']['cpu_s']:.2f}× the floor (`python -c "
        f"'{FLOOR}'`, {c['import jax (floor)']['cpu_s']:.2f} CPU s in the same rounds): "
        "the floor moves with the machine, the multiple less so.",
        "",
        f"Cache folder after the warm run: {c['cache_folder']['files']} files, "
        f"{c['cache_folder']['bytes'] / 1024:.0f} kB, of which "
        f"{c['cache_folder']['kept_programs']} traced program(s) kept by flows "
        "(`flows-programs/`, `jax.export`: a warm run reads the solve program instead of "
        "tracing it; needs the `flatbuffers` package).",
        "",
        "On a terminal the command shows its progress by default: a status line drawn by the "
        "host (the compile named, the time elapsed, the estimate from the last run), with no "
        "callback in the compiled program, so the warm program is the cached one. "
        "`--progress` adds the solve's in-loop meter (time reached, steps, rejected steps), "
        "a program with host callbacks that JAX does not write to its persistent cache: "
        "each such command compiles again.",
        "",
        "## A sweep over rtol and seeds in one process",
        "",
        f"{s['runs']} runs (rtol {', '.join(f'{r:g}' for r in s['rtols'])} × seeds "
        f"{s['seeds']}): **{s['flow_programs_compiled']} flow program(s) compiled**; "
        f"first run {s['first_cpu_s']:.2f} CPU s, the others {s['others_cpu_s_median']:.2f} "
        "(median).",
        "",
    ]
    (OUT / "compile.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
