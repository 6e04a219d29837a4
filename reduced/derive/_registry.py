"""Which identities belong to which paper, and `run`.

The papers are the modules of this package that are not private (`multistage.py`,
`bias_plateau.py`, …), each declaring `IDENTITIES`; a paper's name is its module's with
'-' for '_'. Adding a paper's identities is adding its module — there is no list to edit
(the command line's `flows derive` reads the modules the papers' experiments declare)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from ._core import Identity, Settled, settle

__all__ = ["PAPERS", "identities", "run"]

_MODULES = {
    info.name.replace("_", "-"): info.name
    for info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda i: i.name)
    if not info.name.startswith("_")
}

PAPERS: tuple[str, ...] = tuple(_MODULES)
"""Paper names accepted by `run` (besides `"all"`), as in `flows derive <paper>`: the
package's public modules, in alphabetical order."""


def identities(name: str = "all") -> list[Identity]:
    """The identities of one paper (`"multistage"`, `"bias-plateau"`, `"linear-teacher"`)
    or of all of them (`"all"`), in the order the papers and their modules list them."""
    if name == "all":
        names = list(PAPERS)
    elif name in PAPERS:
        names = [name]
    else:
        raise ValueError(f"unknown paper {name!r}; choose one of: all, {', '.join(PAPERS)}.")
    out: list[Identity] = []
    for paper in names:
        module = importlib.import_module(f"{__package__}.{_MODULES[paper]}")
        out.extend(module.IDENTITIES)
    return out


def run(name: str = "all", *, time_budget_s: float = 20.0) -> list[Settled]:
    """Settle every identity of paper `name` (or `"all"`).

    **Arguments:** `name`: `"all"` or one of `PAPERS`; `time_budget_s`: the symbolic budget
    per identity (see `settle`).

    **Returns:** one `Settled` per identity. Raises `ValueError` for an unknown name.
    """
    return [settle(identity, time_budget_s) for identity in identities(name)]
