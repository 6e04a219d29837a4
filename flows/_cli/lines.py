"""Lines the commands print while they work: widths fitted to the terminal, durations in
words, streams that hand whole lines on (stamped, or to a progress display), and whether a
stream is a terminal that can show a live bar."""

from __future__ import annotations

import io
import shutil

#: The widest table drawn: a `COLUMNS` or `--width` beyond it (`COLUMNS=10²⁰`, which no
#: terminal has) draws this wide; every line then fits on one line of any real terminal.
MAX_WIDTH = 1000


def terminal_width(fallback: int = 120) -> int:
    """Columns of the terminal (`COLUMNS` if set; `fallback` when not a terminal), in
    [20, `MAX_WIDTH`]."""
    return min(max(shutil.get_terminal_size((fallback, 24)).columns, 20), MAX_WIDTH)


def _duration(s: float) -> str:
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


class _StampedLines(io.TextIOBase):
    """A text stream that passes whole lines on to `target`, each changed by `edit(line)`
    (e.g. prefixed with the time elapsed); used to time the progress lines that
    experiments and sweeps print."""

    def __init__(self, target, edit):
        self.target, self.edit, self._buf = target, edit, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.target.write(self.edit(line) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.target.write(self.edit(self._buf))
            self._buf = ""
        self.target.flush()


def _fit(text: str, width: int, indent: int) -> str:
    """`text` wrapped to `width` with a hanging indent; words (paths) are never split."""
    import textwrap

    return textwrap.fill(
        text,
        width,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


class _ProgressLines(io.TextIOBase):
    """The stream the papers print their progress to: whole lines go to `progress.write`."""

    def __init__(self, progress):
        self.progress, self._buf = progress, ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self._buf += text
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self.progress.write(line)
        return len(text)

    def flush(self) -> None:
        if self._buf:
            self.progress.write(self._buf)
            self._buf = ""
