"""Start of the `flows` command (its console script): Ctrl-C works from the first instant.

This module sits outside the `flows` package on purpose. Importing anything inside
`flows` first runs `flows/__init__.py`, which imports JAX, diffrax and the models — seconds
on a loaded machine — and during those imports Python's default SIGINT handling raised
`KeyboardInterrupt` wherever the interpreter happened to be. Measured with the handler
installed only after the imports: Ctrl-C at 0.2–1 s gave a segmentation fault, later a
traceback, and on a loaded machine the signal was lost (the exception landed where Python
can only print "Exception ignored") and the run went on for an hour.

Here SIGINT is caught before any heavy import and ends the process at once (status 130;
nothing has been computed or written yet). Once `flows._cli.app` is imported its own handling
takes over (`flows._cli.app.entry`: a watcher for Ctrl-C inside XLA, then the ordinary
`KeyboardInterrupt`). `python -m flows` runs the same program but imports the package
before any of its code runs, so it has this gap; the README says so.
"""

import argparse
import os
import signal
import sys

#: Exit status after Ctrl-C (as `flows._cli.app.EXIT_INTERRUPTED`; not imported from there,
#: which is the point of this module).
EXIT_INTERRUPTED = 130


def _exit_at_once(signum, frame):
    start = b"\n" if _Ticker.live else b""  # below the live starting line, not on it
    try:
        os.write(2, start + b"flows: interrupted while starting; nothing was computed or written.")
        os.write(2, b"\n")
    except OSError:  # stderr gone (a closed pipe, a full disk): exit all the same
        pass
    os._exit(EXIT_INTERRUPTED)


def _load_text():
    """`flows/_cli/text.py` loaded by its path: the package is found, not imported (its
    `__init__` imports JAX)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("flows")
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover
        raise ImportError("the flows package is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / "_cli" / "text.py"
    text_spec = importlib.util.spec_from_file_location("_flows_cli_text", path)
    if text_spec is None or text_spec.loader is None:  # pragma: no cover
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(text_spec)
    text_spec.loader.exec_module(module)
    return module


_text = _load_text()
DESCRIPTION, COMMANDS, add_top_level = _text.DESCRIPTION, _text.COMMANDS, _text.add_top_level


def _answer_without_jax(argv: list[str]) -> int | None:
    """`flows`, `flows --help`, `flows --version` (nothing else on the line): answered
    here from the top-level parser alone; None for anything else."""
    if argv not in ([], ["-h"], ["--help"], ["--version"]):
        return None
    parser = argparse.ArgumentParser(prog="flows", description=DESCRIPTION)
    add_top_level(parser)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in COMMANDS.items():
        sub.add_parser(name, help=text)
    try:
        parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version (0) or no command (2, usage printed)
        return exc.code if isinstance(exc.code, int) else 2
    return 2  # pragma: no cover - a command is required


def _starting_line(argv: list[str]) -> str | None:
    """What the commands that report progress say before the seconds of imports: `flows
    check`, `flows sweep` and `flows simulate`, unless `--quiet`; not their help. Without
    a terminal, `flows simulate` says it only with `--progress` (its stderr stays empty)."""
    args = set(argv)
    if not argv or {"-h", "--help", "--quiet"} & args:
        return None
    command = argv[0]
    if command == "check":
        return "flows check: starting (loading JAX and the papers)"
    if command == "sweep" or (command == "simulate" and ("--progress" in args or _live())):
        return f"flows {command}: starting (loading JAX)"
    return None


def _live() -> bool:
    """stderr can show a live line: a terminal, `TERM` not 'dumb', 40 columns or more (the
    rule of `flows._cli.live.live_terminal`, which cannot be imported yet)."""
    import shutil

    try:
        tty = os.isatty(2)
    except OSError:
        return False
    cols = shutil.get_terminal_size((80, 24)).columns
    return tty and os.environ.get("TERM", "") != "dumb" and (cols or 80) >= 40


class _Ticker:
    """The starting line on a terminal, redrawn every half second with the seconds spent
    (so the imports are never a silent wait); `stop()` ends it with a newline."""

    #: Whether a starting line is on the terminal, without its newline yet.
    live = False

    def __init__(self, text: str):
        import threading
        import time

        self.text, self.time, self.start = text, time.perf_counter, time.perf_counter()
        self.done = threading.Event()
        _Ticker.live = True
        self._write(f"{self.text}…")
        self.thread = threading.Thread(target=self._tick, name="flows-starting", daemon=True)
        self.thread.start()

    def _write(self, frame: str) -> None:
        try:
            os.write(2, ("\r" + frame).encode())
        except OSError:  # stderr gone: nothing to tell
            self.done.set()

    def _tick(self) -> None:
        while not self.done.wait(0.5):
            self._write(f"{self.text}… {self.time() - self.start:.0f}s")

    def stop(self) -> None:
        if not self.done.is_set():
            self.done.set()
            self.thread.join()
            self._write(f"{self.text}… {self.time() - self.start:.1f}s\n")
            _Ticker.live = False


def _say_starting(argv: list[str]) -> _Ticker | None:
    """The starting line (`_starting_line`) on stderr (stdout stays clean for `--format
    json`): live on a terminal (`_Ticker`, returned), else one plain line."""
    line = _starting_line(argv)
    if line is None:
        return None
    if _live():
        return _Ticker(line)
    try:
        os.write(2, (line + "\n").encode())
    except OSError:  # stderr gone: nothing to tell
        pass
    return None


def entry() -> None:
    """Console-script entry point: catch Ctrl-C, import the program, run it."""
    # A process started with SIGINT ignored (nohup, `&` in some shells) keeps it ignored.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_at_once)
    code = _answer_without_jax(sys.argv[1:])
    if code is not None:
        sys.exit(code)
    ticker = _say_starting(sys.argv[1:])
    from flows._cli import app  # JAX and the package: seconds

    app.entry(startup_handler=_exit_at_once, starting=ticker)
