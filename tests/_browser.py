"""Layout measurements of an HTML page in headless Chromium, for `test_browser.py`.

No Python browser library: the page is copied with a measuring `<script>` added at the end
of its body; Chromium loads the copy (`--headless=new --dump-dom`), the script writes its
findings as JSON into `<body data-layout="…">` once the page has loaded, and the dumped DOM
is parsed here. A second launch, with the window as tall as the page, takes a full-page
screenshot for a person to look at.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

#: The Chromium (or Chrome) binaries looked for, in this order.
BROWSERS = ("chromium", "chromium-browser", "google-chrome")

#: Longest token checked for a mid-word break: longer ones (hashes, paths, serialized
#: settings) cannot be expected to fit a line, and are left to wrap.
LONG_TOKEN = 40

# Runs on `load` (after the page's own scripts), with every <details> opened so that the
# tables folded inside them are laid out and measured too.
#
# (a) overflow: the page's own horizontal scroll width, and every element reaching past
#     the viewport's left or right edge that no ancestor clips or scrolls (overflow-x other
#     than `visible`: the reports' `div.tw`, `pre`, an <svg>); only the outermost such
#     element is listed. Not counted: an off-canvas panel, i.e. an element inside (or
#     being) a `position: fixed` box lying wholly beyond the left or right edge (the docs
#     theme's navigation drawer below 1220 px, slid in by its menu button): fixed boxes do
#     not scroll with the page, and nothing of it is cut off while it is shown.
# (b) broken tokens: in each text block (CONTAINERS), the text of its inline content
#     (across inline tags such as <code>, <sub>, <a> and <wbr>; split at <br>, at
#     non-inline boxes and at nested blocks, which are measured on their own) is cut at
#     breakable white space; each token's Range is a broken token when its client
#     rectangles lie on more than one line (a rectangle per text node and per wholly
#     contained inline box on one line; rectangles that overlap vertically are one line).
#     Each break is marked with "⏎" at the character where the new line starts.
# (c) formulas: the <math> elements and how many have a laid-out box, and text outside
#     code and formulas that still reads "^{" (TeX-like notation left unrendered).
# (d) verdict columns: each <th> reading "Verdict", its right edge against the right edge
#     of what is visible without scrolling.
_MEASURE_JS = r"""
(() => {
const CONTAINERS = "td,th,caption,p,li,dt,dd,figcaption,summary,h1,h2,h3,h4,h5,h6";
const SKIP = new Set(["script", "style", "svg", "math", "textarea", "template", "noscript"]);
const SPACE = /[\t\n\f\r \u1680\u2000-\u2006\u2008-\u200a\u2028\u2029\u205f\u3000]/;
const LONG = __LONG__;
// a line break after the hyphen of a compound word ("non-⏎increasing"): letter, hyphen, letter
const HYPHEN_BREAK = /^\p{L}[-\u2010]\p{L}$/u;

function describe(el) {
  let s = el.localName;
  if (el.id) s += "#" + el.id;
  if (typeof el.className === "string" && el.className.trim())
    s += "." + el.className.trim().split(/\s+/).join(".");
  const path = [];
  for (let a = el.parentElement; a && a !== document.body && path.length < 4;
       a = a.parentElement) {
    let p = a.localName;
    if (a.id) p += "#" + a.id;
    else if (typeof a.className === "string" && a.className.trim())
      p += "." + a.className.trim().split(/\s+/)[0];
    path.unshift(p);
  }
  const text = (el.textContent || "").replace(/\s+/g, " ").trim();
  return {element: s, path: path.join(" > "),
          text: text.length > 80 ? text.slice(0, 77) + "…" : text};
}

function lines(rects) {
  const rs = Array.from(rects).filter(r => r.width > 0.01 && r.height > 0.01)
    .sort((a, b) => a.top - b.top);
  const out = [];
  for (const r of rs) {
    const last = out[out.length - 1];
    if (last && r.top < last.bottom - 1) last.bottom = Math.max(last.bottom, r.bottom);
    else out.push({top: r.top, bottom: r.bottom});
  }
  return out;
}

function overflow() {
  const vw = document.documentElement.clientWidth;
  const clipped = el => {
    for (let a = el.parentElement; a && a !== document.body && a !== document.documentElement;
         a = a.parentElement)
      if (getComputedStyle(a).overflowX !== "visible") return true;
    return false;
  };
  const offCanvas = el => {
    for (let a = el; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).position !== "fixed") continue;
      const r = a.getBoundingClientRect();
      if (r.right <= 0.5 || r.left >= vw - 0.5) return true;
    }
    return false;
  };
  const found = [];
  const flagged = new Set();
  for (const el of document.body.querySelectorAll("*")) {
    if (SKIP.has(el.localName) && el.localName !== "svg") continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    if (r.right <= vw + 0.5 && r.left >= -0.5) continue;
    if (clipped(el) || offCanvas(el)) continue;
    let inner = false;
    for (let a = el.parentElement; a; a = a.parentElement) if (flagged.has(a)) inner = true;
    flagged.add(el);
    if (inner) continue;
    found.push(Object.assign(describe(el), {left: Math.round(r.left), right: Math.round(r.right)}));
  }
  return found;
}

