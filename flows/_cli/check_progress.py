"""The progress of `flows check`: the recorded timeline of each paper's last run
(`Timings`, `time_left`), and its display — one live tqdm bar per paper on a terminal
(`_LiveProgress`), the paper's lines stamped with the time elapsed elsewhere
(`_PlainProgress`)."""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
import threading
import time
from pathlib import Path
from typing import IO, Any

from .lines import _duration, _fit
from .live import DRAW_LOCK, REFRESH_S, closed, compiling, opened, watch_compiles


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
    """Progress where no terminal is: the paper's lines stamped with the time elapsed,
    sparse: its stage lines each, the lines of its single runs (indented) at most one
    every `DETAIL_EVERY_S` — the latest, with how many came since the last line."""

    live = False
    DETAIL_EVERY_S = 30.0

    def __init__(self, stream: IO[str], width: int, command_start: float):
        self.stream, self.width, self.command_start = stream, width, command_start
        self.times: list[float] = []
        self.start = self.shown = time.perf_counter()
        self.held, self.latest = 0, ""

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
        now = time.perf_counter()
        if line.strip():
            self.times.append(now - self.start)
        if line[:1].isspace() and line.strip():  # a run's own line (indented): held back
            self.held, self.latest = self.held + 1, line.strip()
            if now - self.shown >= self.DETAIL_EVERY_S:
                self._show_held()
            return
        self._show_held()
        self._print(line)

    def _print(self, line: str) -> None:
        self.shown = time.perf_counter()
        stamp = f"[{_duration(self.shown - self.command_start):>7}] "
        text = _fit(stamp + line, self.width, 10) if line.strip() else line
        self.stream.write(text + "\n")
        self.stream.flush()

    def _show_held(self) -> None:
        """The latest of the held run lines, with how many came since the last line."""
        if self.held:
            before = self.held - 1
            more = f" (and {before} more run{'s' if before != 1 else ''} before it)"
            self._print(f"  {self.latest}{more if before else ''}")
            self.held = 0

    def end(self, wall: float, ok: bool) -> None:
        self._show_held()

    def close(self) -> None:
        self._show_held()


class _LiveProgress:
    """One tqdm bar per paper on a terminal: stages done of the last run's count (each
    progress line the paper prints announces a stage, so those before it are done), time
    elapsed and left (`time_left`), redrawn every second by a thread; the paper's lines are
    written above the bar (`tqdm.write`), so nothing is lost from the log."""

    live = True
    REFRESH_S = REFRESH_S
    #: Shared by every bar (several run at once under `--jobs`) and every live line.
    LOCK = DRAW_LOCK

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
        self.latest = ""  # the stage under way: the paper's last line
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
            self.latest = ""
            self._postfix()
            self.bar.refresh()
            opened(self)
        watch_compiles()
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
        busy = compiling() if self.position is None else None  # workers' compiles unheard
        if busy is not None:
            text += f"; compiling ({_duration(busy)})"
        elif self.latest:
            text += f"; {self.latest}"
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
                self.latest = re.sub(r"^\[[^\]]*\]\s*", "", line.strip())  # less its tag
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
            self.stream.flush()
            self.bar = None
            closed(self)

    def close(self) -> None:
        self.stop.set()
        with self.lock:
            if self.bar is not None:
                self.bar.close()
                self.stream.flush()
                self.bar = None
            closed(self)
