"""MkDocs hooks for the flows documentation (registered in `mkdocs.yml`).

1. Docstring lists. The toolkit's docstrings are Markdown written for reading as plain
   text: a list often follows its lead-in line directly (`**Arguments:**` then `- …`),
   which Python-Markdown joins into one paragraph. A small preprocessor inserts the blank
   line a list needs, outside fenced code. It runs on the pages and on the docstrings
   (mkdocstrings renders them with the same Markdown extensions).

2. Figures from the repository. `<!-- figure: PATH | CAPTION -->` in a page, PATH relative
   to the repository root (e.g. `benchmarks/results/work_precision_multistage.png`,
   `results/multistage/stages.png`), becomes the image when the file exists, and a line
   naming the missing file when it does not. Present files are added to the
   site under the same path; nothing is fetched and nothing is required: the build is the
   same offline, on a fresh clone. `results/…` is read from the folder named by the
   environment variable `FLOWS_DOCS_RESULTS` when it is set (`flows check --out DIR`, then
   `FLOWS_DOCS_RESULTS=DIR mkdocs build`).

3. Formulas. `$…$` in a page holds a formula in the TeX-like text the reports use
   (`$m^{2α₁−1}$`, `$T_d$`, `$(Δ_min/2V_max^r)^{1/(r−1)}$`: Unicode letters, `_` and `^`
   scripts, braces for groups); it becomes inline MathML at build time by the reports'
   own renderer (`flows._report.math.to_mathml`), so nothing is fetched or run when the
   page is viewed (browsers lay MathML out natively). A `$` not followed by a non-blank
   character, or inside code, is left alone; a formula the renderer cannot read fails the
   strict build naming it (a bar inside a table cell is escaped as in any cell). Text the
   pages do not hold — docstrings in the API reference, the notebooks' Markdown in the
   examples — keeps the reports' plain notation: its formulas are found and rendered the
   way the reports find them (`formula_html`), and so is a braced script on a word
   (`tol^{p/(p+1)}`), outside code. `tests/test_docs.py` holds the pages to the markup
   (no formula left unmarked) and `tests/test_browser.py` checks the MathML laid out.

4. Words and numbers kept whole. A browser may break a line inside a token at a hyphen,
   a dash or other punctuation: `1e-⏎6`, `35–⏎66`, `kvaerno5-⏎cg`, `--⏎quick` (Material
   lets inline code break anywhere). In each page's HTML, outside `<pre>` (code blocks
   scroll), every whitespace-separated token of a text run with such a break opportunity
   inside it (after a hyphen, a dash or `|`; before a bracket that follows punctuation) is
   wrapped in `<span class="nw">` (`white-space: nowrap`, `docs/stylesheets/extra.css`):
   a number, a range, a flag or a name is laid out on one line. Left to wrap as before:
   ordinary compound words at a hyphen between two letters (`non-⏎increasing`, the usual
   place to break one), and tokens longer than `KEEP_WHOLE` characters or with `/` or `_`
   (paths and identifiers, which may not fit a line). `tests/test_browser.py` measures the
   built pages in Chromium for tokens broken across lines.
"""

from __future__ import annotations

import html
import logging
import os
import posixpath
import re
from pathlib import Path

from markdown import Extension
from markdown.inlinepatterns import InlineProcessor
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

from flows._report.math import formula_html, to_mathml  # the reports' renderer

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("mkdocs.hooks.flows")

_FIGURE = re.compile(r"<!--\s*figure:\s*(?P<path>[^|>]+?)\s*\|\s*(?P<caption>.*?)\s*-->")
#: `$…$`: opens before a non-blank character, closes after one, and is not followed by a
#: word character or a digit (`$5 and $6` is not a formula).
MATH = r"(?<![\\$\w])\$(?=[^\s$])(?P<tex>[^$\n]*?[^\s$\\])\$(?![\w$])"
_LIST_ITEM = re.compile(r"^(?:[-*+]|\d+\.)\s+\S")
_FENCE = re.compile(r"^\s*(```|~~~)")

#: Longest token kept on one line (`keep_tokens_whole`); longer ones may wrap.
KEEP_WHOLE = 40
# a tag, a comment, or the text between them
_HTML_PIECE = re.compile(r"(<!--.*?-->|<[^>]*>)", re.S)
# elements whose text is left alone: code blocks (they scroll), scripts, styles, formulas
_RAW = ("pre", "script", "style", "svg", "math", "textarea")
_RAW_TAG = re.compile(r"<(/?)(" + "|".join(_RAW) + r")\b", re.I)
_TOKEN = re.compile(r"[^\s]+")
# where a browser may break inside a token (UAX #14): after a hyphen, a dash or a bar, and
# before an opening bracket that follows punctuation (`".[dask]"`)
_INNER = re.compile(r"(?<=.)(?:[-\u2010\u2013\u2014|]|[.,:;!?](?=[(\[{]))(?=.)")
# ...except an ordinary compound word's hyphen between two letters
_COMPOUND = re.compile(r"(?<=[^\W\d_])[-\u2010](?=[^\W\d_])")
# punctuation around a token, which a browser does not break at
_OUTER = re.compile(r"^[(\[{]+|[)\]}\"'\u201d\u2019.,;:!?]+$")


class _ListSpacing(Preprocessor):
    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        in_fence = False
        in_list = False
        for line in lines:
            if _FENCE.match(line):
                in_fence = not in_fence
            if in_fence:
                out.append(line)
                continue
            if _LIST_ITEM.match(line):
                if out and out[-1].strip() and not in_list:
                    out.append("")
                in_list = True
            elif not line.strip():
                in_list = False
            out.append(line)
        return out


