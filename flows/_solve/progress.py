"""The live progress of a solve (`simulate(…, progress=True)`, `flows simulate --progress`).

`RunMeter` is a diffrax progress meter: inside the compiled loop it counts step attempts
and rejected steps (an attempt that does not advance the clock) and, every
`refresh_steps` attempts, hands (clock value reached, physical time, attempts, rejected) to
the host through one callback. On the host `Bar` shows them:

- on a terminal (not `TERM=dumb`, at least 40 columns), one live tqdm bar: the share of
  the run's clock done, the physical time reached of t1, the steps and rejected steps,
  the elapsed time and tqdm's estimate of the time left (smoothed over the recent rate,
  so it learns from the run);
- elsewhere (CI logs, pipes, notebooks' captured stderr), a plain line at every tenth of
  the run, with an estimate from the run's average rate so far.

The callbacks exist only when progress is asked for; a program with them is a different
compiled program (and is not written to the persistent compilation cache), so a run
without progress pays nothing. Another live line on the same terminal (the command line's
status) steps aside when a bar opens: `ON_LIVE_BAR` holds what to call first.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

__all__ = ["ON_LIVE_BAR", "Bar", "RunMeter"]

#: Called (no arguments) before a live bar first draws: another display on the terminal
#: blanks its line.
ON_LIVE_BAR: list[Callable[[], None]] = []
#: The narrowest terminal that gets a live bar (narrower: plain lines).
MIN_COLUMNS = 40


def _live(stream) -> bool:
    """A terminal that can show a live bar: `isatty`, `TERM` not 'dumb', wide enough."""
    isatty = getattr(stream, "isatty", None)
    try:
        tty = bool(isatty and isatty())
    except (OSError, ValueError):
        return False
    cols = shutil.get_terminal_size((80, 24)).columns
    return tty and os.environ.get("TERM", "") != "dumb" and (cols or 80) >= MIN_COLUMNS


class Bar:
    """The host side of one run's progress: a tqdm bar on a terminal, plain lines elsewhere.

    `update(fraction, t, steps, rejected)`: `fraction` of the run's clock done (0 … 1), `t`
    the physical time reached (of `t1`)."""

    def __init__(self, t1: float, stream: IO[str] | None = None, live: bool | None = None):
        self.t1 = float(t1)
        self.stream = sys.stderr if stream is None else stream
        self.live = _live(self.stream) if live is None else live
        self.start = time.perf_counter()
        self.next_line = 0.1  # plain mode: the next tenth to report
        self.last: tuple | None = None
        self.done = False  # plain mode: the 100 % line is printed
        self.bar = None
        if self.live:
            from tqdm import tqdm

            for make_room in list(ON_LIVE_BAR):
                make_room()
            self.bar = tqdm(
                total=1000,
                file=self.stream,
                bar_format="{l_bar}{bar}| [{elapsed}<{remaining}] {postfix}",
                desc="solving",
                dynamic_ncols=True,
                # a terminal that reports 0 rows (a bare pty, `docker run -t`) hid the bar
                nrows=max(shutil.get_terminal_size((120, 24)).lines, 24),
                mininterval=0.2,
                smoothing=0.3,
                leave=True,
            )

    def _postfix(self, t: float, steps: int, rejected: int) -> str:
        return f"t = {t:.4g} of {self.t1:.4g}, {steps} steps ({rejected} rejected)"

    def update(self, fraction: float, t: float, steps: int, rejected: int) -> None:
        fraction = min(max(float(fraction), 0.0), 1.0)
        self.last = (fraction, float(t), int(steps), int(rejected))
        if self.bar is not None:
            self.bar.n = round(1000 * fraction)
            self.bar.set_postfix_str(self._postfix(t, steps, rejected), refresh=False)
            self.bar.refresh()
            return
        if (fraction < self.next_line and fraction < 1.0) or self.done:
            return
        self.done = fraction >= 1.0
        while self.next_line <= fraction:
            self.next_line += 0.1
        elapsed = time.perf_counter() - self.start
        left = elapsed * (1 - fraction) / fraction if fraction > 0 else math.nan
        eta = "" if fraction >= 1.0 or not math.isfinite(left) else f", about {left:.3g} s left"
        print(
            f"flows: {100 * fraction:3.0f}% · {self._postfix(t, steps, rejected)} · "
            f"{elapsed:.3g} s{eta}",
            file=self.stream,
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()  # its last frame and a newline, which tqdm leaves unflushed
            self.stream.flush()
        elif self.last is not None and self.last[0] < 1.0:  # stopped early (event, failure)
            fraction, t, steps, rejected = self.last
            print(
                f"flows: stopped at {100 * fraction:.0f}% · {self._postfix(t, steps, rejected)}",
                file=self.stream,
                flush=True,
            )


class _Bars:
    """The host's open bars, by index (callbacks carry the index, not the object)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.bars: dict[int, Bar] = {}
        self.next = 0

    def open(self, t1) -> np.ndarray:
        with self.lock:
            self.next += 1
            self.bars[self.next] = Bar(float(np.asarray(t1)))
            return np.asarray(self.next, dtype=np.int32)

    def update(self, idx, fraction, t, steps, rejected) -> np.ndarray:
        with self.lock:
            bar = self.bars.get(int(np.asarray(idx)))
        if bar is not None:
            bar.update(float(fraction), float(t), int(steps), int(rejected))
        return np.asarray(idx, dtype=np.int32)

    def close(self, idx) -> None:
        with self.lock:
            bar = self.bars.pop(int(np.asarray(idx)), None)
        if bar is not None:
            bar.close()


_BARS = _Bars()


class _MeterState(eqx.Module):
    idx: jax.Array
    steps: jax.Array
    rejected: jax.Array
    last: jax.Array  # the fraction after the previous attempt
    t: jax.Array  # the physical time reached


class RunMeter(diffrax.AbstractProgressMeter):
    """A diffrax progress meter for `Bar` (see the module). `to_physical` maps the solve's
    clock value to physical time; `t1` is the physical end."""

    s0: jax.Array
    s1: jax.Array
    t1: jax.Array
    to_physical: Callable[[Any], Any] = eqx.field(static=True)
    refresh_steps: int = eqx.field(static=True, default=25)

    def init(self) -> _MeterState:
        idx = io_callback(_BARS.open, jax.ShapeDtypeStruct((), jnp.int32), self.t1)
        zero = jnp.zeros((), jnp.int32)
        s0 = jnp.asarray(self.s0)
        return _MeterState(idx, zero, zero, jnp.zeros((), s0.dtype), self.to_physical(s0))

    def step(self, state: _MeterState, progress) -> _MeterState:
        progress = jnp.asarray(progress, state.last.dtype)
        steps = state.steps + 1
        rejected = state.rejected + (progress <= state.last).astype(jnp.int32)
        t = self.to_physical(self.s0 + progress * (self.s1 - self.s0))

        def report(idx):
            return jax.pure_callback(
                _BARS.update,
                jax.ShapeDtypeStruct((), jnp.int32),
                idx,
                progress,
                t,
                steps,
                rejected,
            )

        due = (steps % self.refresh_steps == 0) | (progress >= 1)
        idx = jax.lax.cond(due, report, lambda i: i, state.idx)
        return _MeterState(idx, steps, rejected, jnp.maximum(progress, state.last), t)

    def close(self, state: _MeterState) -> None:
        final = jax.pure_callback(
            _BARS.update,
            jax.ShapeDtypeStruct((), jnp.int32),
            state.idx,
            state.last,
            state.t,
            state.steps,
            state.rejected,
        )
        io_callback(_BARS.close, None, final)
