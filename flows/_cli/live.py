"""What a command shows while it works on a terminal: one status line redrawn in place
(`Status`), told whether JAX is compiling right now (`compiling`), and the rules for when
a stream can show such a line at all (`live_terminal`).

A live line is drawn with a carriage return and padded with spaces, never with other
control sequences, so any terminal that honours `\\r` shows it cleanly. Where a stream
cannot show one (not a terminal, `TERM=dumb`, fewer than `MIN_COLUMNS` columns) the
commands print plain, sparse lines instead. Every live line open is known here, so that
Ctrl-C and errors end it with a newline before their message (`end_lines`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from typing import IO

from .lines import _duration

#: The narrowest terminal that gets a live line; a narrower one gets plain lines.
MIN_COLUMNS = 40
#: Seconds between redraws of a live line.
REFRESH_S = 0.5


def live_terminal(stream) -> bool:
    """Whether `stream` can show a live line: a terminal (`isatty`), `TERM` not 'dumb',
    and at least `MIN_COLUMNS` columns wide (`COLUMNS` if set, else the terminal's)."""
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty and isatty())
    except (OSError, ValueError):
        return False
    if not tty or os.environ.get("TERM", "") == "dumb":
        return False
    return columns() >= MIN_COLUMNS


def columns() -> int:
    """The terminal's width (`COLUMNS` if set), 80 where it reports none."""
    cols = shutil.get_terminal_size((80, 24)).columns
    return cols if cols > 0 else 80


def rows() -> int:
    """The terminal's height (`LINES` if set), 24 where it reports none."""
    lines = shutil.get_terminal_size((80, 24)).lines
    return lines if lines > 0 else 24


# --- whether JAX is compiling: its monitoring events --------------------------------------


class _Compiles:
    """JAX's compilation events, heard through `jax.monitoring`: a compile request starts
    (`compile_requests_use_cache`, or a backend compile without the cache) and ends (the
    backend compile's duration, or a read from the persistent cache)."""

    START = "/jax/compilation_cache/compile_requests_use_cache"
    END = (
        "/jax/core/compile/backend_compile_duration",
        "/jax/compilation_cache/cache_retrieval_time_sec",
    )

    def __init__(self):
        self.since: float | None = None  # when the compile under way started
        self.count = 0  # compiles finished
        self.installed = False

    def install(self) -> None:
        if self.installed:
            return
        from jax import monitoring

        monitoring.register_event_listener(self._event)
        monitoring.register_event_duration_secs_listener(self._ended)
        self.installed = True

    def _event(self, event: str, **_) -> None:
        if event == self.START:
            self.since = time.perf_counter()

    def _ended(self, event: str, duration_secs: float, **_) -> None:
        if event in self.END:
            self.since = None
            self.count += 1


_COMPILES = _Compiles()


def compiling() -> float | None:
    """Seconds the compilation under way has taken, or None when JAX is not compiling
    (listening starts with the first live display: `watch_compiles`)."""
    since = _COMPILES.since
    return None if since is None else time.perf_counter() - since


def watch_compiles() -> None:
    """Start listening to JAX's compilation events (once per process)."""
    _COMPILES.install()


# --- live lines --------------------------------------------------------------------------

#: Every lock a live display draws under: one, so that two never interleave.
DRAW_LOCK = threading.RLock()
_OPEN: set = set()


def end_lines() -> None:
    """End every live line with a newline (before an error or interrupt message), so the
    message starts on a line of its own and the terminal is left clean."""
    for status in list(_OPEN):
        status.close()


def any_open() -> bool:
    """Whether a live line is on the terminal (a `Status`, or a bar registered with
    `opened`)."""
    return bool(_OPEN)


def opened(display) -> None:
    """`display` (anything with `close()`) draws a live line until `closed(display)`."""
    _OPEN.add(display)


def closed(display) -> None:
    _OPEN.discard(display)


@contextlib.contextmanager
def lines_ended():
    """On an exception (an error, Ctrl-C), every live line ends before it propagates."""
    try:
        yield
    except BaseException:
        end_lines()
        raise


#: The launcher's "starting" line (`_flows_launch`), until the command takes over.
STARTING = None


def end_starting() -> None:
    """End the launcher's live "starting" line, if it drew one."""
    global STARTING
    if STARTING is not None:
        STARTING.stop()
        STARTING = None


class Status:
    """One live status line of a command on a terminal, redrawn every `REFRESH_S` by a
    thread: `label`, what it is doing (`compiling …` while JAX compiles, else `phase`),
    the time elapsed and, given the last run's time (`expected_s`), about how long is left.
    `close(final)` draws `final` (or the last frame) and ends the line."""

    def __init__(self, stream: IO[str], label: str, expected_s: float | None = None):
        self.stream, self.label, self.expected_s = stream, label, expected_s
        self.phase = "running"
        self.start = time.perf_counter()
        self.width = 0  # characters of the frame on screen (to blank a shorter one)
        self.paused = False
        self.stop = threading.Event()
        watch_compiles()
        _OPEN.add(self)
        self._draw(self.frame())
        self.thread = threading.Thread(target=self._tick, name="flows-status", daemon=True)
        self.thread.start()

    def frame(self) -> str:
        elapsed = time.perf_counter() - self.start
        busy = compiling()
        doing = f"compiling ({_duration(busy)})" if busy is not None else self.phase
        text = f"{self.label}: {doing} · {_duration(elapsed)}"
        if self.expected_s is not None:
            left = self.expected_s - elapsed
            text += f", about {_duration(left)} left" if left > 0 else ", past the last run's time"
        return text

    def _draw(self, text: str) -> None:
        cols = columns() - 1
        text = text if len(text) <= cols else text[: cols - 1] + "…"
        with DRAW_LOCK:
            pad = " " * max(self.width - len(text), 0)
            # counted before the write: Ctrl-C landing inside it still ends the line
            self.width = len(text)
            try:
                self.stream.write("\r" + text + pad)
                self.stream.flush()
            except (OSError, ValueError):  # the terminal went away: stop drawing
                self.stop.set()

    def clear(self) -> None:
        """Blank the line (another display takes it over); `resume` draws again."""
        with DRAW_LOCK:
            self.paused = True
            if self.width:
                self.stream.write("\r" + " " * self.width + "\r")
                self.stream.flush()
                self.width = 0

    def resume(self) -> None:
        with DRAW_LOCK:
            self.paused = False

    def _tick(self) -> None:
        while not self.stop.wait(REFRESH_S):
            with DRAW_LOCK:
                if not self.paused and not self.stop.is_set():
                    self._draw(self.frame())

    def close(self, final: str | None = None) -> None:
        with DRAW_LOCK:
            if self not in _OPEN:
                return
            _OPEN.discard(self)
            self.stop.set()
            if final is not None:
                self._draw(final)
            elif not self.width:
                return
            try:
                self.stream.write("\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass
