"""Command-line flags as data: what an experiment declares for `flows simulate` and `flows
sweep`, with argparse types built on the shared validators (`flows._validate`). The CLI
(`flows._cli`) turns each `Flag` into an option; a value the type refuses is an argparse
error (exit 2) naming the flag."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import Any

from ._errors import ConfigError
from ._validate import as_float, as_int, as_seed, as_tolerance

__all__ = ["Flag", "count", "positive", "real", "seed", "tolerance", "typed"]

_FLOATS = (as_float, as_tolerance)


def typed(flag: str, convert: Callable, **kwargs) -> Callable[[str], Any]:
    """An argparse type: `convert(flag, float/int(text), **kwargs)` (a `flows._validate`
    function), with its `ConfigError` turned into argparse's error. `parse.domain` records
    what the value must be, so tests can generate invalid values from the parser."""

    def parse(text):
        try:
            value = float(text) if convert in _FLOATS else int(text)
        except ValueError:
            kind = "a number" if convert in _FLOATS else "an integer"
            raise argparse.ArgumentTypeError(f"{flag} must be {kind}; got {text!r}") from None
        try:
            return convert(flag, value, **kwargs)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(str(exc).replace(f"`{flag}`", flag)) from None

    parse.domain = (convert.__name__, kwargs)
    return parse


def real(flag: str, **kwargs) -> Callable[[str], Any]:
    """A finite number (bounds as `as_float`: positive, nonnegative, lo, hi)."""
    return typed(flag, as_float, **kwargs)


def positive(flag: str) -> Callable[[str], Any]:
    return typed(flag, as_float, positive=True)


def count(flag: str, minimum: int = 1) -> Callable[[str], Any]:
    return typed(flag, as_int, minimum=minimum)


def seed(flag: str = "--seed") -> Callable[[str], Any]:
    return typed(flag, as_seed)


def tolerance(flag: str, example: str) -> Callable[[str], Any]:
    return typed(flag, as_tolerance, example=example)


@dataclasses.dataclass(frozen=True)
class Flag:
    """One option of `flows simulate <experiment>` or `flows sweep <experiment>`.

    `name` is the option as a Python identifier (`n_save` → `--n-save`); `type` parses its
    text (use `typed` and friends, or `choices`); `default` None means "the experiment's
    own default"; `action='store_true'` makes a switch; `required` for grid flags.
    """

    name: str
    help: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    choices: tuple | None = None
    action: str | None = None
    required: bool = False

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        kw: dict[str, Any] = {"help": self.help, "dest": self.name}
        if self.action:
            kw["action"] = self.action
        else:
            kw.update(type=self.type, choices=self.choices, required=self.required)
        kw["default"] = (
            False if self.action == "store_true" and self.default is None else (self.default)
        )
        parser.add_argument(self.option, **kw)
