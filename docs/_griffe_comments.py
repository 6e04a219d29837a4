"""Griffe extension (loaded by mkdocstrings, see `mkdocs.yml`): `#:` comments are docstrings.

The toolkit documents its constants and fields the way Sphinx reads them, with `#:`
comment lines directly above the assignment:

    #: Longest first step the toolkit chooses (clock units).
    FIRST_STEP_MAX = 0.01

Griffe, which reads the sources for the API reference, only knows a string literal
*after* an assignment as its docstring, so without this extension every such constant was
rendered with its value alone (or, as a member of a rendered class or module, not at all).
Here the comment block (the `#:` lines up to the assignment, `#: ` stripped) becomes the
attribute's docstring when it has none. A plain `#` comment is not documentation and is
left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import griffe

_MARK = "#:"


def comment_docstring(lines: list[str], lineno: int) -> str | None:
    """The text of the `#:` block directly above line `lineno` (1-based) of `lines`, or
    None when there is none."""
    block: list[str] = []
    i = lineno - 2
    while i >= 0 and lines[i].lstrip().startswith(_MARK):
        text = lines[i].lstrip()[len(_MARK) :]
        block.append(text[1:] if text.startswith(" ") else text)
        i -= 1
    text = "\n".join(reversed(block)).strip()
    return text or None


class CommentDocstrings(griffe.Extension):
    """Set an attribute's docstring from its `#:` comment block (see the module docstring)."""

    # keyword arguments other than `attr` (`node`, `agent`, …) differ between griffe versions
    def on_attribute_instance(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        if attr.docstring is not None or not attr.lineno:
            return
        path = attr.filepath
        if not isinstance(path, Path):  # a namespace package: no single file
            return
        try:
            lines = attr.lines_collection[path]
        except KeyError:  # sources not stored by the loader: read them
            lines = path.read_text(encoding="utf-8-sig").splitlines()
        text = comment_docstring(lines, attr.lineno)
        if text is not None:
            attr.docstring = griffe.Docstring(text, lineno=attr.lineno, parent=attr)
