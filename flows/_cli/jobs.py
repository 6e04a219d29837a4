"""`flows check --jobs N`: the papers' runs in up to N worker processes at once.

Each paper runs in a fresh interpreter (multiprocessing's 'spawn': no JAX state, thread or
lock is inherited from the command) set up as the command sets itself up (the persistent
compilation cache on unless `--no-cache`/`FLOWS_NO_CACHE`, jit kept on), so the compiled
programs of one worker are read back by the others and by later commands through the cache
folder. A worker sends its progress lines, then its `Report` and wall time (or the
exception that ended it), over its own pipe; the command waits on every pipe and every
worker's exit at once (`multiprocessing.connection.wait`), so a worker that dies without a
word (killed, out of memory, a crash in XLA) is seen at once and named — never a hang.

`run_workers` yields what happens in the order it happens; `flows check` (`check.py`)
puts the results back in the registry's order, so its table, JSON, `index.html` and exit
status are those of a serial run.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
import signal
import sys
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Seconds a worker asked to stop (SIGTERM) gets before it is killed (SIGKILL).
STOP_GRACE_S = 5.0


def cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one:
    a container or `taskset` limited to 2 of 64 cores counts 2): `flows._io.usable_cores`,
    the count saved with every result (`flows.machine`)."""
    from .._io import usable_cores

    return usable_cores()


def sendable(exp) -> bool:
    """Whether `exp` can be rebuilt in a worker process: it pickles (a paper's
    `EXPERIMENT`, by its class). A paper whose `run` was replaced on the instance by a
    local function (tests do this) does not, and runs in the command's own process."""
    try:
        pickle.dumps(exp)
    except Exception:  # noqa: BLE001 - anything pickle refuses: not sendable
        return False
    return True


@dataclass(frozen=True)
class Task:
    """One paper's run: the experiment, its configuration, the output folder."""

    name: str
    exp: Any
    cfg: Any
    out: Path


# Events yielded by `run_workers`, in the order they happen:
#   ("start", name)                 the worker began the paper's run (after its imports)
#   ("line", name, text)            a line the paper printed (its progress)
#   ("done", name, report, wall_s, cpu_s)  the paper's Report, the run's wall time and
#                                   the worker's CPU seconds in it (all its threads)
#   ("error", name, exc)            the exception that ended the run (re-raised by the caller)
#   ("lost", name, reason)          the worker ended without a result: why, in words


class _PipeLines(io.TextIOBase):
    """The worker's stdout: each whole line is sent to the command as ("line", text)."""

    def __init__(self, conn):
        self.conn, self._buf = conn, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.conn.send(("line", line))
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.conn.send(("line", self._buf))
            self._buf = ""