function segments(container) {
  // [[{node, start}, …], …]: runs of text that tokens may span; a run ends at a hard break
  const runs = [[]];
  const cut = () => { if (runs[runs.length - 1].length) runs.push([]); };
  (function walk(el) {
    for (const ch of el.childNodes) {
      if (ch.nodeType === Node.TEXT_NODE) { runs[runs.length - 1].push(ch); continue; }
      if (ch.nodeType !== Node.ELEMENT_NODE) continue;
      const tag = ch.localName;
      if (SKIP.has(tag) || ch.matches(CONTAINERS) || tag === "br") { cut(); continue; }
      const d = getComputedStyle(ch).display;
      if (d === "none") continue;
      if (d === "inline" || d === "contents") { walk(ch); continue; }
      cut(); walk(ch); cut();
    }
  })(container);
  return runs.filter(r => r.length);
}

function tokens(run) {
  // each token: [[node, from], [node, to]] plus its text
  const out = [];
  let cur = null;
  for (const node of run) {
    const t = node.data;
    for (let i = 0; i < t.length; i++) {
      if (SPACE.test(t[i])) {
        if (cur) { out.push(cur); cur = null; }
        continue;
      }
      if (!cur) cur = {start: [node, i], end: [node, i + 1], text: "", chars: []};
      cur.end = [node, i + 1];
      cur.text += t[i];
      cur.chars.push([node, i]);
    }
  }
  if (cur) out.push(cur);
  return out;
}

function broken() {
  const found = [];
  const skipped = [];
  for (const c of document.body.querySelectorAll(CONTAINERS)) {
    for (const run of segments(c)) {
      for (const tok of tokens(run)) {
        const range = document.createRange();
        range.setStart(tok.start[0], tok.start[1]);
        range.setEnd(tok.end[0], tok.end[1]);
        const ls = lines(range.getClientRects());
        if (ls.length < 2) continue;
        // where each line starts: the first character below the previous line
        let marked = "";
        let line = 0;
        let atHyphens = true;
        tok.chars.forEach(([node, i], k) => {
          const r = document.createRange();
          r.setStart(node, i);
          r.setEnd(node, i + 1);
          const rect = Array.from(r.getClientRects()).find(q => q.height > 0.01);
          if (rect && line + 1 < ls.length && rect.top >= ls[line].bottom - 1 && k > 0) {
            marked += "⏎";
            line += 1;
            atHyphens = atHyphens && HYPHEN_BREAK.test(tok.text.slice(Math.max(0, k - 2), k + 1));
          }
          marked += tok.text[k];
        });
        const entry = Object.assign(describe(c), {token: tok.text, shown: marked,
                                                  lines: ls.length});
        if (/[\/_]/.test(tok.text) || tok.text.length > LONG)
          skipped.push(Object.assign(entry, {why: "path or identifier"}));
        else if (atHyphens)
          skipped.push(Object.assign(entry, {why: "compound word at its hyphen"}));
        else found.push(entry);
      }
    }
  }
  return [found, skipped];
}

