"""MkDocs hook (registered in `mkdocs.yml`): the "Command line" pages, one per `flows`
subcommand, generated at build time from the program's own argparse parser
(`build_parser` of the package `flows._cli.app`), so they cannot drift from
`flows <command> --help`.

- `cli/index.md`: the program's own options and a link to each command's page;
- `cli/<command>.md`: the command's synopsis and a table of its options — option and
  value, default, meaning (with the choices a value may take) — and for a command with one
  sub-parser per experiment (`simulate`, `sweep`) each experiment's table under its own
  heading.

Defaults come from the parser: the option's own default where argparse holds one, else
the default its help text states (`(default 1000)`, `all, ends (default), none`: the
papers' flags take their defaults from the experiment's config, and say so in their help);
a switch is "off" until given. No page of these names may exist in `docs/` (the build
fails naming it). The nav lists the pages by hand (`mkdocs.yml`, "Command line"): a new
command's page is generated here, and until it is listed the strict build fails on the
page left out of the nav (and `tests/test_docs.py` names the command).
"""

from __future__ import annotations

import argparse
import html
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
    from flows._cli.app import build_parser as build

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


_NOTE = (
    "<!-- Generated at build time by docs/_cli_pages.py from the program's parser; "
    "do not edit. -->\n\n"
)
# the default a help text states: "(default 1000)", "(default: ./results)", "(default 1e-6;
# …)", or a choice marked "ends (default)"
_STATED = re.compile(r"\(default:?\s+(?P<value>[^;)]+?)\s*[;)]")
# a choice marked as the default: "ends (default)", "'synthetic' (§4 data, default)"
_MARKED = re.compile(r"'?(?P<value>[\w.+-]+)'? \((?:[^()]*,\s*)?default\)")
# Markdown's special characters, escaped with a backslash in a table cell
_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def _text(text: str) -> str:
    """`text` for Markdown (a table cell, a paragraph): one line, HTML's `<`, `>`, `&` and
    the `$` of a formula as entities, Markdown's special characters escaped."""
    text = html.escape(" ".join(text.split()), quote=False).replace("$", "&#36;")
    return _SPECIAL.sub(r"\\\1", text)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The action's help as `--help` prints it (`%(default)s` expanded), one line."""
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return " ".join(parser._get_formatter()._expand_help(action).split())


def default(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """The default of `action`, as the page shows it: the parser's own, else the one its
    help text states; "off" for a switch; "required", or "—" when none is known."""
    if action.nargs == 0:
        return "off"
    if action.default not in (None, argparse.SUPPRESS):
        return str(action.default)
    text = _help(parser, action)
    if m := _STATED.search(text) or _MARKED.search(text):
        return m.group("value")
    return "required" if action.required else "—"


def _option(action: argparse.Action) -> str:
    names = ", ".join(action.option_strings) or action.metavar or action.dest
    if action.nargs == 0 or not action.option_strings:
        return f"`{names}`"
    value = action.metavar or ("NAME" if action.choices else action.dest.upper())
    return f"`{names} {value}`"


def options_table(parser: argparse.ArgumentParser) -> str:
    """The options and arguments of `parser` (but `-h`) as a Markdown table."""
    rows = []
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
            continue
        meaning = _text(_help(parser, action))
        if action.choices:
            one_of = ", ".join(f"`{c}`" for c in action.choices)
            meaning = f"{meaning} — one of {one_of}" if meaning else f"one of {one_of}"
        row = [_option(action), _text(default(parser, action)), meaning or "—"]
        rows.append("| " + " | ".join(row) + " |")
    if not rows:
        return ""
    return "| Option | Default | Meaning |\n|---|---|---|\n" + "\n".join(rows) + "\n"


def synopsis(parser: argparse.ArgumentParser) -> str:
    """`prog [options] REQUIRED… [positional]`, the short form of the usage line."""
    words = [parser.prog]
    actions = [a for a in parser._actions if not isinstance(a, argparse._HelpAction)]
    if any(a.option_strings and not a.required for a in actions):
        words.append("[options]")
    for a in actions:
        if a.option_strings and a.required:
            words.append(f"{a.option_strings[-1]} {a.metavar or a.dest.upper()}")
    for a in actions:
        if not a.option_strings:
            name = a.metavar or a.dest
            words.append(f"{name} …" if isinstance(a, argparse._SubParsersAction) else name)
            if a.nargs == "?":
                words[-1] = f"[{words[-1]}]"
    return " ".join(words)


def _lead(text: str | None) -> str:
    return f"{text[0].upper()}{text[1:]}." if text else ""


def _described(parser: argparse.ArgumentParser) -> str:
    """The parser's description and epilog as paragraphs (empty when it has none)."""
    parts = [" ".join(t.split()) for t in (parser.description, parser.epilog) if t]
    return "".join(f"{_text(p)}\n\n" for p in parts)


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
            "same program). Each command has its own page with its options and their "
            "defaults; every command also takes `-h`/`--help`, which prints the same "
            f"there:\n\n{listing}\n\n## The program's own options\n\n"
            f"`{synopsis(parser)}`\n\n{_described(parser)}{options_table(parser)}"
        )
        for name, sub in commands.items():
            parts = [f"# flows {name}\n\n{_NOTE}"]
            if lead := helps.get(name):
                parts.append(f"{_lead(lead)}\n\n")
            parts.append(f"**Usage:** `{synopsis(sub)}`\n\n{_described(sub)}")
            if table := options_table(sub):
                parts.append(table)
            experiments = _subparsers(sub)
            if experiments:
                subhelps = {
                    a.dest: a.help
                    for action in sub._actions
                    if isinstance(action, argparse._SubParsersAction)
                    for a in action._choices_actions
                }
                links = ", ".join(f"[{e}](#flows-{name}-{e})" for e in experiments)
                parts.append(f"One set of options per paper: {links}.\n")
            for exp, exp_parser in experiments.items():
                parts.append(
                    f"\n## flows {name} {exp}\n\n"
                    + (
                        f"*{_text(title)}*\n\n"
                        if (title := subhelps.get(exp))
                        and not (exp_parser.description or "").startswith(title)
                        else ""
                    )
                    + f"**Usage:** `{synopsis(exp_parser)}`\n\n"
                    + _described(exp_parser)
                    + options_table(exp_parser)
                )
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