def _rebuild(cls, args, state):
    """The exception a worker raised, rebuilt in the command (`_portable`)."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class _Carried:
    """An exception that pickle cannot round-trip as it is (keyword-only arguments, as
    `SolverError`'s): sent as its class, arguments and the attributes that pickle."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def __reduce__(self):
        state = {}
        for key, value in vars(self.exc).items():
            try:
                pickle.dumps(value)
            except Exception:  # noqa: BLE001 - e.g. a partial trajectory: left behind
                continue
            state[key] = value
        return (_rebuild, (type(self.exc), self.exc.args, state))


def _portable(exc: BaseException):
    """`exc` to send to the command: itself if it survives pickling, else `_Carried` (or,
    failing that, a RuntimeError with its type and message); with the worker's traceback
    attached as a note (shown where the exception is not handled: a bug)."""
    import traceback

    note = "in the worker process:\n" + "".join(traceback.format_exception(exc)).rstrip()
    with contextlib.suppress(Exception):
        exc.add_note(note)
    for candidate in (exc, _Carried(exc)):
        try:
            back = pickle.loads(pickle.dumps(candidate))
        except Exception:  # noqa: BLE001 - try the next form
            continue
        if type(back) is type(exc) and str(back) == str(exc):
            return candidate
    plain = RuntimeError(f"{type(exc).__name__}: {exc}")
    plain.add_note(note)
    return plain


def _die_with_parent() -> None:
    """End this worker as soon as the command that started it is gone (killed: it had no
    chance to stop its workers), so that no orphan goes on computing."""
    import multiprocessing as mp
    import threading
    from multiprocessing.connection import wait

    parent = mp.parent_process()
    if parent is None or parent.sentinel is None:
        return

    def watch():
        wait([parent.sentinel])
        os._exit(1)

    threading.Thread(target=watch, name="flows-check-parent-watch", daemon=True).start()


def _worker(task: Task, no_cache: bool, conn) -> None:
    """The worker process: set up as `flows check` is, run the paper, send the result."""
    from .. import _compile

    _die_with_parent()
    try:
        _compile.tune_gc_for_command()
        if not no_cache and not _compile.cache_disabled_by_env():
            from .app import _enable_cache

            _enable_cache()
        from .env import _jit_kept_on

        lines = _PipeLines(conn)
        conn.send(("start",))
        with _jit_kept_on(), contextlib.redirect_stdout(lines):
            start, cpu0 = time.perf_counter(), time.process_time()
            try:
                report = task.exp.run(task.cfg, task.out)
            finally:
                lines.flush()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu0
        try:
            conn.send(("done", report, wall, cpu))
        except Exception:  # noqa: BLE001 - results that do not pickle: checks and files suffice
            bare = type(report)(report.name, report.checks, report.files, {})
            conn.send(("done", bare, wall, cpu))
    except BaseException as exc:  # noqa: BLE001 - every ending is reported to the command
        code = 1
        with contextlib.suppress(Exception):
            conn.send(("error", _portable(exc)))
    else:
        code = 0
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    conn.close()
    # no interpreter teardown: the results are sent and every file is written atomically;
    # tearing down while XLA's threads still run has crashed (see `app.entry`)
    os._exit(code)


def death(exitcode: int | None) -> str:
    """Why a worker ended without a result, from its exit code."""
    if exitcode is not None and exitcode < 0:
        try:
            sig = signal.Signals(-exitcode).name
        except ValueError:
            sig = f"signal {-exitcode}"
        if -exitcode == signal.SIGKILL:
            return (
                f"its worker process was killed ({sig}: the system's out-of-memory killer "
                "does this, or a person)"
            )
        return f"its worker process died of {sig}"
    return f"its worker process exited with status {exitcode} before sending a result"


def _stop(procs) -> None:
    """End the workers still running: SIGTERM, then SIGKILL after `STOP_GRACE_S`."""
    for p in procs:
        if p.is_alive():
            with contextlib.suppress(Exception):
                p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        p.join(max(deadline - time.monotonic(), 0.0))
        if p.is_alive():
            with contextlib.suppress(Exception):
                p.kill()
            p.join(STOP_GRACE_S)


def longest_first(names: Sequence[str], walls: dict[str, float | None]) -> list[str]:
    """`names` in the order to start them: the longest last run first, those never run
    before ahead of all (their length is unknown), ties in `names`' order. Started longest
    first, n runs on k workers end together more nearly (the `flows check` defaults on 2:
    bias-plateau and multistage, ~2.2 min each, at once, then the short ones)."""
    rank = {n: i for i, n in enumerate(names)}
    return sorted(names, key=lambda n: (-(walls.get(n) or float("inf")), rank[n]))


def run_workers(
    tasks: Sequence[Task], jobs: int, *, no_cache: bool, start: Sequence[str] | None = None
) -> Generator[tuple, None, None]:
    """Run `tasks` in up to `jobs` worker processes at once, started in the order of the
    names in `start` (default: `tasks`' order), yielding the events above as they happen.
    After an "error", the tasks after it in `tasks` (the order a serial run has) are
    stopped or never started — a serial run would not have reached them — and those before
    it finish. Closing the generator (or an exception in the caller) stops every worker
    still running: none outlives the command."""
    import multiprocessing as mp
    from multiprocessing.connection import wait

    ctx = mp.get_context("spawn")
    order = {t.name: i for i, t in enumerate(tasks)}
    by_name = {t.name: t for t in tasks}
    pending = [by_name[n] for n in (start or list(by_name))]
    assert sorted(t.name for t in pending) == sorted(by_name), "start names every task once"
    running: dict[str, tuple[Any, Any]] = {}  # name → (process, connection)
    settled: set[str] = set()
    stop_after: int | None = None  # index of the first task that raised
    try:
        while pending or running:
            if stop_after is not None:
                pending = [t for t in pending if order[t.name] < stop_after]
            while pending and len(running) < jobs:
                task = pending.pop(0)
                recv, send = ctx.Pipe(duplex=False)
                proc = ctx.Process(
                    target=_worker,
                    args=(task, no_cache, send),
                    name=f"flows-check-{task.name}",
                    daemon=False,  # a paper may start processes of its own; stopped below
                )
                proc.start()
                send.close()  # the worker holds the only sending end: EOF when it ends
                running[task.name] = (proc, recv)
            if not running:
                break
            waitables = {conn: name for name, (_, conn) in running.items()}
            for ready in wait(list(waitables)):
                name = waitables[ready]
                if name not in running:  # stopped above, after another task's error
                    continue
                proc, conn = running[name]
                try:
                    msg = conn.recv()
                except (EOFError, OSError):  # the worker ended: done or dead
                    proc.join(STOP_GRACE_S)
                    if proc.is_alive():  # its pipe closed but it hangs: end it
                        _stop([proc])
                    conn.close()
                    del running[name]
                    if name not in settled:
                        settled.add(name)
                        yield ("lost", name, death(proc.exitcode))
                    continue
                except Exception as exc:  # noqa: BLE001 - a message that cannot be read back
                    if name not in settled:
                        settled.add(name)
                        why = f"its result could not be read back ({type(exc).__name__}: {exc})"
                        yield ("lost", name, why)
                    continue
                kind = msg[0]
                if name in settled:  # reported lost already: nothing more from it counts
                    continue
                if kind == "start":
                    yield ("start", name)
                elif kind == "line":
                    yield ("line", name, msg[1])
                elif kind == "done":
                    settled.add(name)
                    yield ("done", name, msg[1], msg[2], msg[3])
                elif kind == "error":
                    settled.add(name)
                    if stop_after is None or order[name] < stop_after:
                        stop_after = order[name]
                    later = [n for n in running if order[n] > stop_after and n not in settled]
                    _stop([running[n][0] for n in later])
                    for n in later:
                        settled.add(n)
                        running[n][1].close()
                        del running[n]
                    yield ("error", name, msg[1])
    finally:
        _stop([p for p, _ in running.values()])
        for _, conn in running.values():
            with contextlib.suppress(Exception):
                conn.close()
