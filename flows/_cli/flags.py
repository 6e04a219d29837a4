"""Command-line flags as data: what an experiment declares for `flows simulate` and `flows
sweep`, with argparse types built on the shared validators (`flows._validate`). The CLI
(`flows._cli.app`) turns each `Flag` into an option; a value the type refuses is an argparse
error (exit 2) naming the flag. A flag declared for some `--method` values only (`methods`)
and typed with another is refused by `refuse_inapplicable` (exit 2), never ignored."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from .._errors import ConfigError
from .._validate import MIN_RTOL, as_float, as_int, as_seed, as_tolerance

__all__ = [
    "GIVEN",
    "METHODS",
    "Flag",
    "count",
    "given",
    "positive",
    "real",
    "refuse_inapplicable",
    "refuse_unmet_needs",
    "seed",
    "tolerance",
    "tolerance_flags",
    "typed",
]

_FLOATS = (as_float, as_tolerance)


def typed(flag: str, convert: Callable, **kwargs) -> Callable[[str], Any]:
    """An argparse type: `convert(flag, float/int(text), **kwargs)` (one of the `as_*`
    validators of `flows.plugin`), with its `ConfigError` turned into argparse's error.
    `parse.domain` records what the value must be, so tests can generate invalid values
    from the parser."""

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
    """A finite number > 0."""
    return typed(flag, as_float, positive=True)


def count(flag: str, minimum: int = 1) -> Callable[[str], Any]:
    """An integer ≥ `minimum`."""
    return typed(flag, as_int, minimum=minimum)


def seed(flag: str = "--seed") -> Callable[[str], Any]:
    """A PRNG seed (`as_seed`)."""
    return typed(flag, as_seed)


def tolerance(flag: str, example: str, floor: float | None = None) -> Callable[[str], Any]:
    """A solver tolerance (`as_tolerance`); `example` is the value the error message
    suggests; `floor` the smallest accepted (`MIN_RTOL` for a relative tolerance)."""
    if floor is None:
        return typed(flag, as_tolerance, example=example)
    return typed(flag, as_tolerance, example=example, floor=floor)


#: What each `--method` value is, in the user's terms (the messages of `refuse_inapplicable`).
METHODS = {"flow": "the exact flow", "gd": "gradient descent"}

#: The attribute of argparse's namespace that lists the flags (their `name`s) the user typed.
GIVEN = "_flags_given"


class _Store(argparse.Action):
    """argparse's 'store' (with `nargs=0`: 'store_true') that also records in the namespace
    (`GIVEN`) that the flag was typed: a typed value equal to the default is still given."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)
        setattr(namespace, GIVEN, {*getattr(namespace, GIVEN, ()), self.dest})


@dataclasses.dataclass(frozen=True)
class Flag:
    """One option of `flows simulate <experiment>` or `flows sweep <experiment>`.

    `name` is the option as a Python identifier (`n_save` → `--n-save`); `type` parses its
    text (use `typed` and friends, or `choices`); `default` None means "the experiment's
    own default"; `action='store_true'` makes a switch; `required` for grid flags.
    `methods`: the values of the experiment's `--method` flag this flag acts under (None:
    every method); typed with another method it is refused (`refuse_inapplicable`). The
    `--method` flag itself then declares its default.
    """

    name: str
    help: str
    type: Callable[[str], Any] | None = None
    default: Any = None
    choices: tuple | None = None
    action: str | None = None
    required: bool = False
    methods: tuple[str, ...] | None = None

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        methods = " or ".join(f"--method {m}" for m in self.methods or ())
        kw: dict[str, Any] = {
            "help": self.help + (f" [{methods} only]" if methods else ""),
            "dest": self.name,
            "action": _Store,
        }
        if self.action == "store_true":
            kw.update(nargs=0, const=True)
        elif self.action:
            raise ValueError(f"{self.option}: unknown action {self.action!r}")
        else:
            kw.update(type=self.type, choices=self.choices, required=self.required)
        kw["default"] = (
            False if self.action == "store_true" and self.default is None else (self.default)
        )
        parser.add_argument(self.option, **kw)
        parser.set_defaults(**{GIVEN: frozenset()})  # none typed yet (`given`)


def values(args: argparse.Namespace, flags: Collection[Flag]) -> dict[str, Any]:
    """The values `args` holds for `flags`, by the flags' names."""
    return {f.name: getattr(args, f.name) for f in flags}


