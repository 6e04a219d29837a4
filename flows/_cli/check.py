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
import datetime
import hashlib
import io
import json
import shutil
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

from .._errors import ConfigError
from .env import _command
from .output import EXIT_FAILED, EXIT_OK, EXIT_SOLVER

#: The widest table drawn: a `COLUMNS` or `--width` beyond it (`COLUMNS=10²⁰`, which no
#: terminal has) draws this wide; every line then fits on one line of any real terminal.
MAX_WIDTH = 1000


def terminal_width(fallback: int = 120) -> int:
    """Columns of the terminal (`COLUMNS` if set; `fallback` when not a terminal), in
    [20, `MAX_WIDTH`]."""
    return min(max(shutil.get_terminal_size((fallback, 24)).columns, 20), MAX_WIDTH)


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


class _StampedLines(io.TextIOBase):
    """A text stream that passes whole lines on to `target`, each changed by `edit(line)`
    (e.g. prefixed with the time elapsed); used to time the progress lines that
    experiments and sweeps print."""

    def __init__(self, target, edit):
        self.target, self.edit, self._buf = target, edit, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.target.write(self.edit(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.target.write(self.edit(self._buf))
            self._buf = ""
        self.target.flush()


def _fit(text: str, width: int, indent: int) -> str:
    """`text` wrapped to `width` with a hanging indent; words (paths) are never split."""
    import textwrap

    return textwrap.fill(
        text,
        width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def _config_text(cfg) -> str:
    """`cfg` (a paper's frozen configuration) as canonical JSON: equal text, same run."""
    import dataclasses

    is_instance = dataclasses.is_dataclass(cfg) and not isinstance(cfg, type)
    data = dataclasses.asdict(cfg) if is_instance else cfg  # type: ignore[arg-type]
    try:
        return json.dumps(json.loads(json.dumps(data, default=str)), sort_keys=True)
    except (TypeError, ValueError):
        return repr(data)


def _previous_wall_s(folder: Path, cfg=None) -> float | None:
    """The wall time recorded by the last run in `folder` (its results.json), if any — and,
    given `cfg`, only when that run had the same configuration (a quick run says nothing
    of a full one)."""
    try:
        data = json.loads((folder / "results.json").read_text())
        value = float(data["wall_s"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if cfg is not None:
        stored = data.get("config")
        if stored is None or json.dumps(stored, sort_keys=True) != _config_text(cfg):
            return None
    return value if value > 0 else None


def timings_path() -> Path:
    """`check-timings.json` in the toolkit's cache folder (`$FLOWS_CACHE_DIR`, else
    `~/.cache/flows/jax`, beside the compiled programs; the cache's trimming touches only
    those): the recorded timelines of earlier `flows check` runs on this machine."""
    from .._compile import default_cache_dir

    return default_cache_dir() / "check-timings.json"


class Timings:
    """The timeline of the last `flows check` run of each paper and configuration on this
    machine: when (seconds from the paper's start) each of its progress lines came, and
    its wall time. Read to estimate the time left (`time_left`), written after each paper
    (atomically; a file that cannot be read or written is ignored: estimates only)."""

    def __init__(self, path: Path | None = None, *, write: bool = True):
        self.path = timings_path() if path is None else Path(path)
        self.write = write
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        self.data: dict[str, Any] = data if isinstance(data, dict) else {}

    @staticmethod
    def key(name: str, cfg) -> str:
        digest = hashlib.sha256(_config_text(cfg).encode()).hexdigest()[:16]
        return f"{name}/{digest}"

    def get(self, name: str, cfg) -> dict | None:
        """{"lines": [seconds, …], "wall_s": …, "recorded": date} of the last run, or None."""
        rec = self.data.get(self.key(name, cfg))
        if not isinstance(rec, dict):
            return None
        try:
            lines = [float(t) for t in rec["lines"]]
            wall = float(rec["wall_s"])
        except (TypeError, KeyError, ValueError):
            return None
        return {"lines": lines, "wall_s": wall, "recorded": rec.get("recorded", "")}

    def record(self, name: str, cfg, lines: list[float], wall_s: float) -> None:
        if not self.write:
            return
        from .._io import write_atomic

        self.data[self.key(name, cfg)] = {
            "lines": [round(t, 3) for t in lines],
            "wall_s": round(wall_s, 3),
            "recorded": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        text = json.dumps(self.data, indent=1, sort_keys=True)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(self.path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))
        except OSError:  # a read-only home, a full disk: no estimate next time, nothing worse
            pass


def time_left(recorded: dict | None, times: list[float], elapsed: float) -> float | None:
    """Seconds left for a paper, from the recorded timeline of its last run: the time that
    run took from the progress line this run reached last (its `len(times)`-th) to its end,
    scaled by how fast this run has been so far relative to it (within ×0.5…×2), less the
    time since this run reached that line; None without a record.

    **Arguments:** `recorded` (`Timings.get`), `times` (seconds from this paper's start of
    each progress line so far), `elapsed` (seconds since this paper started)."""
    if recorded is None:
        return None
    lines, wall = recorded["lines"], recorded["wall_s"]
    k = min(len(times), len(lines))
    mark = lines[k - 1] if k else 0.0  # where the recorded run was at the matching line
    here = times[k - 1] if k else 0.0  # and where this run was
    speed = min(max(here / mark, 0.5), 2.0) if mark >= 2.0 else 1.0
    return max(speed * (wall - mark) - (elapsed - here), 0.0)


class _PlainProgress:
    """Progress where no terminal is: the paper's lines stamped with the time elapsed."""

    live = False

    def __init__(self, stream: IO[str], width: int, command_start: float):
        self.stream, self.width, self.command_start = stream, width, command_start
        self.times: list[float] = []
        self.start = time.perf_counter()

    def begin(self, k: int, n: int, name: str, recorded: dict | None, last: float | None):
        self.times, self.start = [], time.perf_counter()
        wall = recorded["wall_s"] if recorded else last
        if wall is not None:
            print(
                _fit(
                    f"[{k}/{n}] {name}: starting; the last run took {_duration(wall)}",
                    self.width,
                    4,
                ),
                file=self.stream,
                flush=True,
            )

    def write(self, line: str) -> None:
        if line.strip():
            self.times.append(time.perf_counter() - self.start)
        stamp = f"[{_duration(time.perf_counter() - self.command_start):>7}] "
        text = _fit(stamp + line, self.width, 10) if line.strip() else line
        self.stream.write(text + "\n")
        self.stream.flush()

    def end(self, wall: float, ok: bool) -> None:
        pass

    def close(self) -> None:
        pass


class _LiveProgress:
    """One tqdm bar per paper on a terminal: stages done of the last run's count (each
    progress line the paper prints announces a stage, so those before it are done), time
    elapsed and left (`time_left`), redrawn every second by a thread; the paper's lines are
    written above the bar (`tqdm.write`), so nothing is lost from the log."""

    live = True
    REFRESH_S = 1.0
    #: Shared by every bar: several run at once under `--jobs` (one per running paper).
    LOCK = threading.RLock()

    def __init__(
        self, stream: IO[str], width: int, command_start: float, position: int | None = None
    ):
        """`position`: the bar's line below the log when several papers run at once
        (`--jobs`); the bar is then removed when its paper is done, and a line says so."""
        self.stream, self.width, self.command_start = stream, width, command_start
        self.position = position
        self.name = ""
        self.lock = self.LOCK
        self.bar = None
        self.times: list[float] = []
        self.recorded: dict | None = None
        self.start = time.perf_counter()
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None

    def begin(self, k: int, n: int, name: str, recorded: dict | None, last: float | None):
        from tqdm import tqdm

        with self.lock:
            self.name = f"[{k}/{n}] {name}"
            self.times, self.recorded = [], recorded
            if recorded is None and last is not None:  # results.json: a wall time, no stages
                self.recorded = {"lines": [], "wall_s": last, "recorded": ""}
            total = len(recorded["lines"]) if recorded and recorded["lines"] else None
            self.start = time.perf_counter()
            fmt = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} stages "
            self.bar = tqdm(
                total=total,
                desc=f"[{k}/{n}] {name}",
                file=self.stream,
                bar_format=(fmt if total else "{desc}: {n_fmt} stages done ")
                + "[{elapsed}{postfix}]",
                # the table's width, and rows enough: a terminal that reports 0 × 0 (a bare
                # pty, `docker run -t`) made tqdm hide the bar
                ncols=self.width,
                nrows=max(shutil.get_terminal_size((120, 24)).lines, 24),
                leave=self.position is None,
                position=self.position,
                mininterval=0.0,
            )
            self._postfix()
            self.bar.refresh()
        if self.thread is None:
            self.thread = threading.Thread(target=self._tick, name="flows-check-bar", daemon=True)
            self.thread.start()

    def _postfix(self) -> None:
        assert self.bar is not None
        left = time_left(self.recorded, self.times, time.perf_counter() - self.start)
        if left is None:
            text = "no earlier run to estimate from"
        elif left > 0:
            text = f"about {_duration(left)} left"
        else:
            text = "past the estimate; finishing"
        self.bar.set_postfix_str(text, refresh=False)
        if self.bar.total is not None and len(self.times) > self.bar.total:
            self.bar.total = len(self.times)  # more stages than last time

    def _tick(self) -> None:
        while not self.stop.wait(self.REFRESH_S):
            with self.lock:
                if self.bar is not None:
                    self._postfix()
                    self.bar.refresh()

    def write(self, line: str) -> None:
        with self.lock:
            if line.strip():
                self.times.append(time.perf_counter() - self.start)
            if self.bar is None:
                self.stream.write(line + "\n")
                return
            self.bar.write(line, file=self.stream)
            if line.strip():
                # a line announces a stage: those before it are done
                self.bar.n = len(self.times) - 1
                self._postfix()
                self.bar.refresh()

    def end(self, wall: float, ok: bool) -> None:
        with self.lock:
            if self.bar is None:
                return
            self.bar.n = self.bar.total = max(len(self.times), 1)  # full: the paper is done
            self.bar.set_postfix_str(f"done in {_duration(wall)}", refresh=False)
            if self.position is not None:  # one of several bars: it goes, a line stays
                self.bar.write(f"{self.name}: done in {_duration(wall)}", file=self.stream)
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        self.stop.set()
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.bar = None


class _ProgressLines(io.TextIOBase):
    """The stream the papers print their progress to: whole lines go to `progress.write`."""

    def __init__(self, progress):
        self.progress, self._buf = progress, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.progress.write(line)
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.progress.write(self._buf)
            self._buf = ""


def _is_terminal(stream) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except (OSError, ValueError):
        return False


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


def _cmd_check(args) -> int:
    from .._io import INDEX_NAME, OutputDir
    from ..claims._checks import any_failed, format_checks, json_safe
    from ..experiments import EXPERIMENTS as exps

    names = sorted(exps) if args.experiment == "all" else [args.experiment]
    out = Path(args.out)
    report = not args.no_report
    for name in names:  # refuse a bad --out before minutes of computing
        OutputDir.preflight(out / name, exps[name].outputs if report else exps[name].files, name)
    if report and len(names) > 1:
        OutputDir.preflight(out, (INDEX_NAME,))
    as_json = args.format == "json"
    width = min(args.width or terminal_width(), MAX_WIDTH)
    mode = "quick" if args.quick else "default"
    # progress goes where the table does not: stderr for json, else stdout
    progress_stream = sys.stderr if as_json else sys.stdout
    command_start = time.perf_counter()
    configs = {n: exps[n].default_config(quick=args.quick) for n in names}
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
    print(
        _fit(
            f"flows check: {', '.join(names)} ({mode}) into {out}{total}{workers}",
            width,
            4,
        ),
        file=progress_stream,
        flush=True,
    )
    live = _is_terminal(progress_stream)
    failed = False
    done: list[dict] = []

    def finish(k: int, name: str, result, wall: float) -> None:
        """A paper's run is over (in registry order): its report, table and files."""
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
        print(f"\n== {name} ({mode}; {wall:.0f}s) ==")
        print(format_checks(result.checks, args.format, width))
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
    if lost:
        kept = ", ".join(e["name"] for e in done) or "none"
        for name, why in lost.items():
            print(
                f"flows: error: the run of {name} was lost: {why}. Its results were not "
                f"written; every finished paper's are kept ({kept}). Rerun `flows check "
                f"{name}` (alone, it has the machine's memory to itself).",
                file=sys.stderr,
            )
        return EXIT_SOLVER
    return EXIT_FAILED if failed else EXIT_OK


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
            start = time.perf_counter()
            with contextlib.redirect_stdout(_ProgressLines(progress)) as lines:
                try:
                    result = exp.run(cfg, out)
                finally:
                    lines.flush()
            wall = time.perf_counter() - start
            progress.end(wall, not any_failed(result.checks))
            timings.record(name, cfg, progress.times, wall)
            finish(k, name, result, wall)
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
    over: dict[str, tuple] = {}  # name → ("done", result, wall) | ("error", exc) | ("lost", why)
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
            finish(index[name], name, event[1], event[2])

    events = run_workers(tasks, jobs, no_cache=no_cache, start=longest_first(names, walls))
    try:
        for event in events:
            kind, name = event[0], event[1]
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
                    text = f"{tag} {text}"
                if name in progress:
                    progress[name].write(text)
                continue
            p = progress.pop(name, None)
            slots.pop(name, None)
            if kind == "done":
                result, wall = event[2], event[3]
                if p is not None:
                    p.end(wall, not any_failed(result.checks))
                    p.close()
                    timings.record(name, configs[name], p.times, wall)
                over[name] = ("done", result, wall)
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
