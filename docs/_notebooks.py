"""MkDocs hook (registered in `mkdocs.yml`): the "Examples" pages, rendered at build time
from the notebooks as stored in `notebooks/` (executed, with their outputs: see
`notebooks/execute.py`). Nothing is executed and nothing is fetched: the build reads the
stored JSON, so it is fast and offline.

- `examples/index.md`: the gallery, one card per notebook: its title (the first `# `
  heading), the one-sentence description and the main figure named in the notebook's
  metadata (`metadata.flows.gallery`: `description`, and `figure`, the 0-based index of
  the figure among the notebook's image outputs);
- `examples/<name>.md` (`name`: the notebook's stem with `-` for `_`): the notebook as a
  page: Markdown cells as they are, code cells as Python blocks, text outputs as text
  blocks, image outputs as PNG files beside the page (`examples/<name>/figure-N.png`);
  the notebook itself is added as `examples/<name>.ipynb` and linked for download.
- A claims table among the text outputs (the toolkit's table, `claim | predicted |
  measured | verdict`, with its reasons on `↳` lines) is shown narrowed to claim ·
  verdict · margin (the margin where a row states one), so that the verdict is in view on
  any screen; the full table follows, folded in a `<details>`, exactly as printed.

A code path `docs/….md` in a notebook's Markdown (how a notebook names the toolkit's page
for its paper, readable in Jupyter too) becomes a link to that page. The nav lists the pages
by hand (`mkdocs.yml`, "Examples"): a new notebook's page is generated here and, until it is
listed, the strict build fails on the page left out of the nav (`tests/test_docs.py` names
the notebook).
"""

import base64
import html
import json
import posixpath
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
#: Folder of the generated pages, relative to `docs/`.
FOLDER = "examples"

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_DOCS_PATH = re.compile(r"`docs/(?P<page>[\w./-]+?\.md)`")


@dataclass
class Rendered:
    """One notebook rendered: its page's Markdown and the files that go with it."""

    name: str
    title: str
    description: str
    markdown: str
    #: `{path relative to docs/: bytes}`: the figures and the notebook itself.
    files: dict[str, bytes] = field(default_factory=dict)
    #: Paths (relative to docs/) of the figures, in the order they appear.
    figures: list[str] = field(default_factory=list)
    #: Index into `figures` of the gallery's figure.
    main_figure: int = 0


def page_name(path: Path) -> str:
    """The page name of the notebook `path` (`bias_plateau.ipynb` → `bias-plateau`)."""
    return path.stem.replace("_", "-")


def notebooks() -> list[Path]:
    """The stored notebooks, in the order the gallery shows them (by file name)."""
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _fence(text: str, lang: str) -> str:
    """`text` as a fenced block (a fence longer than any backtick run inside it)."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def _title(cells: list[dict], path: Path) -> str:
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            for line in _text(cell.get("source", "")).splitlines():
                if line.startswith("# "):
                    return line[2:].strip()
    raise PluginError(f"notebooks/{path.name} has no `# ` title in a Markdown cell")


def _link_docs_paths(text: str, here: str) -> str:
    """`docs/papers/x.md` in code → a link to that page, relative to the page at `here`."""

    def link(m: re.Match) -> str:
        page = m.group("page")
        if not (ROOT / "docs" / page).is_file():
            return m.group(0)
        return f"[`docs/{page}`]({posixpath.relpath(page, here)})"

    return _DOCS_PATH.sub(link, text)


def render(path: Path) -> Rendered:
    """The page of the stored notebook `path` (see the module docstring); raises
    `PluginError` naming what is missing (a title, the gallery metadata, outputs)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    name = page_name(path)
    meta = nb.get("metadata", {}).get("flows", {})
    gallery = meta.get("gallery", {})
    if not gallery.get("description"):
        raise PluginError(
            f"notebooks/{path.name}: no metadata.flows.gallery.description (the gallery "
            "card's one sentence)"
        )
    cells = nb.get("cells", [])
    title = _title(cells, path)
    here = FOLDER  # the page's folder, relative to docs/
    out = Rendered(name, title, gallery["description"], "", main_figure=gallery.get("figure", 0))
    out.files[f"{FOLDER}/{name}.ipynb"] = path.read_bytes()
    size = meta.get("size", "?")
    seconds = meta.get("seconds")
    ran = f"executed at size `{size}`" + (f" in {seconds} s" if seconds is not None else "")
    parts = [
        f"<!-- Generated at build time by docs/_notebooks.py from notebooks/{path.name}; "
        "do not edit. -->",
    ]
    note = (
        f'!!! note "From `notebooks/{path.name}`"\n'
        f"    This page is the notebook as stored, {ran} "
        f"([download it]({name}.ipynb)). To run it, open `notebooks/{path.name}` from a "
        "clone in any Jupyter front end (the `test` extra brings the kernel); "
        "`FLOWS_NOTEBOOK_SIZE=small` gives a fast, reduced run."
    )
    titled = False
    for cell in cells:
        kind = cell.get("cell_type")
        source = _text(cell.get("source", ""))
        if kind == "markdown":
            text = _link_docs_paths(source, here)
            if not titled and text.lstrip().startswith("# "):
                # the note goes right under the title
                head, _, rest = text.lstrip().partition("\n")
                parts += [head, note, rest.strip("\n")]
                titled = True
            else:
                parts.append(text)
        elif kind == "code":
            if source.strip():
                parts.append(_fence(source, "python"))
            for o in cell.get("outputs", []):
                parts.extend(_output(o, out, name))
    if not titled:
        parts.insert(1, note)
    if not out.figures:
        raise PluginError(f"notebooks/{path.name} has no figure among its stored outputs")
    if not 0 <= out.main_figure < len(out.figures):
        raise PluginError(
            f"notebooks/{path.name}: metadata.flows.gallery.figure = {out.main_figure}, but "
            f"the stored outputs have {len(out.figures)} figures (0-based index)"
        )
    out.markdown = "\n\n".join(p for p in parts if p.strip()) + "\n"
    return out


