"""Running one case: the reference solve, every row (errors against the reference),
provenance (versions, machine), and its three files (`.md`, `.json`, `.png`)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

import jax
import numpy as np

import flows

from .cases import ATOL_FACTOR, BASELINE_LR, REF, Case
from .methods import (
    Method,
    build_methods,
    build_problems,
    cores,
    make_problem_options,
    run_simulate,
    torch_status,
    torch_threads,
)
from .report import headline, markdown, plot

__all__ = ["execute", "machine", "reference", "run_case", "versions"]

ROOT = Path(__file__).resolve().parents[2]  # the repository (for the git commit)


def reference(case: Case, problem) -> dict:
    """Dopri8 at rtol 1e-11 on each of the case's clocks; the cheapest successful one is the
    reference, the spread between clocks estimates its own error."""
    runs = {}
    for clock in case.clocks:
        res = run_simulate(problem, case.t1, REF["solver"], REF["rtol"], clock, REF["atol"])
        runs[clock] = res
        print(
            f"  reference {REF['solver']} rtol={REF['rtol']:g} ({clock} clock): "
            f"{res['status']} {res['vf_evals']} evals {res['wall_s']:.2f} s",
            flush=True,
        )
    ok = {c: r for c, r in runs.items() if r["status"] == "ok"}
    if not ok:
        raise RuntimeError(f"the reference failed on every clock: {runs}")
    best = min(ok, key=lambda c: ok[c]["vf_evals"])
    spread = {
        f"{best} vs {c}": float(np.max(np.abs(ok[c]["theta"] - ok[best]["theta"])))
        for c in ok
        if c != best
    }
    return {
        "clock": best,
        "theta": ok[best]["theta"],
        "wall_s": ok[best]["wall_s"],
        "vf_evals": ok[best]["vf_evals"],
        "loss_t1": ok[best]["extra"]["loss_t1"],
        "spread": spread,
        "runs": {c: {k: v for k, v in r.items() if k != "theta"} for c, r in runs.items()},
    }


def execute(methods: list[Method], ref_theta: np.ndarray, repeat: int) -> list[dict]:
    rows = []
    skipped_groups: dict[str, str] = {}
    scale = float(np.max(np.abs(ref_theta)))
    for m in methods:
        row = {"label": m.label, "family": m.family, "settings": m.settings}
        if m.skip or (m.group and m.group in skipped_groups):
            if m.group in skipped_groups:
                continue
            row.update(status="skipped", reason=m.skip)
            rows.append(row)
            print(f"  {m.label:44s} skipped: {m.skip}", flush=True)
            continue
        start = time.perf_counter()
        try:
            results = [m.run() for _ in range(repeat)]
        except flows.ConfigError as e:
            reason = str(e)
            if m.group:
                skipped_groups[m.group] = reason
            row.update(status="skipped", reason=reason)
            rows.append(row)
            print(f"  {m.label:44s} skipped: {reason}", flush=True)
            continue
        except Exception as e:  # noqa: BLE001 — a failing method is a row, not a crash
            traceback.print_exc()
            row.update(status="failed", reason=f"{type(e).__name__}: {e}")
            rows.append(row)
            print(f"  {m.label:44s} failed: {e}", flush=True)
            continue
        res = min(results, key=lambda r: r["wall_s"])
        theta = res.pop("theta")
        row.update(res)
        row["wall_s_all"] = [r["wall_s"] for r in results]
        row["total_s"] = time.perf_counter() - start  # compile, warm-up and all repeats
        if theta is not None:
            diff = np.abs(np.asarray(theta, dtype=np.float64) - ref_theta)
            row["err_max"] = float(np.max(diff))
            row["err_rel"] = float(np.max(diff) / scale)
        rows.append(row)
        err = row.get("err_max", float("nan"))
        print(
            f"  {m.label:44s} {row['status']:6s} {row['vf_evals']:9d} evals "
            f"{row['wall_s']:9.3f} s  max|θ−θ_ref| = {err:.2e}  (total {row['total_s']:.1f} s)",
            flush=True,
        )
    return rows


def versions() -> dict:
    out = {"python": sys.version.split()[0]}
    for pkg in (
        "flows-theory",
        "jax",
        "jaxlib",
        "diffrax",
        "equinox",
        "optimistix",
        "numpy",
        "scipy",
        "matplotlib",
        "torch",
        "torchdiffeq",
    ):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            out[pkg] = "not installed"
    try:
        root = ROOT
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        out["git_commit"] = commit + (" (uncommitted changes)" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        out["git_commit"] = "unknown"
    return out


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or "?",
        "cpu_count": os.cpu_count(),
        "cores_available": cores(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "XLA_FLAGS": os.environ.get("XLA_FLAGS", ""),
        "torch_threads": torch_threads() if torch_status()[0] else None,
        "loadavg_start": None,
    }


def run_case(case: Case, args) -> dict:
    print(f"\n== {case.title}", flush=True)
    load_start = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    problems, skips = build_problems(case)
    base = problems["autodiff"]
    ref = reference(case, base)
    methods = build_methods(case, problems, skips)
    if args.only:
        methods = [m for m in methods if re.search(args.only, m.label)]
    if args.exclude:
        methods = [m for m in methods if not re.search(args.exclude, m.label)]
    rows = execute(methods, ref["theta"], args.repeat)
    head = headline(rows)
    info = {
        "quick": args.quick,
        "repeat": args.repeat,
        "torch_threads": torch_threads(),
        "n_params": base.n_params,
        "theta_scale": float(np.max(np.abs(ref["theta"]))),
        "machine": machine(),
        "versions": versions(),
    }
    info["machine"]["loadavg_start"] = load_start
    info["machine"]["loadavg_end"] = list(os.getloadavg()) if hasattr(os, "getloadavg") else None
    text = markdown(case, ref, rows, head, info)
    stem = f"work_precision_{case.name}" + ("_quick" if args.quick else "")
    out = Path(args.out)
    payload = {
        "benchmark": "work_precision",
        "case": case.name,
        "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
        "config": {
            "problem": case.config,
            "problem_describe": base.describe(),
            "t1": case.t1,
            "quick": args.quick,
            "repeat": args.repeat,
            "only": args.only,
            "exclude": args.exclude,
            "torch_threads": torch_threads(),
            "reference": {**REF, "clock": ref["clock"]},
            "atol_factor": ATOL_FACTOR,
            "tolerance_grid": case.grid,
            "peer_rtols": case.peer_rtols,
            "gd_learning_rates": case.gd_lrs,
            "baseline_learning_rate": BASELINE_LR,
            "clocks": case.clocks,
            "variant_clocks": case.variant_clocks,
            "toolkit_solvers": list(flows.SOLVERS),
            "make_problem_options": make_problem_options(),
            "variant_skips": skips,
        },
        "versions": info["versions"],
        "machine": info["machine"],
        "reference": {k: v for k, v in ref.items() if k != "theta"},
        "headline": head,
        "rows": rows,
    }
    flows.write_atomic(out / f"{stem}.md", lambda p: Path(p).write_text(text))
    flows.write_atomic(
        out / f"{stem}.json",
        lambda p: Path(p).write_text(json.dumps(payload, indent=2, default=_json_default)),
    )
    flows.write_atomic(out / f"{stem}.png", lambda p: plot(case, rows, p))
    print("\n" + text, flush=True)
    return {
        "case": case.name,
        "rows": rows,
        "headline": head,
        "files": [out / f"{stem}.{ext}" for ext in ("md", "json", "png")],
    }


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)
