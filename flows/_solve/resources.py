"""What a run needs of the machine, checked before it starts: XLA would otherwise fail in
the middle of compiling with a RESOURCE_EXHAUSTED traceback."""

from __future__ import annotations

import os

from .._errors import ConfigError

__all__ = ["check_memory", "physical_memory", "two_layer_bytes"]

#: Share of the physical memory a run may plan to use.
MEMORY_SHARE = 0.8


def physical_memory() -> int | None:
    """Bytes of physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return None


def two_layer_bytes(n: int, m: int, *, batch: int = 1, itemsize: int = 8) -> int:
    """A lower bound on the working memory of a two-layer (autodiff) field evaluation: one
    (n × m) array of pre-activations per batched run (the evaluation holds several; a lower
    bound refuses only runs that certainly cannot fit)."""
    return itemsize * n * m * batch


def check_memory(need: int, what: str, advice: str) -> None:
    """Raise `ConfigError` when `need` bytes exceed `MEMORY_SHARE` of this machine's memory.

    **Arguments:** `need`, the estimate; `what`, the run in the user's terms (e.g. "--m 10⁸
    with --n 1000"); `advice`, what to change."""
    total = physical_memory()
    if total is not None and need > MEMORY_SHARE * total:
        raise ConfigError(
            f"{what} needs at least {need / 2**30:.3g} GiB for the network's activations; this "
            f"machine has {total / 2**30:.3g} GiB. {advice}"
        )