@dataclass
class ClaimRow:
    """One row of a printed claims table: its cells joined over their lines, and its
    reason (the `↳` lines)."""

    claim: str
    predicted: str
    measured: str
    verdict: str
    reason: str = ""

    @property
    def margin(self) -> str:
        """The margin the row states ("margin 0.36, … ±0.51" → "0.36 ± 0.51"), or "—"."""
        found = list(_MARGIN.finditer(f"{self.measured} {self.reason}"))
        if not found:
            return "—"
        m = next((m for m in found if m.group("error")), found[0])  # with its error bar
        return m.group("value") + (f" ± {m.group('error')}" if m.group("error") else "")


_COLUMNS = ("claim", "predicted", "measured", "verdict")
_MARGIN = re.compile(
    r"\bmargin (?P<value>[-−+]?\d[\d.]*(?:e[-+]?\d+)?)"
    r"(?:,[^;±]*?±(?P<error>\d[\d.]*(?:e[-+]?\d+)?))?"
)


def _cut(line: str, cuts: list[int]) -> list[str] | None:
    """`line` cut at the columns `cuts` as a terminal lays it out (a combining mark takes
    no column: `w̄`), the cells stripped; None when a cut is not at a `|`."""
    cells, cell, col, at = [], "", 0, 0
    for ch in line:
        if at < len(cuts) and col == cuts[at] and not unicodedata.combining(ch):
            if ch != "|":
                return None
            cells.append(cell.strip())
            cell, at = "", at + 1
        else:
            cell += ch
        col += 0 if unicodedata.combining(ch) else 1
    return [*cells, cell.strip()] if at == len(cuts) else None


def claims_table(text: str) -> tuple[list[ClaimRow], str] | None:
    """The rows and the summary line (`12 hold, 1 fail, …`) of a claims table printed by
    the toolkit, or None when `text` is not one (or not one this parser can read: then it
    is shown as printed)."""
    lines = text.rstrip("\n").split("\n")
    if len(lines) < 3 or [c.strip() for c in lines[0].split("|")] != list(_COLUMNS):
        return None
    cuts = [i for i, ch in enumerate(lines[0]) if ch == "|"]
    rows: list[ClaimRow] = []
    summary: list[str] = []
    after_rule = False
    for line in lines[2:]:
        if set(line.strip()) == {"-"}:
            after_rule = True
            continue
        if after_rule:
            summary.append(line.strip())
        elif line.startswith("    "):  # a reason, or its continuation
            if not rows:
                return None
            more = line.strip().removeprefix("↳").strip()
            rows[-1].reason = f"{rows[-1].reason} {more}".strip()
        else:
            cells = _cut(line, cuts)
            if cells is None:
                return None
            if rows and not cells[0].startswith("[") and not rows[-1].reason:
                row = rows[-1]  # the same row, on its next line
                joined = [
                    f"{before} {more}".strip()
                    for before, more in zip(
                        (row.claim, row.predicted, row.measured, row.verdict), cells, strict=True
                    )
                ]
                row.claim, row.predicted, row.measured, row.verdict = joined
            else:
                rows.append(ClaimRow(*cells))
    return (rows, " ".join(summary)) if rows else None


