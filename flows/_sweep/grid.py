"""Grid values of a sweep, parsed in the user's terms: comma lists and ranges, integers
and floats, seeds (`parse_seeds`, `parse_prng_seeds`), the axes of a grid and its points
(`Axis`, `grid_points`, at most `MAX_GRID_POINTS`)."""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from .._errors import ConfigError


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def grid_items(value, flag: str) -> list:
    """Split a grid given as text ('1,2,3') or a sequence into its items (`ConfigError`
    naming `flag` when empty or malformed)."""
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise ConfigError(f"{flag} is empty: give comma-separated values, e.g. {flag} 1,2.")
        parts = [p.strip() for p in text.split(",")]
        if any(p == "" for p in parts):
            raise ConfigError(f"{flag} {value!r} is malformed: an empty item between commas.")
        return parts
    if isinstance(value, (int, float, np.integer, np.floating)):
        return [value]
    try:
        items = list(value)
    except TypeError:
        raise ConfigError(f"{flag} must be a list of values or a string; got {value!r}.") from None
    if not items:
        raise ConfigError(f"{flag} is empty: give at least one value.")
    return items


def to_int(item, flag: str, *, strict: bool = False) -> int:
    """An integer grid value. Text such as '1e3' is read as 1000 unless `strict`."""
    if _is_int(item):
        return int(item)
    if (
        not strict
        and isinstance(item, (float, np.floating))
        and math.isfinite(item)
        and item == int(item)
    ):
        return int(item)
    if isinstance(item, str):
        try:
            return int(item)
        except ValueError:
            try:
                f = float(item)
            except ValueError:
                f = float("nan")
            if not strict and math.isfinite(f) and f == int(f):
                return int(f)
    raise ConfigError(f"{flag}: {item!r} is not an integer.")


def to_float(item, flag: str) -> float:
    """A finite number."""
    try:
        v = float(item)
    except (TypeError, ValueError):
        raise ConfigError(f"{flag}: {item!r} is not a number.") from None
    if not math.isfinite(v):
        raise ConfigError(f"{flag}: {item!r} is not a finite number.")
    return v


def no_duplicates(values: list, flag: str, name: str) -> tuple:
    """`values` as a tuple; a `ConfigError` naming `flag` if a grid value repeats."""
    seen = set()
    for v in values:
        if v in seen:
            raise ConfigError(
                f"duplicate grid point: {name}={v!r} given twice in {flag}; list each value once."
            )
        seen.add(v)
    return tuple(values)


def grid_values(
    value,
    flag: str,
    name: str,
    convert: Callable[[Any, str], Any] = to_float,
    problem: Callable[[Any], str | None] = lambda v: None,
) -> tuple:
    """The values of a grid flag ('1e-3,1e-2' or a sequence): every item converted by
    `convert(item, flag)` (`to_float`, `to_int`, …), the first value for which
    `problem(v)` names a problem refused as `ConfigError` "`flag`: <problem>", and a
    value given twice refused (`no_duplicates`, naming `name`)."""
    values = [convert(v, flag) for v in grid_items(value, flag)]
    for v in values:
        why = problem(v)
        if why:
            raise ConfigError(f"{flag}: {why}")
    return no_duplicates(values, flag, name)


#: The most points one sweep's grid may hold: refused up front, before anything is built
#: (each point is a file in `points/`; 10⁸ seeds were once accepted and built).
MAX_GRID_POINTS = 100_000

_RANGE = re.compile(r"^\s*(\d+)\s*-\s*(\d+)\s*$")


def parse_seeds(value, flag: str = "--seeds") -> tuple[int, ...]:
    """Seeds: '0-2' (inclusive range), '0,1,2', or a sequence; integers ≥ 0."""
    if isinstance(value, str):
        seeds: list[int] = []
        for part in grid_items(value, flag):
            rng = _RANGE.match(part)
            if rng:
                lo, hi = int(rng.group(1)), int(rng.group(2))
                if hi < lo:
                    raise ConfigError(f"{flag}: range {part!r} is empty (end before start).")
                if hi - lo + 1 + len(seeds) > MAX_GRID_POINTS:
                    raise ConfigError(
                        f"{flag}: {value.strip()!r} holds at least "
                        f"{hi - lo + 1 + len(seeds):,} seeds; a sweep grid holds at most "
                        f"{MAX_GRID_POINTS:,} points. Give a shorter range."
                    )
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(to_int(part, flag))
    else:
        seeds = [to_int(v, flag) for v in grid_items(value, flag)]
    for s in seeds:
        if s < 0:
            raise ConfigError(f"{flag}: seed {s} is negative; seeds are integers ≥ 0.")
    return no_duplicates(seeds, flag, "seed")


def parse_prng_seeds(value, flag: str = "--seeds") -> tuple[int, ...]:
    """Seeds as `parse_seeds`, each also a valid PRNG seed (`flows._validate.as_seed`)."""
    from .._validate import as_seed

    return tuple(as_seed(flag, s) for s in parse_seeds(value, flag))


def grid_type(flag: str, parse: Callable[[Any], tuple] | str, domain: tuple | None = None):
    """An argparse type for a grid flag: `parse(text)`, its `ConfigError` turned into
    argparse's error (exit 2, naming the flag). `parse` may be given as 'module:function',
    imported when the flag is parsed (an experiment declares its flags before its sweep
    module can be imported). `domain` is recorded as `.domain` (see `flows._cli.flags.typed`)
    for tests that generate invalid values."""
    import argparse
    import importlib

    def convert(text):
        fn = parse
        if isinstance(fn, str):
            module, _, name = fn.partition(":")
            fn = getattr(importlib.import_module(module), name)
        try:
            return fn(text)
        except ConfigError as exc:  # argparse names the flag itself
            raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{flag}: ")) from None

    if domain is not None:
        convert.domain = domain
    return convert


@dataclasses.dataclass(frozen=True)
class Axis:
    """One axis of a sweep's grid.

    `name`: the coordinate in `sweep.nc`, the attribute of a point file and the tag in a
    point's id; `kind`: `int` or `float` (stored as int64 / float64); `parse`: text or a
    sequence → the tuple of values (`ConfigError` naming `flag` on bad input); `flag`: the
    command-line option that gives it.
    """

    name: str
    kind: type
    parse: Callable[[Any], tuple]
    flag: str

    def format(self, value) -> str:
        return str(int(value)) if self.kind is int else repr(float(value))

    @property
    def pattern(self) -> str:
        return re.escape(self.name) + (r"\d+" if self.kind is int else r"[^/]+")


def grid_points(axes: Sequence[Axis], values: Mapping[str, Any]) -> list[tuple]:
    """The grid points: every combination of the axes' parsed values, the first axis
    outermost. `values` maps each axis name to its text or sequence."""
    parsed = []
    for axis in axes:
        if axis.name not in values:
            raise ConfigError(f"{axis.flag} is missing: give the values of `{axis.name}`.")
        parsed.append(axis.parse(values[axis.name]))
    n = math.prod(len(p) for p in parsed)
    if n > MAX_GRID_POINTS:
        sizes = " × ".join(f"{len(p)} ({a.flag})" for a, p in zip(axes, parsed, strict=True))
        raise ConfigError(
            f"the grid has {n:,} points ({sizes}); a sweep holds at most "
            f"{MAX_GRID_POINTS:,}. Split it into several sweeps or give fewer values."
        )
    return list(itertools.product(*parsed))