function formulas() {
  // MathML elements and how many the browser laid out (a box of non-zero size); text that
  // still holds TeX-like script notation ("^{") outside code, code blocks and formulas
  const maths = Array.from(document.querySelectorAll("math"));
  const rendered = maths.filter(m => {
    const r = m.getBoundingClientRect();
    return r.width > 0.5 && r.height > 0.5;
  }).length;
  const raw = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.includes("^{")) continue;
    if (n.parentElement.closest("code, pre, kbd, script, style, math, svg, textarea")) continue;
    const i = n.data.indexOf("^{");
    raw.push(Object.assign(describe(n.parentElement),
                           {shown: n.data.slice(Math.max(0, i - 30), i + 30)}));
  }
  return {count: maths.length, rendered: rendered, raw: raw};
}

function columns(title) {
  // every table header cell reading `title`: its right edge and the right edge of what
  // is visible of it without scrolling (the viewport, or a scrolling or clipping ancestor)
  const vw = document.documentElement.clientWidth;
  const out = [];
  for (const th of document.querySelectorAll("th")) {
    if (th.textContent.trim() !== title) continue;
    const r = th.getBoundingClientRect();
    let visible = vw;
    for (let a = th.parentElement; a && a !== document.body; a = a.parentElement)
      if (getComputedStyle(a).overflowX !== "visible")
        visible = Math.min(visible, a.getBoundingClientRect().right);
    out.push(Object.assign(describe(th.closest("table")),
                           {right: Math.round(r.right), visible: Math.round(visible)}));
  }
  return out;
}

function measure() {
  for (const d of document.querySelectorAll("details")) d.open = true;
  const de = document.documentElement;
  const [tokensBroken, tokensExempt] = broken();
  document.body.dataset.layout = JSON.stringify({
    viewport: de.clientWidth,
    innerWidth: window.innerWidth,
    scrollWidth: de.scrollWidth,
    scrollHeight: de.scrollHeight,
    overflowing: overflow(),
    broken: tokensBroken,
    exempt: tokensExempt,
    formulas: formulas(),
    verdicts: columns("Verdict"),
  });
}

