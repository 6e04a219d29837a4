"""Command line: `flows check`, `flows simulate`, `flows sweep`, `flows derive` (also
`python -m flows`).

The parser is generated from the experiment registry (`flows.experiments.EXPERIMENTS`):
each paper declares its own `simulate` and `sweep` flags.

Exit status: 0 success (no applicable check failed), 1 a check or identity failed
(sweep: a grid point failed), 2 bad input (before anything is computed or written; also
an environment variable JAX cannot start with, `JAX_PLATFORMS` or `XLA_FLAGS`: the
message names it and how to unset it), 3 a solver failure or a failed accuracy
certificate (the message names the time reached and what to try) or a result that could
not be written (disk full, file too large: the file and the cause named, the previous
file untouched; stdout to a full disk or `/dev/full`: one line "flows: error: cannot
write output: <cause>" on stderr), 130 interrupted (Ctrl-C), 141 the reader of the
output went away (`flows derive | head -1`): no message and no traceback, as a Unix tool
that SIGPIPE ended (128 + 13, what the shell shows for `cat`; Python's recommended
pattern — stdout pointed at /dev/null, then exit — with 141 rather than 1, which here
means a failed check).

Output survives any terminal: where stdout's or stderr's encoding lacks the toolkit's
characters (`PYTHONIOENCODING=ascii`, a latin-1 terminal) they are written in ASCII
(→ "->", ≤ "<=", θ "theta", x² "x^2", ȧ "a'", anything else as a `\\u` escape), never an
error (`_spell_unencodable`).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import re
import signal
import sys
import time

from .. import _compile
from .._errors import ConfigError, SolverError, WriteError
from . import flags as fl
from . import live
from . import simulate as _simulate
from . import sweep as _sweep
from . import text as words
from .check import _cmd_check
from .env import _check_environment, _jit_kept_on
from .output import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_SOLVER,
    _finish_output,
    _guard_output,
    _OutputLost,
    path_refusal,
)
from .simulate import _cmd_simulate
from .simulate import _observable_notes as _observable_notes  # read by the report's tests
from .sweep import SWEEP_ENGINE_FLAGS as SWEEP_ENGINE_FLAGS
from .sweep import _cmd_sweep
from .sweep import _SweepTimer as _SweepTimer  # read by the report's tests


def _enable_cache() -> None:
    """Turn the persistent compilation cache on; a folder that cannot be used, and later a
    cache entry that cannot be read or written, are one line each on stderr ("flows:
    warning: …") and the run goes on uncached."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _compile.enable_compilation_cache()
    for w in caught:
        print(f"flows: warning: {w.message}", file=sys.stderr)
    default = warnings.showwarning
    if getattr(default, "flows_cache_lines", False):  # already installed (main called again)
        return

    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        if "persistent compilation cache" in text or "persistent cache" in text:
            first = text.splitlines()[0] if text else text
            print(f"flows: warning: {first} (compiled again; the run goes on)", file=sys.stderr)
            return
        default(message, category, filename, lineno, file, line)

    show.flows_cache_lines = True  # type: ignore[attr-defined]
    warnings.showwarning = show


def _experiments():
    from ..experiments import EXPERIMENTS

    return EXPERIMENTS


class _Parser(argparse.ArgumentParser):
    """argparse that reads `--rtol -1e-6` as a (bad) value, not as a missing argument: its
    negative-number pattern knows no exponents, so `-1e-6` looked like an unknown flag."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)  # `--r` must not silently mean `--rtol`
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(
            r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-(inf|nan|infinity)$", re.IGNORECASE
        )


#: The table layouts of `flows check --format`.
FORMATS = ("auto", "wide", "compact", "lines", "json")


def build_parser() -> argparse.ArgumentParser:
    """The parser, generated from the experiment registry: each experiment's own flags
    under `flows simulate <name>` and `flows sweep <name>` (a flag it does not declare is
    refused by argparse, exit 2)."""
    exps = _experiments()
    p = _Parser(prog="flows", description=words.DESCRIPTION)
    words.add_top_level(p)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("check", help=words.COMMANDS["check"])
    c.add_argument(
        "experiment",
        nargs="?",
        default="all",
        choices=[*sorted(exps), "all"],
        help="the paper to check, or 'all' (default: every paper)",
    )
    c.add_argument("--quick", action="store_true", help="smaller, faster version")
    c.add_argument("--out", default="results", help="output folder (default: ./results)")
    c.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="table layout: auto (default: on a terminal, a table fitted to it; piped, one "
        "line per claim unless --width is given), wide (fixed columns), compact (one block "
        "per claim), lines (one line per claim; reasons in the report) or json "
        "(machine-readable, on stdout; progress on stderr)",
    )
    c.add_argument(
        "--width",
        type=fl.count("--width", 20),
        default=None,
        help="characters per line of the table (default: the terminal's width)",
    )
    c.add_argument(
        "--no-report", action="store_true", help="do not write report.html (and index.html)"
    )
    c.add_argument(
        "--jobs",
        type=fl.count("--jobs", 1),
        default=None,
        help="papers run at once, each in its own worker process sharing the compilation "
        "cache; results as a serial run's (default: the cores here; 1: one at a time in "
        "this process)",
    )

    c.add_argument(
        "--budget",
        type=fl.real("--budget", nonnegative=True),
        default=None,
        metavar="CPU_S",
        help="CPU seconds each paper may spend extending a limit row that its sweep left "
        "undecided, doubling the largest size while the budget lasts (default: the "
        "paper's own — multistage 120, none under --quick; 0: no extension; estimated "
        "from the runs' work, so the result is the same on every machine)",
    )

    _simulate.add_parser(sub, exps)
    _sweep.add_parser(sub, exps)

    d = sub.add_parser("derive", help=words.COMMANDS["derive"])
    d.add_argument("paper", nargs="?", default="all")
    d.add_argument(
        "--time-budget",
        dest="time_budget",
        type=fl.positive("--time-budget"),
        default=20.0,
        help="seconds of symbolic work per identity before it is checked numerically "
        "instead (default 20; a slow or loaded machine may need more for 'proved')",
    )
    return p


def _cmd_derive(args) -> int:
    """`flows derive [paper]`: settle the symbolic identities of every registered paper
    that declares them (`AbstractExperiment.identities`), or of one."""
    import importlib

    from reduced import derive

    papers = {n: e.identities for n, e in _experiments().items() if e.identities}
    if args.paper not in ("all", *papers):
        raise ConfigError(f"unknown paper {args.paper!r}; choose one of {['all', *papers]}.")
    names = list(papers) if args.paper == "all" else [args.paper]
    identities = []
    for name in names:
        module = papers[name]
        try:
            identities.extend(importlib.import_module(module).IDENTITIES)
        except (ImportError, AttributeError) as exc:
            raise ConfigError(
                f"paper {name!r} declares identities in {module!r}, which cannot be read: {exc}"
            ) from exc
    results = [derive.settle(i, args.time_budget) for i in identities]
    print(derive.format_table(results))
    return EXIT_FAILED if any(r.status == "fails" for r in results) else EXIT_OK


#: errno values of a write that failed for want of room or of a working disk (exit 3).
_DISK_ERRNOS = frozenset(
    getattr(errno, n) for n in ("ENOSPC", "EDQUOT", "EFBIG", "EIO", "EROFS") if hasattr(errno, n)
)


def _write_failure(exc: OSError) -> str:
    """The message of a failed write: `WriteError`s already name the file and what to try;
    an `OSError` raised by another writer (a figure into the staging folder) gets the file,
    the cause, and the assurance that nothing was half-written as complete."""
    if isinstance(exc, WriteError):
        return str(exc)
    where = f" {exc.filename!r}" if exc.filename else " a result file"
    return (
        f"could not write{where}: {exc.strerror or exc}; nothing was written as complete "
        "(outputs are moved into place only when all are written). Free some space or "
        "choose another --out."
    )


def _out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "RESOURCE_EXHAUSTED" in str(exc)


def main(argv=None, *, check_environment: bool = False) -> int:
    """Run the command line; returns the exit status (see the module docstring).

    `check_environment` (the console script): first refuse a `JAX_PLATFORMS` or
    `XLA_FLAGS` that JAX cannot start with (`_check_environment`; free when neither is
    set)."""
    parser = build_parser()
    live.end_starting()  # the launcher's line: JAX and the papers are loaded
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help (0) or a refused flag (2, message printed)
        return exc.code if isinstance(exc.code, int) else EXIT_BAD_INPUT
    try:
        if args.command == "sweep":  # a timeout for a scheduler not asked for: refused
            fl.refuse_unmet_needs(args, {"connect_timeout": ("scheduler", "tcp://host:8786")})
        if check_environment:
            _check_environment()
        if not args.no_cache and not _compile.cache_disabled_by_env():
            _enable_cache()
        # JAX_DISABLE_JIT: the solver is compiled ahead of time; a live line ends before
        # any message
        with _jit_kept_on(), live.lines_ended():
            if args.command == "check":
                return _cmd_check(args)
            if args.command == "simulate":
                return _cmd_simulate(args)
            if args.command == "sweep":
                return _cmd_sweep(args)
            return _cmd_derive(args)
    except ConfigError as exc:
        print(f"flows: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SolverError as exc:
        print(f"flows: solver failure: {exc}", file=sys.stderr)
        return EXIT_SOLVER
    except OSError as exc:  # a result that could not be written: named, never a traceback
        refused = None if isinstance(exc, WriteError) else path_refusal(exc)
        if refused is not None:  # a path the OS refuses (too long, a loop, …): bad input
            print(f"flows: error: {refused}", file=sys.stderr)
            return EXIT_BAD_INPUT
        if not isinstance(exc, WriteError) and exc.errno not in _DISK_ERRNOS:
            raise
        print(f"flows: error: {_write_failure(exc)}", file=sys.stderr)
        return EXIT_SOLVER
    except KeyboardInterrupt:
        print(_INTERRUPT_MESSAGE, end="", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if not _out_of_memory(exc):
            raise
        print(
            "flows: error: out of memory; the problem is too large for this machine. "
            "Reduce the width (--m) or the number of samples (--n); with kvaerno5 (a dense "
            "Jacobian) try kvaerno5-cg, rkc or rock4.",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT


#: Seconds the main thread gets to turn Ctrl-C into KeyboardInterrupt before the watchdog
#: ends the process (it cannot while it is blocked inside an XLA compilation or solve).
INTERRUPT_GRACE_S = 2.0
_INTERRUPT_MESSAGE = (
    "flows: interrupted; nothing partial was written as complete (a sweep's finished "
    "points are kept: rerun the same command to resume).\n"
)


def _watch_interrupts() -> None:
    """Make Ctrl-C effective while the main thread is inside XLA: Python runs its SIGINT
    handler only between bytecodes, so a long compile or solve ignored Ctrl-C until it
    finished. CPython's C-level handler also writes the signal number to the wakeup fd; a
    thread reading it waits `INTERRUPT_GRACE_S` for the ordinary KeyboardInterrupt path,
    then exits with status 130. Outputs are written atomically, so nothing half-written
    remains."""
    import socket
    import threading

    r, w = socket.socketpair()
    w.setblocking(False)
    signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)

    def watch():
        while signal.SIGINT not in r.recv(64):
            pass
        time.sleep(INTERRUPT_GRACE_S)
        start = "\n" if live.any_open() else ""  # the message below a live line, not on it
        with contextlib.suppress(OSError):  # stderr gone (closed pipe, full disk): exit anyway
            os.write(2, (start + _INTERRUPT_MESSAGE).encode())
        os._exit(EXIT_INTERRUPTED)

    threading.Thread(target=watch, name="flows-interrupt-watch", daemon=True).start()
    _watch_interrupts.sockets = (r, w)  # keep them open for the life of the process


def _quiet_interrupts(unraisable, _default=sys.unraisablehook) -> None:
    """`sys.unraisablehook` of the command line: a KeyboardInterrupt raised where Python
    cannot propagate it (measured: inside JAX's garbage-collection callback during a
    compilation) is dropped silently — the interrupt watcher ends the run with the message
    and status 130 within `INTERRUPT_GRACE_S` — instead of printing "Exception ignored …
    Traceback" above that message. Anything else goes to Python's default hook."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        return
    _default(unraisable)


def entry(startup_handler=None, starting=None) -> None:
    """Run the program (the console script `flows` comes here through `_flows_launch`,
    `python -m flows` directly). After Ctrl-C, exit at once: interpreter teardown while
    XLA's compiler threads were still running crashed (segmentation fault).

    `startup_handler`: the SIGINT handler the launcher installed for the imports; replaced
    by Python's default (`KeyboardInterrupt`) once the watcher runs, so that no Ctrl-C
    falls between the two. `starting`: the launcher's live "starting" line (an object with
    `stop()`), ended once the command's parser is built (`live.end_starting`).

    stdout and stderr are put on `_guard_output`'s streams first (ASCII where the terminal
    lacks a character; a closed pipe or a full disk ends the command with 141 or 3, see
    `_finish_output`), and the environment is checked (`_check_environment`)."""
    live.STARTING = starting
    _guard_output()
    _compile.tune_gc_for_command()
    _watch_interrupts()
    sys.unraisablehook = _quiet_interrupts
    if startup_handler is not None and signal.getsignal(signal.SIGINT) is startup_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = _finish_output(main(check_environment=True))
    except _OutputLost as lost:
        code = _finish_output(EXIT_OK, lost)
    if code == EXIT_INTERRUPTED:
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    entry()
