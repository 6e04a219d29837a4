"""`flows check` in one worker against `--jobs 2`: wall, CPU, and whether every number of
every paper's results.json is the same.

Each round runs `flows check [--quick] --no-report --format json` twice as subprocesses of
this one script, `--jobs 1` (the papers one after another in the command's process) and
`--jobs 2` (two worker processes), alternating which goes first from round to round (the
compile cache, warm for both after `--warm`, otherwise favours the second). Wall time
(`time.perf_counter`), the CPU seconds of the command and its workers (`RUSAGE_CHILDREN`),
and the load average before and after are recorded: the machine may be shared, and a
loaded machine gives two jobs a larger share of it than one (say so when reporting).
results.json of the two runs are compared with the timing fields (`wall_s`, `compile_s`, `cpu_s`)
left out: the rest must be equal, float for float (JSON text of a float is its exact
value).

Issue 49's target: `flows check` at the defaults ≥ 1.7× less wall on 2 cores than one
worker, with identical results.json numbers. Writes `benchmarks/results/check_jobs.md` and
`.json`.

    python benchmarks/bench_check_jobs.py [--quick] [--rounds 1] [--warm] [--jobs 2]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Fields of results.json that a rerun changes by measurement: left out of the comparison.
TIMING_KEYS = frozenset({"wall_s", "compile_s", "cpu_s"})


def _numbers(obj):
    if isinstance(obj, dict):
        return {k: _numbers(v) for k, v in obj.items() if k not in TIMING_KEYS | {"versions"}}
    if isinstance(obj, list):
        return [_numbers(v) for v in obj]
    return obj


def _differences(a, b, path="") -> list[str]:
    """Where two parsed JSON documents differ (paths, the first few)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _differences(a[k], b[k], f"{path}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True))
                for d in _differences(x, y, f"{path}[{i}]")]  # fmt: skip
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []  # NaN in both (JSON's NaN: the same text)
    return [] if a == b else [f"{path}: {str(a)[:60]} != {str(b)[:60]}"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def ceiling(one: dict, cores: int) -> float:
    """The largest wall ratio `cores` workers could reach on the serial run's work: its
    wall over its CPU seconds divided evenly among the cores (no schedule does better
    without doing less work; at least 1)."""
    return max(one["wall_s"] / (one["cpu_s"] / cores), 1.0)


def run(jobs: int, quick: bool, out: Path) -> dict:
    argv = [sys.executable, "-m", "flows", "check", "--no-report", "--format", "json"]
    argv += ["--jobs", str(jobs), "--out", str(out), *(["--quick"] if quick else [])]
    load0, cpu0, t0 = os.getloadavg()[0], _cpu(), time.perf_counter()
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    wall, cpu, load1 = time.perf_counter() - t0, _cpu() - cpu0, os.getloadavg()[0]
    if res.returncode not in (0, 1):
        sys.exit(f"flows check --jobs {jobs} exited {res.returncode}:\n{res.stderr[-3000:]}")
    payload = json.loads(res.stdout)
    papers = {e["name"]: e["wall_s"] for e in payload["experiments"]}
    paper_cpu = {e["name"]: e.get("cpu_s") for e in payload["experiments"]}
    results = {n: _numbers(json.loads((out / n / "results.json").read_text())) for n in papers}
    return {
        "jobs": jobs,
        "wall_s": wall,
        "cpu_s": cpu,
        "load_before": load0,
        "load_after": load1,
        "exit": res.returncode,
        "paper_wall_s": papers,
        "paper_cpu_s": paper_cpu,
        "results": results,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="flows check --quick (default: full)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=2, help="the parallel run's --jobs")
    ap.add_argument("--warm", action="store_true", help="one untimed serial run first")
    ap.add_argument("--out", default=str(HERE / "results" / "check_jobs"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-check-jobs-") as tmp:
        if args.warm:
            run(1, args.quick, Path(tmp) / "warm")
        for r in range(args.rounds):
            order = (args.jobs, 1) if r % 2 == 0 else (1, args.jobs)
            pair = {}
            for jobs in order:
                pair[jobs] = run(jobs, args.quick, Path(tmp) / f"r{r}-j{jobs}")
                print(
                    f"round {r}: --jobs {jobs}: {pair[jobs]['wall_s']:.1f} s wall, "
                    f"{pair[jobs]['cpu_s']:.1f} s CPU, load {pair[jobs]['load_before']:.1f}"
                    f"→{pair[jobs]['load_after']:.1f}",
                    flush=True,
                )
            diff = _differences(pair[1]["results"], pair[args.jobs]["results"])
            for d in diff[:20]:
                print("differs:", d, flush=True)
            rows.append(
                {"round": r, "order": list(order), "identical": not diff, "differences": diff,
                 "runs": pair}
            )  # fmt: skip
    for row in rows:
        for run_ in row["runs"].values():
            run_.pop("results")
    mode = "--quick" if args.quick else "the defaults"
    lines = [
        f"# `flows check` ({mode}): one worker against `--jobs {args.jobs}`",
        "",
        f"Machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}. Written by `benchmarks/bench_check_jobs.py"
        f"{' --quick' if args.quick else ''} --rounds {args.rounds}"
        f"{' --warm' if args.warm else ''}`.",
        "",
        "| round | first | jobs | wall s | CPU s | load avg before → after | per paper: wall s "
        "(CPU s) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for jobs in row["order"]:
            x = row["runs"][jobs]
            cpu = x.get("paper_cpu_s") or {}
            per = ", ".join(
                f"{n} {w:.0f}" + (f" ({cpu[n]:.0f})" if cpu.get(n) is not None else "")
                for n, w in x["paper_wall_s"].items()
            )
            lines.append(
                f"| {row['round']} | --jobs {row['order'][0]} | {jobs} | {x['wall_s']:.1f} | "
                f"{x['cpu_s']:.1f} | {x['load_before']:.1f} → {x['load_after']:.1f} | {per} |"
            )
    lines.append("")
    cores = min(args.jobs, os.cpu_count() or 1)
    for row in rows:
        one, par = row["runs"][1], row["runs"][args.jobs]
        a, b = one["wall_s"], par["wall_s"]
        lines.append(
            f"Round {row['round']}: wall ratio (one worker / --jobs {args.jobs}) = "
            f"{a / b:.2f}×; ceiling {ceiling(one, cores):.2f}×; results.json numbers "
            f"identical (timing fields aside): {'yes' if row['identical'] else 'NO'}."
        )
    lines += [
        "",
        f"Ceiling: the one worker's wall over its CPU seconds spread evenly on {cores} cores "
        "— the largest ratio any schedule of the same work could give (one worker already "
        "runs XLA's own threads beside its Python thread, so its CPU seconds exceed its "
        "wall); the parallel run's extra CPU seconds (start-ups, threads of two workers "
        "contending) lower it further.",
    ]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1))
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