def _cell(text: str) -> str:
    """`text` for a Markdown table cell (HTML and Markdown's special characters escaped)."""
    text = html.escape(text, quote=False).replace("$", "&#36;")
    return re.sub(r"([\\`*_\[\]|])", r"\\\1", text)


def _claims(text: str) -> list[str] | None:
    """A printed claims table as the narrow table and the folded full one (see the module
    docstring), or None when `text` is not one."""
    parsed = claims_table(text)
    if parsed is None:
        return None
    rows, summary = parsed
    table = "| Claim | Verdict | Margin |\n|---|---|---|\n" + "\n".join(
        f"| {_cell(r.claim)} | {_cell(r.verdict.lower())} | {_cell(r.margin)} |" for r in rows
    )
    folded = (
        "<details><summary>Predicted, measured and the reasons: the table as printed"
        f"</summary>\n<pre><code>{html.escape(text.rstrip())}</code></pre>\n</details>"
    )
    return [table, *([_cell(summary)] if summary else []), folded]


def _output(o: dict, out: Rendered, name: str) -> list[str]:
    kind = o.get("output_type")
    if kind == "stream":
        text = _ANSI.sub("", _text(o.get("text", "")))
        if (claims := _claims(text)) is not None:
            return claims
        return [_fence(text, "text")] if text.strip() else []
    if kind == "error":
        trace = _ANSI.sub("", "\n".join(o.get("traceback", [])))
        return [_fence(trace or f"{o.get('ename')}: {o.get('evalue')}", "text")]
    data = o.get("data", {})
    if "image/png" in data:
        n = len(out.figures) + 1
        rel = f"{FOLDER}/{name}/figure-{n}.png"
        out.files[rel] = base64.b64decode(_text(data["image/png"]))
        out.figures.append(rel)
        return [f"![Figure {n} of {out.title}]({name}/figure-{n}.png)"]
    if "text/markdown" in data:
        return [_text(data["text/markdown"])]
    if "text/plain" in data:
        return [_fence(_ANSI.sub("", _text(data["text/plain"])), "text")]
    return []


def gallery(rendered: list[Rendered]) -> str:
    """The gallery page's Markdown: one card per notebook (Material's grid cards)."""
    cards = []
    for r in rendered:
        figure = posixpath.relpath(r.figures[r.main_figure], FOLDER)
        cards.append(
            f"-   [![{r.title}]({figure})]({r.name}.md)\n\n"
            f"    **[{r.title}]({r.name}.md)**\n\n"
            f"    {r.description}\n"
        )
    return (
        "# Examples\n\n"
        "<!-- Generated at build time by docs/_notebooks.py from notebooks/*.ipynb; "
        "do not edit. -->\n\n"
        "Each example is a notebook in `notebooks/` that reproduces a paper's figures with "
        "the exact gradient flow and checks its claims; the pages show them as stored, "
        "executed, with their outputs. Open one in Jupyter to run it "
        "(`FLOWS_NOTEBOOK_SIZE=small` for a fast, reduced run).\n\n"
        '<div class="grid cards flows-gallery" markdown>\n\n' + "\n".join(cards) + "\n</div>\n"
    )


def pages() -> tuple[dict[str, str], dict[str, bytes]]:
    """The generated pages (`{path relative to docs/: Markdown}`, the gallery first) and
    the files that go with them (`{path: bytes}`)."""
    rendered = [render(p) for p in notebooks()]
    md = {f"{FOLDER}/index.md": gallery(rendered)}
    files: dict[str, bytes] = {}
    for r in rendered:
        md[f"{FOLDER}/{r.name}.md"] = r.markdown
        files.update(r.files)
    return md, files


def on_files(files, config):
    md, binary = pages()
    for uri, content in [*md.items(), *binary.items()]:
        if files.get_file_from_path(uri) is not None:
            raise PluginError(
                f"docs/{uri} exists, but that file is generated from the notebooks by "
                "docs/_notebooks.py: remove it"
            )
        files.append(File.generated(config, uri, content=content))
    return files
