"""The sweep engine's batches and backends: grid points grouped into batches of equal
shape (one compiled, vmapped solve each, padded to the group's largest batch), one batch
as a Dask task, and the connection to a Dask scheduler."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from typing import TYPE_CHECKING

from .._errors import ConfigError
from .points import error_text

if TYPE_CHECKING:
    from .spec import AbstractSweepSpec


def make_batches(
    points: Sequence[tuple], batch_size: int, key: Callable[[tuple], Hashable] = lambda p: p
) -> list[list]:
    """Group points by `key` (equal shapes) and split each group into balanced batches of
    at most `batch_size`, in grid order within a group (neighbours have similar costs)."""
    groups: dict = {}
    for p in points:
        groups.setdefault(key(p), []).append(p)
    batches = []
    for k in sorted(groups):
        group = sorted(groups[k])
        n = math.ceil(len(group) / batch_size)
        size = math.ceil(len(group) / n)
        batches.extend(group[i : i + size] for i in range(0, len(group), size))
    return batches


def _pads(batches: list[list], key: Callable[[tuple], Hashable] = lambda p: p) -> list[int]:
    """Pad every batch of one key to that key's largest batch (one compiled solve)."""
    largest: dict = {}
    for b in batches:
        largest[key(b[0])] = max(largest.get(key(b[0]), 0), len(b))
    return [largest[key(b[0])] for b in batches]


def _compute_batch(spec: AbstractSweepSpec, points: list[tuple], pad_to: int) -> list[dict]:
    """One batch of points (in the sweep's process, or a Dask task: plain data and the
    pickled spec in, records out), each record with the machine that computed it
    (`flows.machine`, under "machine": on a cluster, the worker's, not the driver's)."""
    from .._io import machine

    where = machine()
    return [{**rec, "machine": where} for rec in spec.run_batch([tuple(p) for p in points], pad_to)]


def _connect(scheduler: str, timeout: float):
    try:
        from distributed import Client
    except ImportError as exc:
        raise ConfigError(
            f"--scheduler needs Dask's distributed scheduler ({exc}): install the dask "
            "extra: pip install 'flows-theory[dask]'."
        ) from None
    # Built in two steps so that a client whose connection failed can be closed here: left
    # to the garbage collector, its `__del__` waits 2×timeout on its dead event loop at exit
    # and prints a TimeoutError traceback after our message (seen with a bad address
    # scheme, or a peer that is not a scheduler).
    client = Client.__new__(Client)
    try:
        client.__init__(scheduler, timeout=timeout, set_as_default=False)
    except BaseException as exc:
        _close_quietly(client, timeout)
        if not isinstance(exc, Exception):
            raise  # Ctrl-C while connecting stays an interrupt
        raise ConfigError(
            f"cannot reach the Dask scheduler at {scheduler!r} within {timeout:g}s "
            f"({error_text(exc)}). Check the address (e.g. tcp://host:8786) and that the "
            "scheduler is running; nothing was written."
        ) from None
    return client


def _close_quietly(client, timeout: float) -> None:
    try:
        client.close(timeout=timeout)
    except Exception:  # noqa: BLE001 - the connection error is what the user needs
        pass