def given(values: argparse.Namespace | Mapping[str, Any]) -> set[str]:
    """The flags the user typed: those argparse recorded (`GIVEN`); for a mapping of
    options (the Python API), those set to anything but None or False."""
    if isinstance(values, argparse.Namespace):
        recorded = getattr(values, GIVEN, None)
        if recorded is not None:
            return set(recorded)
        values = vars(values)
    return {k for k, v in values.items() if v is not None and v is not False}


def _options(flags: Collection[Flag]) -> str:
    return ", ".join(f.option for f in flags)


def refuse_inapplicable(
    flags: Sequence[Flag],
    values: argparse.Namespace | Mapping[str, Any],
    names: Collection[str] | None = None,
) -> None:
    """Raise `ConfigError` if a flag declared for some `--method` values only (`Flag.methods`)
    was typed with another method: it would be silently ignored. The message names the
    flag, both methods and the two ways out (drop the flag, or switch the method).

    **Arguments:** `flags`, the experiment's declarations (`simulate_flags`,
    `sweep_flags`); `values`, the parsed namespace or a mapping of options (None: not
    given); `names`, the flags typed (default: `given(values)`).
    """
    typed = given(values) if names is None else set(names)
    values = vars(values) if isinstance(values, argparse.Namespace) else values
    chooser = next((f for f in flags if f.name == "method"), None)
    scoped = [f for f in flags if f.methods is not None]
    if chooser is None:
        if scoped:
            raise ValueError(f"{_options(scoped)} declare `methods` but there is no --method flag")
        return
    method = values.get("method") or chooser.default
    if not isinstance(method, str):
        raise ValueError("the --method flag must declare its default (`Flag.default`)")
    wrong = [f for f in scoped if f.name in typed and method not in (f.methods or ())]
    if not wrong:
        return
    own = [f for f in scoped if method in (f.methods or ())]
    chosen = METHODS.get(method, method) + ("" if "method" in typed else ", the default")
    problems = []
    for methods in dict.fromkeys(f.methods or () for f in wrong):
        group = [f for f in wrong if f.methods == methods]
        listed = _options(group)
        targets = " or ".join(f"--method {m} ({METHODS.get(m, m)})" for m in methods)
        verb = "applies" if len(group) == 1 else "apply"
        switch = " or ".join(f"--method {m}" for m in methods)
        problems.append(
            f"{listed} {verb} to {targets} only; --method {method} ({chosen}) does "
            f"not use {'it' if len(group) == 1 else 'them'}"
            + (f" (its own flags: {_options(own)})" if own else "")
            + f". Drop {listed}, or {'use' if 'method' in typed else 'add'} {switch}."
        )
    raise ConfigError(" ".join(problems))


def tolerance_flags(
    rtol: str, atol: str, *, methods: tuple[str, ...] | None = None, defaults: bool = False
) -> tuple[Flag, Flag]:
    """`--rtol` and `--atol` as every paper declares them: `rtol`/`atol` are the defaults as
    text ("1e-6"), named in the help; `defaults` makes them the argparse defaults too (else
    None: the experiment's own); `methods` as `Flag.methods`."""

    def flag(name: str, kind: str, text: str) -> Flag:
        # rtol's floor here as in `simulate`: `flows sweep --rtol 1e-320` was accepted,
        # then every point failed on it
        floor = MIN_RTOL if name == "rtol" else None
        return Flag(
            name,
            f"{kind} tolerance (default {text})",
            tolerance(f"--{name}", text, floor),
            default=float(text) if defaults else None,
            methods=methods,
        )

    return flag("rtol", "relative", rtol), flag("atol", "absolute", atol)


def refuse_unmet_needs(
    values: argparse.Namespace | Mapping[str, Any], needs: Mapping[str, tuple[str, str]]
) -> None:
    """Raise `ConfigError` if a flag that acts only together with another was typed
    without it: it would be silently ignored. `needs` maps a flag's name to (the name of
    the flag it needs, an example value of that flag); the message names both flags and
    the two ways out.

    `flows sweep … --connect-timeout 5` without `--scheduler` runs the sweep here, where
    no scheduler is waited for."""
    typed = given(values)
    mapping = vars(values) if isinstance(values, argparse.Namespace) else values
    for name, (needed, example) in needs.items():
        if name in typed and mapping.get(needed) in (None, False):
            opt, other = (Flag(n, "").option for n in (name, needed))
            raise ConfigError(
                f"{opt} acts only together with {other}; without {other} it would be "
                f"ignored. Drop {opt}, or add {other} {example}."
            )
