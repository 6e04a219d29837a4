"""Which identities belong to which paper, and `run`."""

from __future__ import annotations

import importlib

from ._core import Identity, Settled, settle

__all__ = ["PAPERS", "identities", "run"]

PAPERS: tuple[str, ...] = ("multistage", "bias-plateau", "linear-teacher", "deep-linear")
"""Paper names accepted by `run` (besides `"all"`), as in `flows derive <paper>`."""

_MODULES = {
    "multistage": "multistage",
    "bias-plateau": "bias_plateau",
    "linear-teacher": "linear_teacher",
    "deep-linear": "deep_linear",
}


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
