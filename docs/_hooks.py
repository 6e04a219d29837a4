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

3. Long-form text. `<!-- readme: HEADING -->` is replaced by the body of the section with
   that heading in `docs/_sections.md` (the long-form text, once the README; not a page),
   up to the next heading of the same or a higher level (`intro` is the text before the
   first `##`); `<!-- readme: HEADING | PREFIX -->` keeps
   only the section's top-level bullets that start with PREFIX. Findings, limitations and
   the set-up commands are thus stated once, in that file, and the pages cannot drift
   from it. Its relative links (to files outside the site, relative to the repository
   root) become the path in code; a missing section or an empty selection fails the build
   with its name.

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

import os
import posixpath
import re
from pathlib import Path

from markdown import Extension
from markdown.preprocessors import Preprocessor
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
#: The long-form text the pages include (`<!-- readme: HEADING -->`).
SECTIONS = ROOT / "docs" / "_sections.md"

_FIGURE = re.compile(r"<!--\s*figure:\s*(?P<path>[^|>]+?)\s*\|\s*(?P<caption>.*?)\s*-->")
_README = re.compile(r"<!--\s*readme:\s*(?P<heading>[^|>]+?)\s*(?:\|\s*(?P<prefix>.*?)\s*)?-->")
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]]+)\]\((?P<target>[^)\s]+)\)")
_HEADING = re.compile(r"^(?P<level>#{1,6})\s+(?P<title>.+?)\s*$")
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


def readme_section(heading: str, prefix: str | None = None, readme: Path | None = None) -> str:
    """The body of the section `heading` of `docs/_sections.md` (see the module
    docstring), with its relative links turned into code paths; raises `ValueError`
    naming what is missing."""
    lines = (readme or SECTIONS).read_text(encoding="utf-8").splitlines()
    if heading == "intro":
        start = next(i for i, ln in enumerate(lines) if ln.startswith("# ")) + 1
        stop = next((i for i, ln in enumerate(lines) if ln.startswith("## ")), len(lines))
        body = lines[start:stop]
    else:
        found = None
        for i, ln in enumerate(lines):
            m = _HEADING.match(ln)
            if m and m.group("title") == heading:
                found = i, len(m.group("level"))
                break
        if found is None:
            raise ValueError(f"docs/_sections.md has no section {heading!r} (named in a docs page)")
        start, level = found
        stop = len(lines)
        in_fence = False
        for i in range(start + 1, len(lines)):
            if _FENCE.match(lines[i]):
                in_fence = not in_fence
            m = None if in_fence else _HEADING.match(lines[i])
            if m and len(m.group("level")) <= level:
                stop = i
                break
        body = lines[start + 1 : stop]
    if prefix:
        kept: list[str] = []
        keep = False
        for ln in body:
            if ln.startswith("- "):
                keep = ln[2:].startswith(prefix)
            elif ln.strip() and not ln.startswith(" "):
                keep = False
            if keep:
                kept.append(ln)
        if not kept:
            raise ValueError(
                f"docs/_sections.md section {heading!r} has no bullet starting {prefix!r}"
            )
        body = kept
    text = "\n".join(body).strip("\n")

    def unlink(m: re.Match) -> str:
        target = m.group("target")
        if target.startswith(("http://", "https://", "#", "mailto:")):
            return m.group(0)
        text = m.group("text")
        return text if text.strip("`") == target else f"{text} (`{target}`)"

    return _LINK.sub(unlink, text)


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
    config.markdown_extensions.append(ListSpacing())
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

    def include(m: re.Match) -> str:
        return readme_section(m.group("heading").strip(), m.group("prefix") or None)

    return _FIGURE.sub(replace, _README.sub(include, markdown))


def on_page_content(html, page, config, files):
    return keep_tokens_whole(html)
