"""`flows simulate <experiment>`: one run of a paper's flow, saved as `OUT/trajectory.nc`
with a short `OUT/report.html` (the loss curve, where the time went, the final value of
every observable), and one summary line on stdout."""

from __future__ import annotations

import contextlib
import math
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._errors import ConfigError, SolverError
from .._io import REPORT_NAME
from . import flags as fl
from . import text as words
from .check_progress import Timings as _Timings
from .env import _command
from .lines import _duration
from .live import Status, live_terminal
from .output import EXIT_OK


def add_parser(sub, exps) -> None:
    """`flows simulate <name>` for every experiment in `exps`, with its own flags."""
    s = sub.add_parser("simulate", help=words.COMMANDS["simulate"])
    s_sub = s.add_subparsers(dest="experiment", required=True, metavar="experiment")
    for name in sorted(exps):
        e = exps[name]
        sp = s_sub.add_parser(name, help=e.title, description=f"{e.title}. {type(e).__doc__}")
        for flag in e.simulate_flags:
            flag.add_to(sp)
        sp.add_argument("--out", required=True, help="output folder; writes OUT/trajectory.nc")
        sp.add_argument(
            "--overwrite",
            action="store_true",
            help="replace an existing OUT/trajectory.nc and OUT/report.html (refused otherwise)",
        )
        sp.add_argument("--no-report", action="store_true", help="do not write OUT/report.html")
        sp.add_argument(
            "--quiet",
            action="store_true",
            help="no progress on the terminal: print only the summary (without a terminal "
            "there is none anyway)",
        )
        sp.add_argument(
            "--global-error",
            dest="global_error",
            action="store_true",
            help="also estimate the run's global error by a companion solve at tolerances "
            "10x tighter (about 1.5-2.5x the run's time): its estimate is printed, saved in "
            "OUT/trajectory.nc (variables global_error.<observable>) and bounds the final "
            "loss's error floor",
        )


def _save_trajectory(traj, out: Path, rtol: float | None, overwrite: bool) -> Path:
    """Write OUT/trajectory.nc, unless the flow's accuracy certificate failed, or its final
    loss or an observable at the last save is no larger than the error it can be known to
    (`stats.unresolved`; exit 3, nothing written)."""
    from .._solve.significance import describe_unresolved
    from .._solve.stats import SolveStats, certificate, describe_certificate

    if rtol is not None and not traj.stats.get("certificate"):
        # every flow has one; a hand-made run may not
        cert = certificate(traj.observables, rtol)
        st = traj.stats
        traj.stats = (
            st.replace(certificate=cert)
            if isinstance(st, SolveStats)
            else {**st, "certificate": cert}
        )
    records = list(getattr(traj.stats, "unresolved", None) or [])  # the loss first
    if not records:  # a hand-made run's stats: the loss's record alone, where it has one
        res = traj.stats.get("resolution") if isinstance(traj.stats, Mapping) else None
        records = [res] if res and res["resolved"] is False else []
    unresolved = " ".join(describe_unresolved(r) for r in records)
    failed = rtol is not None and not traj.stats["certificate"]["ok"]
    if failed or unresolved:
        why = [describe_certificate(traj.stats["certificate"])] if failed else []
        raise SolverError(
            " ".join([*why, ("Also " if why else "") + unresolved, "Nothing was written."]),
            t_reached=float(traj.times[-1]),
            reason="certificate" if failed else "unresolved",
        )
    from .._io import FolderBusy, lock_folder, remove_stale_temporaries

    try:
        with lock_folder(out.parent):  # one writer; temporaries of killed writes are removed
            remove_stale_temporaries(out.parent, {out.name, REPORT_NAME}.__contains__)
            if out.exists() and not overwrite:  # appeared while we computed
                raise _exists_error(out)
            return traj.save(out)
    except FolderBusy as exc:
        raise ConfigError(
            f"another flows process is writing into {str(out.parent)!r} ({exc}); wait for it "
            "or choose another --out."
        ) from None


