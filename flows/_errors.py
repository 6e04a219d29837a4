"""Errors raised by the toolkit, in the user's terms."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._solve.trajectory import Trajectory


class ConfigError(ValueError):
    """Bad input: names the argument, what was expected, and what to try.

    The CLI turns it into a message on stderr and exit status 2.
    """


class SolverError(RuntimeError):
    """A solve that could not reach its final time (max steps, step-size underflow, NaN/Inf).

    Carries the time reached so the caller can report it; nothing partial is returned
    as if complete.
    """

    #: Set only on the failed members `flows.simulate_batch` returns: the partial run.
    trajectory: Trajectory

    def __init__(self, message: str, *, t_reached: float, reason: str):
        super().__init__(message)
        self.t_reached = t_reached
        self.reason = reason


class WriteError(OSError):
    """A result could not be written (disk full, file too large, I/O error, a read-only
    folder). Names the file and the cause; the file that was there before is untouched and
    no temporary is left behind.

    The CLI turns it into a message on stderr and exit status 3.
    """

    def __str__(self) -> str:
        return str(self.strerror)
