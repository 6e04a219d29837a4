"""MkDocs hook (registered in `mkdocs.yml`): the "Command line" pages, one per `flows`
subcommand, generated at build time from the program's own argparse parser
(`flows._cli.build_parser`), so they cannot drift from `flows <command> --help`.

- `cli/index.md`: `flows --help` and a link to each command's page;
- `cli/<command>.md`: `flows <command> --help`, and for a command with one sub-parser per
  experiment (`simulate`, `sweep`) each `flows <command> <experiment> --help` under its
  own heading.

The help is formatted at a fixed width (`WIDTH` columns, colour off), not the terminal's,
so the pages are the same on every machine. No page of these names may exist in `docs/`
(the build fails naming it). The nav lists the pages by hand (`mkdocs.yml`, "Command
line"): a new command's page is generated here, and until it is listed the strict build
fails on the page left out of the nav (and `tests/test_docs.py` names the command).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

#: Folder of the generated pages, relative to `docs/`.
FOLDER = "cli"
#: Columns the help text is wrapped to (argparse reads `$COLUMNS`).
WIDTH = 88


def build_parser() -> argparse.ArgumentParser:
    """The `flows` program's parser (imports the package: JAX and the experiments)."""
    from flows._cli import build_parser as build

    return build()


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The parsers of `parser`'s subcommands, by name, in the order `--help` lists them
    (empty when it has none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def subcommands(parser: argparse.ArgumentParser | None = None) -> list[str]:
    """The names of the `flows` subcommands (`check`, `simulate`, …)."""
    return list(_subparsers(parser or build_parser()))


@contextmanager
def _fixed_width() -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in ("COLUMNS", "NO_COLOR")}
    os.environ["COLUMNS"] = str(WIDTH)
    os.environ["NO_COLOR"] = "1"  # Python ≥ 3.14 colours help on a terminal
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _code(text: str) -> str:
    """`text` as a fenced block (a fence longer than any backtick run inside it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text.rstrip()}\n{fence}"


_NOTE = (
    "<!-- Generated at build time by docs/_cli_pages.py from the program's parser; "
    "do not edit. -->\n\n"
)


def pages(parser: argparse.ArgumentParser | None = None) -> dict[str, str]:
    """The generated pages: `{path relative to docs/: Markdown}`, the overview first."""
    parser = parser or build_parser()
    commands = _subparsers(parser)
    helps = {
        a.dest: a.help
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for a in action._choices_actions
    }
    out: dict[str, str] = {}
    with _fixed_width():
        listing = "\n".join(
            f"- [`flows {name}`]({name}.md): {helps.get(name) or ''}" for name in commands
        )
        out[f"{FOLDER}/index.md"] = (
            f"# Command line\n\n{_NOTE}"
            "The `flows` command (installed with the package; `python -m flows` runs the "
            "same program). Each command has its own page with its full `--help`:\n\n"
            f"{listing}\n\n## flows --help\n\n{_code(parser.format_help())}\n"
        )
        for name, sub in commands.items():
            parts = [f"# flows {name}\n\n{_NOTE}"]
            if lead := helps.get(name):
                parts.append(f"{lead[0].upper()}{lead[1:]}.\n\n")
            parts.append(f"{_code(sub.format_help())}\n")
            for exp, exp_parser in _subparsers(sub).items():
                parts.append(f"\n## flows {name} {exp}\n\n{_code(exp_parser.format_help())}\n")
            out[f"{FOLDER}/{name}.md"] = "".join(parts)
    return out


def on_files(files, config):
    for uri, text in pages().items():
        if files.get_file_from_path(uri) is not None:
            raise PluginError(
                f"docs/{uri} exists, but that page is generated from the parser by "
                "docs/_cli_pages.py: remove the file"
            )
        files.append(File.generated(config, uri, content=text))
    return files
