"""`flows sweep <experiment>`: a paper's grid of runs through the sweep engine
(`flows._sweep`), resumable, its per-point lines stamped with the time elapsed and an
estimate of the time left."""

from __future__ import annotations

import contextlib
import re
import sys
import threading
import time

from .._sweep.engine import SweepProgress
from . import flags as fl
from . import live
from . import text as words
from .flags import Flag
from .lines import _duration, _StampedLines
from .live import live_terminal
from .output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK

#: Options every `flows sweep <experiment>` has (the engine's, not the experiment's).
SWEEP_ENGINE_FLAGS = (
    Flag("out", "output folder (created, or resumed)", required=True),
    Flag("scheduler", "Dask scheduler address (tcp://host:8786)"),
    Flag(
        "connect_timeout",
        "seconds to wait for the scheduler (default 10)",
        fl.positive("--connect-timeout"),
        default=10.0,
    ),
    Flag("no_plot", "do not write the sweep's figure", action="store_true"),
    Flag(
        "global_error",
        "also estimate each number's global error (a companion computation at tolerances "
        "10x tighter; saved as <name>_error; about twice the time)",
        action="store_true",
    ),
    Flag("quiet", "print only the summary", action="store_true"),
)


def add_parser(sub, exps) -> None:
    """`flows sweep <name>` for every experiment in `exps` that has a sweep: its grid
    flags and the engine's (`SWEEP_ENGINE_FLAGS`)."""
    w = sub.add_parser(
        "sweep",
        help=words.COMMANDS["sweep"],
        description="Every point is written atomically to OUT/points/, the combined results "
        "to OUT/sweep.nc. Rerunning the same command resumes (completed points are skipped, "
        "failed ones retried); a larger grid extends the folder. Exit status: 0 all points "
        "ok, 1 some failed, 2 bad input.",
    )
    w_sub = w.add_subparsers(dest="experiment", required=True, metavar="experiment")
    for name in sorted(exps):
        e = exps[name]
        if not e.has_sweep:
            continue
        wp = w_sub.add_parser(name, help=e.title, description=e.title)
        for flag in (*e.sweep_flags, *SWEEP_ENGINE_FLAGS):
            flag.add_to(wp)


def _cmd_sweep(args) -> int:
    from .._io import check_output_path
    from ..experiments import EXPERIMENTS

    exp = EXPERIMENTS[args.experiment]
    fl.refuse_inapplicable(exp.sweep_flags, args)  # a flag its --method ignores
    check_output_path(args.out)
    timer = _SweepTimer()
    bar = _SweepBar(sys.stdout, timer) if not args.quiet and live_terminal(sys.stdout) else None
    # without a terminal, the engine's lines as they come, stamped with the time elapsed
    lines = _StampedLines(sys.stdout, timer.edit) if bar is None else None
    try:
        with contextlib.redirect_stdout(lines) if lines else contextlib.nullcontext():
            try:
                result = exp.sweep(
                    args.out,
                    fl.values(args, exp.sweep_flags),
                    scheduler=args.scheduler,
                    connect_timeout=args.connect_timeout,
                    plot=not args.no_plot,
                    global_error=args.global_error,
                    progress=bar if bar is not None else not args.quiet,
                )
            finally:
                if lines is not None:
                    lines.flush()
                if bar is not None:
                    bar.close()
    except KeyboardInterrupt:
        print(
            f"flows: sweep interrupted; completed points are saved in {args.out}/points. "
            "Rerun the same command to resume.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if args.quiet:
        print(result.summary)
    return EXIT_OK if result.ok else EXIT_FAILED


class _SweepTimer:
    """Adds the time elapsed and an estimate of the time left to the sweep's per-point
    progress lines ('[7/12] m=1000 … (elapsed 1.2 min, about 50s left)'). The estimate is
    the mean time per point finished in this command, times the points left."""

    _POINT = re.compile(r"^\[(\d+)/(\d+)\] ")

    def __init__(self):
        self.start = time.perf_counter()
        self.first: int | None = None  # the counter of the first point finished here

    def edit(self, line: str) -> str:
        m = self._POINT.match(line)
        if not m:
            return line
        i, n = int(m.group(1)), int(m.group(2))
        if self.first is None:
            self.first = i
        elapsed = time.perf_counter() - self.start
        ran = i - self.first + 1
        tail = f"about {_duration(elapsed / ran * (n - i))} left" if i < n else "last point"
        return f"{line} (elapsed {_duration(elapsed)}, {tail})"


class _SweepBar(SweepProgress):
    """The sweep on a terminal: its lines (header, one per point written, summary) as they
    come, above one live bar of the grid's points — points done of all, the time elapsed
    and left (tqdm's estimate from the points finished in this command, smoothed, so it
    learns as they come), and what runs now: the batch's points, or `compiling` while JAX
    compiles. Redrawn every half second; closed (its last frame kept) before the
    summary."""

    def __init__(self, stream, timer: _SweepTimer):
        super().__init__(True)
        self.stream, self.timer = stream, timer
        self.bar = None
        self.running = ""
        self.since = time.perf_counter()
        self.stop = threading.Event()

    def line(self, text: str) -> None:
        with live.DRAW_LOCK:
            if self.bar is None:
                print(text, file=self.stream, flush=True)
            else:
                self.bar.write(text, file=self.stream)

    def begin(self, n_points: int, n_done: int) -> None:
        from tqdm import tqdm

        live.watch_compiles()
        with live.DRAW_LOCK:
            self.bar = tqdm(
                total=n_points,
                initial=n_done,
                desc="sweep",
                file=self.stream,
                bar_format="{desc}: {n_fmt}/{total_fmt} points |{bar}| "
                "[{elapsed}<{remaining}{postfix}]",
                ncols=min(live.columns(), 120),
                # a terminal that reports 0 rows (a bare pty, `docker run -t`) hid the bar
                nrows=max(live.rows(), 24),
                mininterval=0.0,
                smoothing=0.3,
            )
            live.opened(self)
        threading.Thread(target=self._tick, name="flows-sweep-bar", daemon=True).start()

    def batch(self, labels: list[str]) -> None:
        more = f" and {len(labels) - 1} more" if len(labels) > 1 else ""
        self.running, self.since = f"running {labels[0]}{more}", time.perf_counter()
        self._redraw()

    def point(self, k: int, n: int, text: str) -> None:
        self.line(self.timer.edit(f"[{k}/{n}] {text}"))
        with live.DRAW_LOCK:
            if self.bar is not None:
                self.bar.update(1)

    def phase(self, text: str) -> None:
        self.running, self.since = text, time.perf_counter()
        self._redraw()

    def _doing(self) -> str:
        busy = live.compiling()
        if busy is not None:
            return f"compiling ({_duration(busy)}) · {self.running}"
        if self.running:
            return f"{self.running} ({_duration(time.perf_counter() - self.since)})"
        return ""

    def _redraw(self) -> None:
        with live.DRAW_LOCK:
            if self.bar is not None:
                self.bar.set_postfix_str(self._doing(), refresh=False)
                self.bar.refresh()

    def _tick(self) -> None:
        while not self.stop.wait(live.REFRESH_S):
            self._redraw()

    def end(self) -> None:
        self.close()

    def close(self) -> None:
        self.stop.set()
        with live.DRAW_LOCK:
            if self.bar is not None:
                self.running = ""
                self.bar.set_postfix_str("", refresh=False)
                self.bar.close()  # the last frame, then a newline
                self.stream.flush()
                self.bar = None
            live.closed(self)
