"""`flows check`: every chosen paper's checks run with its progress shown, the table or JSON
on stdout, `report.html` per paper and `index.html` over them written beside the results.

Progress: on a terminal, one live tqdm bar per paper — its stages (the progress lines the
paper prints) done of the number its last run printed, the time elapsed and an estimate
of the time left from that run's recorded timeline (`Timings`), refreshed every second
while a stage runs; the paper's lines are kept above the bar. Elsewhere (CI logs, pipes)
the lines as they come, stamped with the time elapsed, and a line after each paper with
the estimate for the rest. Either way a first line names the papers at once.

Workers (`--jobs`, default: the cores; `jobs.py`): with two papers or more, each runs in a
worker process of its own, up to `--jobs` at once, longest first (by the recorded
timelines); their progress lines are merged as they come (each with its paper's name, one
bar per running paper on a terminal), and their tables, files, `index.html`, JSON and exit
status are put in the registry's order: those of a serial run. A worker that dies is named
with the cause, every finished paper is kept, and the command exits 3.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from .check_progress import (
    Timings,
    _LiveProgress,
    _PlainProgress,
    _previous_wall_s,
)
from .env import _command
from .lines import MAX_WIDTH, _duration, _fit, _ProgressLines, terminal_width
from .live import Status, live_terminal
from .output import EXIT_FAILED, EXIT_OK, EXIT_SOLVER

__all__ = ["MAX_WIDTH", "terminal_width"]  # with the command: where its tests find them


def _jobs(args, names, exps, stream, width) -> int:
    """How many worker processes `flows check` runs the papers in: `--jobs` (default: the
    cores), at most one per paper; 1 (the command's own process) for one paper or where a
    paper cannot be sent to a worker (`jobs.sendable`). More jobs than cores is allowed and
    said: the runs then share the cores, no faster."""
    from . import jobs as _jobs_mod

    cores = _jobs_mod.cores()
    asked = getattr(args, "jobs", None)
    jobs = cores if asked is None else asked
    if asked is not None and asked > cores:
        print(
            _fit(
                f"flows check: --jobs {asked} is more than the {cores} cores here; the runs "
                f"will share them (no faster than --jobs {cores})",
                width,
                4,
            ),
            file=stream,
            flush=True,
        )
    if len(names) < 2 or jobs < 2:
        return 1
    if not all(_jobs_mod.sendable(exps[n]) for n in names):
        return 1
    return min(jobs, len(names))


#: The configuration field a paper's limit-row extension reads its budget from.
BUDGET_FIELD = "extend_budget_s"


def _with_budget(cfg, args):
    """`cfg` with `--budget` as its extension budget (`BUDGET_FIELD`); unchanged without
    the flag, or for a paper whose rows extend nothing (no such field)."""
    budget = getattr(args, "budget", None)
    if budget is None or not dataclasses.is_dataclass(cfg) or isinstance(cfg, type):
        return cfg
    if BUDGET_FIELD not in {f.name for f in dataclasses.fields(cfg)}:
        return cfg
    return dataclasses.replace(cfg, **{BUDGET_FIELD: float(budget)})


def _layout(fmt: str, width: int | None) -> str:
    """The table layout: `--format`, where 'auto' is a table fitted to the terminal, and
    piped (stdout not a terminal, no `--width`, no `COLUMNS`) one line per claim ('lines':
    a log of ≈ 1 line per claim instead of ≈ 8; the reasons are in the report)."""
    if fmt != "auto" or width is not None or os.environ.get("COLUMNS"):
        return fmt
    isatty = getattr(sys.stdout, "isatty", None)
    return fmt if isatty is not None and isatty() else "lines"


def _cmd_check(args) -> int:
    from ..claims._checks import any_failed, format_checks, format_lines
    from ..experiments import EXPERIMENTS as exps

    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    out = Path(args.out)
    report = not args.no_report
    as_json = args.format == "json"
    # progress goes where the table does not: stderr for json, else stdout
    progress_stream = sys.stderr if as_json else sys.stdout
    # the checks of the output folder, the configurations and the recorded timings take
    # seconds: a live line says so (nothing silent on a terminal)
    preparing = (
        Status(progress_stream, "flows check: preparing (the output folder, the papers' "
               "settings, their last timings)")
        if live_terminal(progress_stream)
        else None
    )  # fmt: skip
    _preflight(names, exps, out, report)
    width = min(args.width or terminal_width(), MAX_WIDTH)
    fmt = _layout(args.format, args.width)
    if fmt == "lines":  # piped: every line whole (a wrapped half-line is not meaningful alone)
        width = MAX_WIDTH
    mode = "quick" if args.quick else "default"
    command_start = time.perf_counter()
    configs = {n: _with_budget(exps[n].default_config(quick=args.quick), args) for n in names}
    from .. import _compile

    no_cache = getattr(args, "no_cache", False) or _compile.cache_disabled_by_env()
    timings = Timings(write=not no_cache)
    recorded = {n: timings.get(n, configs[n]) for n in names}
    previous: dict[str, float | None] = {}
    for n in names:
        rec = recorded[n]
        previous[n] = rec["wall_s"] if rec else _previous_wall_s(out / n, configs[n])
    known = [w for n in names if (w := previous[n]) is not None]
    jobs = _jobs(args, names, exps, progress_stream, width)
    total = (
        f"; about {_duration(sum(known))} in all (the last runs)"
        if len(known) == len(names)
        else ""
    )
    workers = f"; {jobs} worker processes" if jobs > 1 else ""
    if preparing is not None:  # the header takes its place
        preparing.clear()
        preparing.close()
    print(
        _fit(
            f"flows check: {', '.join(names)} ({mode}) into {out}{total}{workers}",
            width,
            4,
        ),
        file=progress_stream,
        flush=True,
    )
    live = live_terminal(progress_stream)
    failed = False
    done: list[dict] = []

    def finish(k: int, name: str, result, wall: float, cpu: float) -> None:
        """A paper's run is over (in registry order): its report, table and files; `cpu`
        the CPU seconds of its process in the run (every thread: XLA's pool too)."""
        nonlocal failed
        exp = exps[name]
        files = [str(f) for f in result.files]
        report_path = None
        if report:
            report_path = _write_report(exp, result, out, mode=mode, wall_s=wall)
            if report_path is not None:
                files.append(str(report_path))
        failed |= any_failed(result.checks)
        done.append(
            {
                "name": name,
                "title": exp.title,
                "mode": mode,
                "wall_s": wall,
                "cpu_s": cpu,
                "failed": any_failed(result.checks),
                "checks": result.checks,
                "files": files,
                "report": f"{name}/{report_path.name}" if report_path else None,
            }
        )
        if as_json:
            if not live:
                _progress_line(
                    k, names, done, command_start, previous, progress_stream, width, jobs
                )
            return
        if fmt == "lines":  # one line per claim, each naming its paper; nothing wrapped
            print(f"== {name} ({mode}; {wall:.0f}s) ==")
            print(format_lines(result.checks, prefix=name))
            print(f"{name}: wrote " + ", ".join(files))
        else:
            print(f"\n== {name} ({mode}; {wall:.0f}s) ==")
            print(format_checks(result.checks, fmt, width))
            print(_fit("wrote: " + ", ".join(files), width, 2))
        if len(names) > 1 and not live:
            _progress_line(k, names, done, command_start, previous, progress_stream, width, jobs)

    lost: dict[str, str] = {}
    if jobs > 1:
        lost = _run_parallel(
            names, exps, configs, out, jobs, no_cache, recorded, timings, finish,
            progress_stream, width, command_start, live,
        )  # fmt: skip
    else:
        _run_serial(
            names, exps, configs, out, recorded, timings, finish,
            progress_stream, width, command_start, live,
        )  # fmt: skip
    if report and len(names) > 1:
        index = _write_index(out, done, mode=mode, wall_s=time.perf_counter() - command_start)
        if index is not None and not as_json:
            print(_fit(f"wrote: {index}", width, 2))
    if as_json:
        _print_json(done, failed, lost)
    if lost:
        _say_lost(lost, done)
        return EXIT_SOLVER
    return EXIT_FAILED if failed else EXIT_OK


def _preflight(names, exps, out: Path, report: bool) -> None:
    """Refuse a bad `--out` before minutes of computing: each paper's folder, and the
    folder of `index.html` when several papers are checked."""
    from .._io import INDEX_NAME, OutputDir

    for name in names:
        OutputDir.preflight(out / name, exps[name].outputs if report else exps[name].files, name)
    if report and len(names) > 1:
        OutputDir.preflight(out, (INDEX_NAME,))


def _print_json(done: list[dict], failed: bool, lost: dict[str, str]) -> None:
    """`--format json`: every finished paper with its checks, and the papers lost."""
    from ..claims._checks import json_safe

    payload: dict[str, Any] = {
        "experiments": [
            {**{k: v for k, v in e.items() if k != "checks"},
             "checks": [c.to_dict() for c in e["checks"]]}
            for e in done
        ],
        "failed": failed,
    }  # fmt: skip
    if lost:
        payload["lost"] = [{"name": n, "reason": why} for n, why in lost.items()]
    print(json.dumps(json_safe(payload), indent=1, ensure_ascii=False))


def _say_lost(lost: dict[str, str], done: list[dict]) -> None:
    """One line on stderr for each paper whose worker died, naming what was kept."""
    kept = ", ".join(e["name"] for e in done) or "none"
    for name, why in lost.items():
        print(
            f"flows: error: the run of {name} was lost: {why}. Its results were not "
            f"written; every finished paper's are kept ({kept}). Rerun `flows check "
            f"{name}` (alone, it has the machine's memory to itself).",
            file=sys.stderr,
        )


def _run_serial(
    names, exps, configs, out, recorded, timings, finish, stream, width, command_start, live
) -> None:
    """Every paper in turn in this process, its progress shown as it runs."""
    from ..claims._checks import any_failed

    progress: _PlainProgress | _LiveProgress = (_LiveProgress if live else _PlainProgress)(
        stream, width, command_start
    )
    try:
        for k, name in enumerate(names, 1):
            exp = exps[name]
            cfg = configs[name]
            progress.begin(k, len(names), name, recorded[name], _previous_wall_s(out / name, cfg))
            start, cpu0 = time.perf_counter(), time.process_time()
            with contextlib.redirect_stdout(_ProgressLines(progress)) as lines:
                try:
                    result = exp.run(cfg, out)
                finally:
                    lines.flush()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
            progress.end(wall, not any_failed(result.checks))
            timings.record(name, cfg, progress.times, wall)
            finish(k, name, result, wall, cpu)
    finally:
        progress.close()


def _run_parallel(
    names, exps, configs, out, jobs, no_cache, recorded, timings, finish,
    stream, width, command_start, live,
) -> dict[str, str]:  # fmt: skip
    """The papers in `jobs` worker processes (`jobs.run_workers`); their progress lines
    merged as they come (each with its paper's name), their tables and files in the
    registry's order as soon as every paper before them is done. A worker's exception is
    re-raised when its turn comes (as a serial run would have raised it); a worker that
    died is returned, name → why, with every other paper finished."""
    from ..claims._checks import any_failed
    from .jobs import Task, longest_first, run_workers

    tasks = [Task(n, exps[n], configs[n], out) for n in names]
    walls = {n: (recorded[n] or {}).get("wall_s") or _previous_wall_s(out / n, configs[n])
             for n in names}  # fmt: skip
    index = {n: k for k, n in enumerate(names, 1)}
    progress: dict[str, _PlainProgress | _LiveProgress] = {}
    slots: dict[str, int] = {}
    # name → ("done", result, wall, cpu) | ("error", exc) | ("lost", why)
    over: dict[str, tuple] = {}
    lost: dict[str, str] = {}
    turn = 0  # names[turn] is the next paper to report

    def flush() -> None:
        nonlocal turn
        while turn < len(names) and names[turn] in over:
            name = names[turn]
            event = over.pop(name)
            turn += 1
            if event[0] == "error":
                raise event[1]
            if event[0] == "lost":
                lost[name] = event[1]
                continue
            finish(index[name], name, event[1], event[2], event[3])

    events = run_workers(tasks, jobs, no_cache=no_cache, start=longest_first(names, walls))
    # the workers take seconds to start (each loads JAX): a live line until the first bar
    waiting = Status(stream, f"flows check: starting {jobs} worker processes") if live else None
    try:
        for event in events:
            kind, name = event[0], event[1]
            if waiting is not None:  # the bars take its place
                waiting.clear()
                waiting.close()
                waiting = None
            if kind == "start":
                slot = min(set(range(len(names))) - set(slots.values()))
                slots[name] = slot
                p = (_LiveProgress if live else _PlainProgress)(
                    stream, width, command_start, **({"position": slot} if live else {})
                )
                progress[name] = p
                cfg = configs[name]
                p.begin(
                    index[name], len(names), name, recorded[name],
                    _previous_wall_s(out / name, cfg),
                )  # fmt: skip
                continue
            if kind == "line":
                text = event[2]
                tag = f"[{name}]"
                if text.strip() and not text.lstrip().startswith(tag):
                    # the tag after the indent: an indented line (a single run's) stays one
                    indent = text[: len(text) - len(text.lstrip())]
                    text = f"{indent}{tag} {text.lstrip()}"
                if name in progress:
                    progress[name].write(text)
                continue
            p = progress.pop(name, None)
            slots.pop(name, None)
            if kind == "done":
                result, wall, cpu = event[2], event[3], event[4]
                if p is not None:
                    p.end(wall, not any_failed(result.checks))
                    p.close()
                    timings.record(name, configs[name], p.times, wall)
                over[name] = ("done", result, wall, cpu)
            else:
                if p is not None:
                    p.close()
                over[name] = (kind, event[2])
                if kind == "lost" and not live:
                    print(
                        _fit(f"[{index[name]}/{len(names)}] {name}: lost ({event[2]})", width, 4),
                        file=stream,
                        flush=True,
                    )
            flush()
        flush()
    finally:
        events.close()
        for p in progress.values():
            p.close()
    return lost


def _progress_line(k, names, done, command_start, previous, stream, width, jobs=1) -> None:
    """'[k/n] name done in …; elapsed …, about … left' after each experiment: the estimate
    uses the wall time of the last run in each remaining folder where there is one, else
    the mean of the experiments finished now (shared among `jobs` workers)."""
    elapsed = time.perf_counter() - command_start
    left = names[k:]
    mean = sum(e["wall_s"] for e in done) / len(done)
    est = sum(previous.get(n) or mean for n in left) / max(min(jobs, len(left)), 1)
    tail = f"; about {_duration(est)} left (estimate)" if left else "; all done"
    print(
        _fit(
            f"[{k}/{len(names)}] {done[-1]['name']} done in {_duration(done[-1]['wall_s'])}; "
            f"elapsed {_duration(elapsed)}{tail}",
            width,
            4,
        ),
        file=stream,
        flush=True,
    )


def _write_report(exp, result, out: Path, *, mode: str, wall_s: float) -> Path | None:
    """`out/<name>/report.html`; a report that cannot be written is a warning (the results
    are already in place), not a failure of the check."""
    from ..plugin import write_report

    try:
        return write_report(exp, result, out, mode=mode, wall_s=wall_s, command=_command())
    except Exception as exc:  # noqa: BLE001 - the checks and results stand without it
        print(
            f"flows: warning: report.html not written ({type(exc).__name__}: {exc})",
            file=sys.stderr,
        )
        return None


def _write_index(out: Path, done: list[dict], *, mode: str, wall_s: float) -> Path | None:
    from .._io import INDEX_NAME, add_owned_file, versions
    from .._report.html import index_report

    page = index_report(done, mode=mode, command=_command(), wall_s=wall_s, versions=versions())
    try:
        return add_owned_file(
            out, INDEX_NAME, lambda tmp: Path(tmp).write_text(page, encoding="utf-8")
        )
    except (ConfigError, OSError) as exc:
        print(f"flows: warning: {INDEX_NAME} not written: {exc}", file=sys.stderr)
        return None
