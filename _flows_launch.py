"""Start of the `flows` command (its console script): Ctrl-C works from the first instant.

This module sits outside the `flows` package on purpose. Importing anything inside
`flows` first runs `flows/__init__.py`, which imports JAX, diffrax and the models — seconds
on a loaded machine — and during those imports Python's default SIGINT handling raised
`KeyboardInterrupt` wherever the interpreter happened to be. Measured with the handler
installed only after the imports: Ctrl-C at 0.2–1 s gave a segmentation fault, later a
traceback, and on a loaded machine the signal was lost (the exception landed where Python
can only print "Exception ignored") and the run went on for an hour.

Here SIGINT is caught before any heavy import and ends the process at once (status 130;
nothing has been computed or written yet). Once `flows._cli` is imported its own handling
takes over (`flows._cli.entry`: a watcher for Ctrl-C inside XLA, then the ordinary
`KeyboardInterrupt`). `python -m flows` runs the same program but imports the package
before any of its code runs, so it has this gap; the README says so.
"""

import os
import signal

#: Exit status after Ctrl-C (as `flows._cli.EXIT_INTERRUPTED`; not imported from there,
#: which is the point of this module).
EXIT_INTERRUPTED = 130


def _exit_at_once(signum, frame):
    try:
        os.write(2, b"flows: interrupted while starting; nothing was computed or written.\n")
    except OSError:  # stderr gone (a closed pipe, a full disk): exit all the same
        pass
    os._exit(EXIT_INTERRUPTED)


def entry() -> None:
    """Console-script entry point: catch Ctrl-C, import the program, run it."""
    # A process started with SIGINT ignored (nohup, `&` in some shells) keeps it ignored.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _exit_at_once)
    from flows import _cli  # JAX and the package: seconds

    _cli.entry(startup_handler=_exit_at_once)