window.addEventListener("load", () => setTimeout(() => {
  try { measure(); }
  catch (e) { document.body.dataset.layout = JSON.stringify({error: String(e && e.stack || e)}); }
}, 50));
})();
""".replace("__LONG__", str(LONG_TOKEN))


@dataclasses.dataclass(frozen=True)
class Layout:
    """What the measuring script found on one page at one window width.

    `viewport` is the layout viewport's width (px), `scroll_width` the page's own scroll
    width: the page overflows when it is larger. `overflowing` lists the outermost elements
    reaching past the viewport with no scrolling or clipping ancestor; `broken` the tokens
    laid out on more than one line (`shown` marks each break with "⏎"); `exempt` the broken
    tokens that may wrap (paths and identifiers, see `test_browser.py`). Each entry names
    its `element`, the element's `path` (up to 4 ancestors) and the start of its `text`.
    `formulas` and `verdicts` report the MathML on the page and the tables' verdict
    columns (see the fields).
    """

    page: str
    width: int
    viewport: int
    scroll_width: int
    scroll_height: int
    overflowing: tuple[dict, ...]
    broken: tuple[dict, ...]
    exempt: tuple[dict, ...]
    screenshot: Path | None
    #: MathML on the page: `count` elements, `rendered` of them laid out with a size, and
    #: `raw`, the text runs outside code and formulas still holding `^{` (each with `shown`).
    formulas: dict = dataclasses.field(default_factory=dict)
    #: Every table header cell "Verdict": its `right` edge and the right edge `visible`
    #: without scrolling (px).
    verdicts: tuple[dict, ...] = ()

    @property
    def page_overflows(self) -> bool:
        return self.scroll_width > self.viewport


def browser() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    for name in BROWSERS:
        if found := shutil.which(name):
            return found
    return None


def _chromium(binary: str, url: str, width: int, height: int, *extra: str) -> str:
    with tempfile.TemporaryDirectory(prefix="flows-chromium-") as profile:
        argv = [
            binary,
            "--headless=new",
            "--no-sandbox",  # CI containers run as root, where the sandbox refuses to start
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",  # a profile of its own: runs in parallel are safe
            f"--window-size={width},{height}",
            "--virtual-time-budget=5000",
            *extra,
            url,
        ]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, check=False)
    if done.returncode != 0:
        raise RuntimeError(
            f"{binary} exited with {done.returncode} on {url}:\n{done.stderr[-3000:]}"
        )
    return done.stdout


def measure(
    page: str | Path,
    width: int,
    *,
    work: Path | None = None,
    binary: str,
    name: str | None = None,
    height: int = 900,
) -> Layout:
    """Load the HTML file `page` in headless Chromium at `width` × `height` px and measure
    its layout (module docstring); a full-page PNG is written into `work`.

    **Arguments:** `page` the HTML file (its copy with the measuring script is written
    beside it, so relative links and images still resolve); `work` a folder for the
    screenshot; `binary` the browser (`browser()`); `name` the page's name in messages
    (default: the file's path).

    **Returns:** a `Layout`.
    """
    page = Path(page)
    name = name or str(page)
    text = page.read_text(encoding="utf-8")
    script = f"<script>{_MEASURE_JS}</script>"
    cut = text.rfind("</body>")
    probed = text[:cut] + script + text[cut:] if cut >= 0 else text + script
    copy = page.with_name(f".{page.stem}.layout-{width}{page.suffix}")
    copy.write_text(probed, encoding="utf-8")
    try:
        dom = _chromium(binary, copy.as_uri(), width, height, "--dump-dom")
        found = re.search(r'<body[^>]*\sdata-layout="([^"]*)"', dom)
        if found is None:
            raise RuntimeError(f"the measuring script left no result in {name} at {width} px")
        data = json.loads(html.unescape(found.group(1)))
        if "error" in data:
            raise RuntimeError(f"the measuring script failed on {name}: {data['error']}")
        shot = None
        if work is not None:
            work.mkdir(parents=True, exist_ok=True)
            stem = re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-")
            shot = work / f"{stem}-{width}px.png"
            tall = max(height, min(int(data["scrollHeight"]), 16000))
            _chromium(binary, copy.as_uri(), width, tall, f"--screenshot={shot}")
    finally:
        copy.unlink(missing_ok=True)
    return Layout(
        page=name,
        width=width,
        viewport=int(data["viewport"]),
        scroll_width=int(data["scrollWidth"]),
        scroll_height=int(data["scrollHeight"]),
        overflowing=tuple(data["overflowing"]),
        broken=tuple(data["broken"]),
        exempt=tuple(data["exempt"]),
        screenshot=shot,
        formulas=data["formulas"],
        verdicts=tuple(data["verdicts"]),
    )


def describe_overflow(layout: Layout) -> str:
    """The overflow findings of `layout`, one line each, for an assertion message."""
    head = (
        f"{layout.page} at {layout.width} px: page scroll width {layout.scroll_width} px "
        f"> viewport {layout.viewport} px"
        if layout.page_overflows
        else f"{layout.page} at {layout.width} px"
    )
    rows = [
        f"  <{e['element']}> in {e['path'] or 'body'} spans x = {e['left']}..{e['right']} "
        f"px: {e['text']!r}"
        for e in layout.overflowing
    ]
    return "\n".join([head, *rows])


def describe_broken(layout: Layout) -> str:
    """The broken tokens of `layout`, one line each, for an assertion message."""
    rows = [
        f"  {e['shown']!r} in <{e['element']}> ({e['path'] or 'body'}): {e['text']!r}"
        for e in layout.broken
    ]
    return "\n".join([f"{layout.page} at {layout.width} px: tokens broken across lines", *rows])