class ListSpacing(Extension):
    """Blank line before a list that follows a paragraph line (see the module docstring)."""

    def extendMarkdown(self, md):  # noqa: N802 - Markdown's API
        md.preprocessors.register(_ListSpacing(md), "flows_list_spacing", 35)


class _Math(InlineProcessor):
    def handleMatch(self, m, data):  # noqa: N802 - Markdown's API
        tex = m.group("tex").replace("\\|", "|")
        try:
            mathml = to_mathml(tex)
        except ValueError:
            log.warning(f"formula ${tex}$ cannot be rendered (docs/_hooks.py, 3)")
            return None, None, None
        return self.md.htmlStash.store(mathml), m.start(0), m.end(0)


class Math(Extension):
    """`$…$` as inline MathML (see the module docstring, 3)."""

    def extendMarkdown(self, md):  # noqa: N802 - Markdown's API
        # after code spans (190), before backslash escapes (180): code keeps its `$`
        md.inlinePatterns.register(_Math(MATH, md), "flows_math", 185)


# elements whose text holds no formula to find: code, and those in `_RAW`
_CODE_TAG = re.compile(r"<(/?)(code|kbd|pre|script|style|svg|math|textarea)\b", re.I)
# a braced script on a word or on a letter and digits (`tol^{p/(p+1)}`, `w0^{1−r}`), which
# the reports' rules leave as text (a script on a word is not math in a report's prose)
_WORD_SCRIPT = re.compile(r"(?<![\w.])[^\W\d_][\w′″]*\^\{(?:[^{}\s]|\{[^{}\s]*\})*\}")


def _formulas_in(text: str) -> str:
    out, last = [], 0
    for m in _WORD_SCRIPT.finditer(text):
        try:
            mathml = to_mathml(m.group(0))
        except ValueError:
            continue
        out += [formula_html(text[last : m.start()], plain=html.escape), mathml]
        last = m.end()
    return "".join(out) + formula_html(text[last:], plain=html.escape)


def render_formulas(html_text: str) -> str:
    """`html_text` with the formulas in its text runs (outside code and MathML) rendered as
    MathML by the reports' rules (`formula_html`; see the module docstring, 3)."""
    out: list[str] = []
    raw = 0
    for piece in _HTML_PIECE.split(html_text):
        if piece.startswith("<"):
            if (m := _CODE_TAG.match(piece)) and not piece.endswith("/>"):
                raw = max(0, raw - 1) if m.group(1) else raw + 1
            out.append(piece)
        elif raw or ("^" not in piece and "_" not in piece):
            out.append(piece)
        else:
            out.append(_formulas_in(html.unescape(piece)))
    return "".join(out)


def _source(rel: str) -> Path:
    """Where the repository path `rel` of a figure is read from (see the module docstring)."""
    results = os.environ.get("FLOWS_DOCS_RESULTS")
    if results and rel.startswith("results/"):
        return Path(results) / rel[len("results/") :]
    return ROOT / rel


def _figures(markdown: str) -> list[str]:
    return [m.group("path").strip() for m in _FIGURE.finditer(markdown)]


def _keep_whole(token: str) -> str:
    if len(token) > KEEP_WHOLE or "/" in token or "_" in token:
        return token
    # entities (`&amp;`, `&lt;`) count as one character; opening brackets before the token,
    # and closing ones, quotes and punctuation after it, are not inside it
    core = _OUTER.sub("", re.sub(r"&#?\w+;", "x", token))
    inner = {m.start() for m in _INNER.finditer(core)}
    inner -= {m.start() for m in _COMPOUND.finditer(core)}
    return f'<span class="nw">{token}</span>' if inner else token


def keep_tokens_whole(html: str) -> str:
    """`html` with each token at risk of a mid-token line break wrapped in
    `<span class="nw">` (see the module docstring, 4)."""
    out: list[str] = []
    raw = 0
    for piece in _HTML_PIECE.split(html):
        if piece.startswith("<"):
            if (m := _RAW_TAG.match(piece)) and not piece.endswith("/>"):
                raw = max(0, raw - 1) if m.group(1) else raw + 1
            out.append(piece)
        elif raw or not piece.strip():
            out.append(piece)
        else:
            out.append(_TOKEN.sub(lambda m: _keep_whole(m.group(0)), piece))
    return "".join(out)


@event_priority(100)  # before mkdocstrings reads the extension list
def on_config(config):
    config.markdown_extensions.extend([ListSpacing(), Math()])
    return config


def on_files(files, config):
    wanted: set[str] = set()
    for page in Path(config.docs_dir).rglob("*.md"):
        wanted.update(_figures(page.read_text(encoding="utf-8")))
    for rel in sorted(wanted):
        src = _source(rel)
        if src.is_file() and files.get_file_from_path(rel) is None:
            files.append(File.generated(config, rel, abs_src_path=str(src)))
    return files


def on_page_markdown(markdown, page, config, files):
    here = posixpath.dirname(page.file.src_uri)

    def replace(m: re.Match) -> str:
        rel, caption = m.group("path").strip(), m.group("caption").strip()
        if _source(rel).is_file():
            return f"![{caption}]({posixpath.relpath(rel, here or '.')})"
        return f"*{caption}:* `{rel}` is not in this checkout."

    return _FIGURE.sub(replace, markdown)


#: Pages whose text the docs do not hold (docstrings, notebooks): their formulas are found
#: as the reports find them (module docstring, 3).
FOUND_FORMULAS = ("api/", "examples/")


def on_page_content(html, page, config, files):
    if page.file.src_uri.startswith(FOUND_FORMULAS):
        html = render_formulas(html)
    return keep_tokens_whole(html)