def _exists_error(out: Path) -> ConfigError:
    return ConfigError(
        f"{str(out)!r} exists; flows does not overwrite it. Choose another --out, or pass "
        "--overwrite to replace it."
    )


def _cmd_simulate(args) -> int:
    from .._io import check_lock_file, check_output_path, check_regular_or_absent
    from ..experiments import EXPERIMENTS

    exp = EXPERIMENTS[args.experiment]
    fl.refuse_inapplicable(exp.simulate_flags, args)  # a flag its --method ignores
    out = check_output_path(args.out) / "trajectory.nc"
    report = out.with_name(REPORT_NAME)
    check_lock_file(out.parent)
    for target in (out, report):
        check_regular_or_absent(target, "the " + target.name)  # even with --overwrite
        if target.exists() and not args.overwrite:
            raise _exists_error(target)
    options = fl.values(args, exp.simulate_flags)
    if args.quiet and options.get("progress"):
        raise ConfigError(
            "--quiet and --progress ask for opposite things (no progress, and the solve's "
            "steps live); give one of them."
        )
    start = time.perf_counter()
    startup = _process_age()
    from .._solve.global_error import global_error_by_default
    from .._solve.significance import format_resolved

    timings = _Timings(write=not _no_cache(args))
    estimate = timings.get(f"simulate/{exp.name}", options)
    status = None
    if not args.quiet and live_terminal(sys.stderr):
        wall = estimate["wall_s"] if estimate else None
        status = Status(sys.stderr, f"flows simulate {exp.name}", expected_s=wall)
    try:
        with global_error_by_default(args.global_error), _meter_takes_the_line(status):
            run = exp.simulate(options, progress=bool(options.get("progress")))
        traj = run.traj
        ge = getattr(traj, "global_error", None)  # a plug-in's hand-made run may lack it
        if args.global_error and ge is not None and not ge.missing:
            for name, est in ge.observables.items():  # beside the run's own, per save
                traj.observables[f"global_error.{name}"] = est
        simulated = time.perf_counter()
        if status is not None:
            status.phase = "saving trajectory.nc"
        path = _save_trajectory(traj, out, run.rtol, args.overwrite)
        saved = time.perf_counter()
        written = [path]
        if not args.no_report:
            if status is not None:
                status.phase = "writing report.html"
            stages = _stage_times(traj.stats, simulated - start, saved - simulated, startup)
            page = _simulate_page(exp, traj, stages, time.perf_counter() - start)
            written.append(_save_beside(report, page, args.overwrite))
        wall = time.perf_counter() - start
        timings.record(f"simulate/{exp.name}", options, [], wall)
        if status is not None:
            status.close(_final_frame(exp.name, traj, wall))
    finally:
        if status is not None:
            status.close()  # an error or Ctrl-C: the line ends before the message
    st = traj.stats
    res = st.get("resolution")  # the final loss with the digits its error floor leaves it
    end = format_resolved(traj.loss[-1], res["floor"]) if res else f"{traj.loss[-1]:.6g}"
    line = (
        f"{traj.config.get('method', 'gradient flow')}: loss {traj.loss[0]:.6g} → "
        f"{end} at t = {traj.times[-1]:g}; {st['vf_evals']} gradient "
        f"evaluations, {st['wall_s']:.2f}s"
    )
    if "energy_residual" in traj.observables:
        line += f"; max energy residual {traj.observables['energy_residual'].max():.2e}"
    print(line)
    if args.global_error:
        if ge is None:
            print("global error: not estimated (this run is not an exact flow)")
        elif ge.missing:
            print(f"global error: not estimated: {ge.missing}")
        else:
            print(
                f"global error of the final loss ≈ {ge.observables['loss'][-1]:.2g} (companion "
                f"solve at tolerances /{ge.factor:g}; {ge.cost:.2g}× the run's time)"
            )
    print("wrote:", ", ".join(str(p) for p in written))
    return EXIT_OK


def _no_cache(args) -> bool:
    from .. import _compile

    return bool(getattr(args, "no_cache", False)) or _compile.cache_disabled_by_env()


def _final_frame(name: str, traj, wall: float) -> str:
    """The live line's last frame: where the run ended and what it took."""
    st = traj.stats
    steps, rejected = st.get("steps"), st.get("rejected_steps")
    text = f"flows simulate {name}: done in {_duration(wall)} · t = {traj.times[-1]:g}"
    if steps is not None:
        text += f", {steps} steps" + (f" ({rejected} rejected)" if rejected is not None else "")
    return text


@contextlib.contextmanager
def _meter_takes_the_line(status: Status | None):
    """While the solve's own meter (`--progress`) draws its bar, the status line steps
    aside (blanked), and comes back after it."""
    from .._solve import progress

    if status is None:
        yield
        return
    progress.ON_LIVE_BAR.append(status.clear)
    try:
        yield
    finally:
        progress.ON_LIVE_BAR.remove(status.clear)
        status.resume()


def _process_age() -> float | None:
    """Seconds since this process started (Linux: /proc), None where not known: the
    start-up before the command ran (Python, JAX and flows imported)."""
    try:
        with open("/proc/self/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return age if 0 <= age < 86_400 else None


def _stage_times(
    stats, simulate_s: float, save_s: float, startup_s: float | None
) -> list[tuple[str, float, str]]:
    """Where the time of one `flows simulate` went, as (stage, seconds, what it covers):
    start-up (when known), the solver's compilation and solve (its statistics), the rest
    of the experiment's `simulate` and the saving; the report adds its own stage."""

    def stat(key: str) -> float | None:
        v = stats.get(key) if hasattr(stats, "get") else None
        return float(v) if isinstance(v, (int, float)) and math.isfinite(v) else None

    compile_s, solve_s = stat("compile_s"), stat("wall_s")
    stages: list[tuple[str, float, str]] = []
    if startup_s is not None:
        stages.append(("start-up", startup_s, "Python, JAX and flows imported"))
    if compile_s is not None:
        stages.append(
            ("compile/trace", compile_s, "tracing and compiling the solver loop (or reading it "
             "from the compilation cache)")
        )  # fmt: skip
    if solve_s is not None:
        stages.append(("solve", solve_s, "integrating the flow"))
    rest = simulate_s - (compile_s or 0.0) - (solve_s or 0.0)
    stages.append(
        ("set-up and checks", max(rest, 0.0), "data, model and problem built; observables "
         "gathered; accuracy certificate")
    )  # fmt: skip
    stages.append(("saving results", save_s, "trajectory.nc written"))
    return stages


def _with_digits(value: float, record) -> float | str:
    """A final value with the digits its error floor leaves it (`value ± floor`), marked
    when it has none; the bare number where no floor was measured."""
    import math

    from .._solve.significance import format_resolved

    floor = record.get("floor") if record else None
    if floor is None or not math.isfinite(floor) or floor <= 0:
        return value
    text = format_resolved(value, floor)
    return text + " (no significant digit)" if record.get("resolved") is False else text


def _simulate_page(exp, traj, stages: list[tuple[str, float, str]], wall_s: float) -> str:
    """The short report.html of one `flows simulate` run: the loss curve, the stage times
    (`stages`, plus the building of this page), and the final value of every scalar
    observable with its description (the experiment's `observables.DESCRIPTIONS`; those in
    its `LEFT_OUT`, and vectors, are named below the table with the reason)."""
    import numpy as np

    from .._report.html import Curve, simulate_report

    begin = time.perf_counter()
    described, left_out = _observable_notes(exp, traj)
    records = dict(getattr(traj.stats, "resolutions", None) or {})
    if getattr(traj.stats, "resolution", None):
        records.setdefault("loss", traj.stats.resolution)
    t_end = float(traj.times[-1])
    finals: dict[str, Any] = {}
    for key, arr in traj.observables.items():
        a = np.asarray(arr)
        if key in left_out or not np.issubdtype(a.dtype, np.number) or not len(a):
            continue
        if key not in described:
            left_out[key] = "no description recorded; the whole curve is in trajectory.nc"
        elif a.ndim == 1:
            finals[key] = _with_digits(float(a[-1]), records.get(key))
        elif a.ndim == 2 and a.shape[1] <= MAX_VECTOR_SHOWN:
            finals[key] = [float(v) for v in a[-1]]
        else:
            left_out[key] = f"{a[-1].size} values at each time; in trajectory.nc"
    loss = np.asarray(traj.loss, dtype=float)

    def page(report_s: float | None) -> str:
        shown = [*stages, ("report", report_s, "this page built")] if report_s else stages
        # the wall time is the stages' sum: from the process's start when that is known
        return simulate_report(
            name=exp.name,
            title=exp.title,
            config=traj.config,
            stats=dict(traj.stats),
            curves=[Curve("loss", np.asarray(traj.times, float).tolist(), loss.tolist())],
            finals=finals,
            descriptions={k: v for k, v in described.items() if k in traj.observables},
            final_time=t_end,
            left_out={
                k: v
                for k, v in left_out.items()
                # the engine's bookkeeping is in trajectory.nc where θ was saved
                if k in traj.observables or (k in ENGINE_LEFT_OUT and len(traj.param_times))
            },
            stages=shown,
            wall_s=sum(t for _, t, _ in shown) if shown else wall_s,
            command=_command(),
            files=["trajectory.nc", REPORT_NAME],
        )

    page(None)  # built once to time it; the page shows that time (the second build is alike)
    return page(time.perf_counter() - begin)


#: Longest vector observable (per class, mode, …) whose final value the report lists.
MAX_VECTOR_SHOWN = 12

#: Observables every run of the engine may carry, with their descriptions.
ENGINE_OBSERVABLES = {
    "energy": "∫₀ᵗ ‖∇L(θ(s))‖² ds, integrated with the flow: the loss the flow has dissipated",
    "energy_residual": "|L(0) − L(t) − ∫₀ᵗ ‖∇L‖² ds|: the energy identity's residual, an "
    "accuracy certificate of the solve (0 for the exact flow)",
}
#: Engine bookkeeping that is no observable of the run.
ENGINE_LEFT_OUT = {"param_saved": "bookkeeping (1 where θ was saved), not an observable"}


def _observable_notes(exp, traj) -> tuple[dict[str, str], dict[str, str]]:
    """(name → description, name → why it is left out of the summary) for the observables
    of a run of `exp`: the loss (its recorded definition), the engine's own (energy,
    non-smooth counts), and the experiment's (`DESCRIPTIONS` and `LEFT_OUT` of the
    `observables` module beside the experiment's, where it has one)."""
    import importlib

    from .._nonsmooth import KINK_OBSERVABLES

    loss = ""
    problem = traj.config.get("problem") if isinstance(traj.config, dict) else None
    if isinstance(problem, dict):
        loss = str(problem.get("loss") or "")
    described = {
        "loss": loss or "the objective integrated by the flow",
        **ENGINE_OBSERVABLES,
        **KINK_OBSERVABLES,
    }
    left_out = dict(ENGINE_LEFT_OUT)
    package = type(exp).__module__.rpartition(".")[0]
    try:
        module = importlib.import_module(package + ".observables") if package else None
    except ImportError:
        module = None
    described.update(getattr(module, "DESCRIPTIONS", {}) or {})
    left_out.update(getattr(module, "LEFT_OUT", {}) or {})
    return described, left_out


def _save_beside(path: Path, text: str, overwrite: bool) -> Path:
    """Write `path` (next to the trajectory just saved) atomically under the folder's lock;
    a file that appeared meanwhile is not replaced without --overwrite."""
    from .._io import FolderBusy, lock_folder, write_atomic

    try:
        with lock_folder(path.parent):
            if path.exists() and not overwrite:
                raise _exists_error(path)
            return write_atomic(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
    except FolderBusy as exc:
        raise ConfigError(
            f"another flows process is writing into {str(path.parent)!r} ({exc}); wait for it "
            "or choose another --out."
        ) from None
